/**
 * The demo's seat scene: the tickets example app (examples/tickets) next to the order scenario. A
 * seat held while its buyer pays and sold; another buyer told it is taken; a hold left unpaid that
 * expires; that seat sold to the next buyer; the first ticket refunded and its seat sold again.
 *
 * The app runs in the demo's process, as a team would run it beside its own: the example payment
 * service (its tables in the dev database's schema `payments`), the app's webhook that turns the
 * service's confirmations into the sagas' signal, and a worker of the tickets' saga types on a task
 * queue of their own (`<queue>-tickets`), whose holds last {@link SEAT_HOLD_MS}; the worker's log (the
 * process's Temporal runtime, one JSON line per saga event) goes to a file of its own.
 */
import { createWriteStream } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { Runtime } from '@temporalio/worker';
import pg from 'pg';
import { SagaClient } from '../../src/client';
import type { Config } from '../../src/config';
import { jsonLogger } from '../../src/logging/json-logger';
import type { SagaState } from '../../src/shared';
import { createWorker, type AppWorker } from '../../src/worker';
import { migrateTickets } from '../../examples/tickets/src/migrate';
import { ticketSagas, type TicketInput } from '../../examples/tickets/src/sagas';
import { PaymentsClient } from '../../examples/tickets/src/services/client';
import { createPaymentServer } from '../../examples/tickets/src/services/payments';
import { createPaymentWebhook } from '../../examples/tickets/src/webhook';
import { describe, follow, key, rejectedRow, sagaRow, send, type Answered, type DemoRow, type ScenarioContext } from './scenario';
import { freePort } from './stack';

/** How long the demo's seats are held for their buyer to pay (the app's default is 10 minutes). */
export const SEAT_HOLD_MS = 4000;

const CARD = '4242424242424242';

/** The tickets app as the demo runs it. */
export interface SeatShop {
  client: SagaClient;
  payments: PaymentsClient;
  close(): Promise<void>;
}

/**
 * Migrates the dev database for the tickets app and starts its payment service, webhook and worker,
 * the worker logging to `logPath`.
 */
export async function openSeatShop(config: Config, webhookSecret: string, logPath: string): Promise<SeatShop> {
  const log = createWriteStream(logPath, { flags: 'a' });
  // This process's runtime: the worker made below logs to the file, not between the demo's lines.
  Runtime.install({ logger: jsonLogger(config.observability.logLevel, (line) => log.write(line)) });
  await migrateTickets(config.db.url);
  const pool = new pg.Pool({ connectionString: config.db.url, max: 4 });
  const closers: (() => Promise<unknown>)[] = [() => new Promise((resolve) => log.end(resolve)), () => pool.end()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const webhookPort = await freePort();
    const paymentServer = createPaymentServer({ pool, webhook: { url: `http://127.0.0.1:${webhookPort}/webhooks/payments`, secret: webhookSecret } });
    await paymentServer.listen({ host: '127.0.0.1', port: 0 });
    closers.push(() => paymentServer.close());
    const paymentsUrl = `http://127.0.0.1:${(paymentServer.server.address() as AddressInfo).port}`;
    const ticketsConfig: Config = { ...config, temporal: { ...config.temporal, taskQueue: `${config.temporal.taskQueue}-tickets` } };
    const sagas = ticketSagas({ payments: { url: paymentsUrl, timeoutMs: 5000 }, holdMs: SEAT_HOLD_MS });
    const app: AppWorker = await createWorker({ sagas, config: ticketsConfig });
    const running = app.worker.run();
    closers.push(async () => {
      app.worker.shutdown();
      await running;
      await app.close();
    });
    const client = await SagaClient.connect({ sagas, config: ticketsConfig });
    closers.push(() => client.close());
    const webhook = createPaymentWebhook({ client, secret: webhookSecret });
    await webhook.listen({ host: '127.0.0.1', port: webhookPort });
    closers.push(() => webhook.close());
    return { client, payments: new PaymentsClient({ baseUrl: paymentsUrl, timeoutMs: 5000 }), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * Scene 10: the seats of one event. Each buyer's request goes through the gate; a held seat waits
 * (phase WAITING) for its payment, which the demo makes at the payment service as the buyer would.
 */
export async function seats(scenario: ScenarioContext, shop: SeatShop): Promise<DemoRow[]> {
  const ctx: ScenarioContext = { ...scenario, client: shop.client };
  const event = `gala-${ctx.runId}`;
  const ticket = (seat: string, buyer: string): TicketInput => ({ event, seat, buyer: `${buyer}-${ctx.runId}`, amountCents: 12_500 });
  const hold = async (id: string, seat: string, buyer: string) => {
    const s = await send(ctx, ticket(seat, buyer), key(ctx, id), 'ticket');
    ctx.say(`     ${buyer} asks for seat ${seat}: ${describe(s)}`);
    return s;
  };
  /** Waits until the saga holds the seat, then pays what it asked for, as the buyer. */
  const pay = async (s: Answered, buyer: string) => {
    await follow(ctx, s.workflowId, undefined, (state) => state.phase === 'WAITING');
    const [payment] = await shop.payments.intents(s.workflowId);
    if (!payment) throw new Error(`${s.workflowId} waits for a payment it did not ask for`);
    await shop.payments.pay(payment.id, CARD);
    ctx.say(`     ${buyer} pays ${payment.id}; the payment service's webhook signals the saga`);
    return follow(ctx, s.workflowId);
  };
  const issued = (final: SagaState) => final.outcome === 'COMPLETED' && final.stepsDone.includes('issueTicket');

  ctx.say(`10/10  The tickets example: the seats of event ${event}, each held ${SEAT_HOLD_MS / 1000} s for its buyer to pay`);
  const rows: DemoRow[] = [];
  const sold = await hold('seat-sold', 'A1', 'ada');
  const soldFinal = await pay(sold, 'ada');
  rows.push(sagaRow('seat-sold', 'seat A1: held, paid', sold, soldFinal, 'COMPLETED: the ticket issued', issued(soldFinal)));

  const taken = await hold('seat-taken', 'A1', 'bob');
  rows.push(await rejectedRow(ctx, 'seat-taken', 'seat A1 again, another buyer', taken, ['DUPLICATE']));

  const unpaid = await hold('seat-unpaid', 'A2', 'cy');
  ctx.say(`     cy does not pay: the hold expires after ${SEAT_HOLD_MS / 1000} s`);
  const unpaidFinal = await follow(ctx, unpaid.workflowId);
  rows.push(
    sagaRow('seat-unpaid', 'seat A2: held, not paid', unpaid, unpaidFinal, 'COMPENSATED (WAIT_TIMED_OUT): the payment cancelled', unpaidFinal.outcome === 'COMPENSATED' && unpaidFinal.reason === 'WAIT_TIMED_OUT' && unpaidFinal.compensationsRun.includes('cancelPayment')),
  );

  const next = await hold('seat-next', 'A2', 'dan');
  const nextFinal = await pay(next, 'dan');
  rows.push(sagaRow('seat-next', 'seat A2 after the hold expired', next, nextFinal, 'COMPLETED: the seat sold to the next buyer', next.reservation.status === 'SUCCESS' && issued(nextFinal)));

  ctx.say(`     ada returns ticket ${soldFinal.entityId}: ticket-refund refunds the payment and releases the seat`);
  const refund = await send(ctx, { ticket: soldFinal.entityId }, key(ctx, 'seat-refund'), 'ticket-refund');
  ctx.say(`     ${describe(refund)}`);
  const refundFinal = await follow(ctx, refund.workflowId);
  rows.push(sagaRow('seat-refund', 'ticket-refund of seat A1', refund, refundFinal, 'COMPLETED: refunded, the seat released', refundFinal.outcome === 'COMPLETED'));

  const resold = await hold('seat-resold', 'A1', 'eve');
  const resoldFinal = await pay(resold, 'eve');
  rows.push(
    sagaRow('seat-resold', 'seat A1 after its refund', resold, resoldFinal, 'COMPLETED: a new ticket for the seat', resold.reservation.status === 'SUCCESS' && issued(resoldFinal) && resoldFinal.entityId !== soldFinal.entityId),
  );
  return rows;
}
