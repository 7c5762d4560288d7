/**
 * The tickets app against real services: PostgreSQL and Redis on their default local addresses (or
 * DATABASE_URL's server and REDIS_URL), and a Temporal dev server of the run's own (from the Temporal
 * CLI: `temporal` on PATH, or TEMPORAL_CLI). reservation-saga/testing makes the run's database, Redis
 * key prefix and task queues and runs two workers in this process (one holding seats for a minute,
 * one for two seconds, for the holds that are meant to expire); the test runs the payment service and
 * the app's webhook; everything is removed at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { ENTITY_ID_PATTERN, type SagaClient } from 'reservation-saga';
import { startTestEnvironment, type TestEnvironment } from 'reservation-saga/testing';
import { migrateTickets } from '../src/migrate';
import { DECLINED_CARD, ticketCode, ticketSagas, type TicketInput } from '../src/sagas';
import { PaymentRefusedError, PaymentsClient } from '../src/services/client';
import { createPaymentServer } from '../src/services/payments';
import { signPayment } from '../src/services/signature';
import { createPaymentWebhook } from '../src/webhook';

/** Names this run's events. */
const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
const webhookSecret = randomBytes(32).toString('base64');
/** How long the `quick` worker holds a seat: the holds meant to expire. */
const QUICK_HOLD_MS = 2000;
/** The outage of the payment service that an expired hold's compensation rides out. */
const OUTAGE_MS = 60_000;
const CARD = '4242424242424242';

let env: TestEnvironment;
let paymentServer: FastifyInstance;
let paymentsPort: number;
let webhook: FastifyInstance;
let payments: PaymentsClient;
type Shop = SagaClient<ReturnType<typeof ticketSagas>>;
/** Holds a seat for a minute: time enough for a buyer to pay. */
let shop: Shop;
/** Holds a seat for QUICK_HOLD_MS. */
let quick: Shop;

const paymentServerOn = (port: number) => {
  const server = createPaymentServer({ pool: env.pool, webhook: { url: `${webhookUrl}/webhooks/payments`, secret: webhookSecret } });
  return server.listen({ host: '127.0.0.1', port }).then(() => server);
};
let webhookUrl: string;

/**
 * A worker of the ticket sagas that holds a seat for `holdMs`, on a task queue of its own, and its
 * client. Both shops share the run's database, key prefix and secrets: they sell the same seats.
 */
function openShop(name: string, holdMs: number): Promise<Shop> {
  return env.startWorker(ticketSagas({ payments: { url: `http://127.0.0.1:${paymentsPort}`, timeoutMs: 2000 }, holdMs }), { taskQueue: name });
}

/** A port free now, for a server that must be named before it can be made. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

before(async () => {
  // The failures the tests provoke (the payment service's outage) are expected: only errors are logged.
  env = await startTestEnvironment({ migrate: migrateTickets, settings: { LOG_LEVEL: 'ERROR' } });
  // The payment service is told where the webhook is before the webhook (which needs a shop) exists.
  const webhookPort = await freePort();
  webhookUrl = `http://127.0.0.1:${webhookPort}`;
  paymentServer = await paymentServerOn(0);
  paymentsPort = (paymentServer.server.address() as AddressInfo).port;
  payments = new PaymentsClient({ baseUrl: `http://127.0.0.1:${paymentsPort}`, timeoutMs: 5000 });
  shop = await openShop('shop', 60_000);
  quick = await openShop('quick', QUICK_HOLD_MS);
  // The webhook signals through the long-hold shop's client: a signal reaches a saga on any task queue.
  webhook = createPaymentWebhook({ client: shop, secret: webhookSecret });
  await webhook.listen({ host: '127.0.0.1', port: webhookPort });
});

after(async () => {
  await webhook?.close();
  await paymentServer?.close();
  await env?.stop();
});

let events = 0;
/** An event of this test alone. */
const newEvent = () => `concert-${run}-${++events}`;

function ticketFor(event: string, seat: string, overrides: Partial<TicketInput> = {}): TicketInput {
  return { event, seat, buyer: `buyer-${randomUUID()}`, amountCents: 12_500, ...overrides };
}

/** Until `check` answers something (polled every 50 ms, for at most 20 s). */
async function eventually<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  for (const end = Date.now() + 20_000; Date.now() < end; await delay(50)) {
    const value = await check();
    if (value !== undefined) return value;
  }
  throw new Error(`${what}: not within 20 s`);
}

/** The payment the buyer is asked for, once the saga has asked the payment service for it. */
const paymentOf = (workflowId: string) => eventually(`the payment of ${workflowId}`, async () => (await payments.intents(workflowId))[0]);

/** The statuses of the payments a saga asked for. */
const paymentStatuses = async (workflowId: string) => (await payments.intents(workflowId)).map((p) => p.status);

async function ticketRows(event: string, seat: string) {
  const { rows } = await env.pool.query<{ status: string; ticket_code: string | null; refunded: boolean }>(
    'SELECT status, ticket_code, refunded_at IS NOT NULL AS refunded FROM tickets WHERE event = $1 AND seat = $2 ORDER BY id',
    [event, seat],
  );
  return rows;
}

const TIMEOUT = { timeout: 60_000 };

void describe('the tickets app', () => {
  void it('holds the seat while its buyer pays, and issues the ticket when the payment service confirms', TIMEOUT, async () => {
    const event = newEvent();
    const started = await shop.start('ticket', ticketFor(event, 'A1'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(started.reservation.status, 'SUCCESS');
    const payment = await paymentOf(started.workflowId);
    const waiting = await eventually('the hold', async () => {
      const { state } = await shop.status(started.workflowId);
      return state.phase === 'WAITING' ? state : undefined;
    });
    assert.equal(waiting.waiting?.signal, 'payment-confirmed');

    // Held: another buyer of the seat is told it is taken, and no saga starts for them.
    const other = await shop.start('ticket', ticketFor(event, 'A1'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(other.reservation.status, 'DUPLICATE');
    assert.equal(other.started, false);

    // A declined card changes nothing: the seat stays held for the buyer to pay with another.
    await assert.rejects(payments.pay(payment.id, DECLINED_CARD), (err: unknown) => err instanceof PaymentRefusedError && err.code === 'card_declined');
    assert.equal((await shop.status(started.workflowId)).state.phase, 'WAITING');
    await payments.pay(payment.id, CARD);
    const final = await shop.result(started.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    assert.match(final.entityId ?? '', ENTITY_ID_PATTERN);
    assert.deepEqual(await ticketRows(event, 'A1'), [{ status: 'COMPLETED', ticket_code: ticketCode(started.workflowId), refunded: false }]);
    assert.deepEqual(await paymentStatuses(started.workflowId), ['succeeded']);
    assert.equal((await shop.start('ticket', ticketFor(event, 'A1'), { idempotencyKey: `t-${randomUUID()}` })).reservation.status, 'DUPLICATE');
  });

  void it('refuses a confirmation the payment service did not sign: the seat stays held, unpaid', TIMEOUT, async () => {
    const event = newEvent();
    const started = await shop.start('ticket', ticketFor(event, 'A2'), { idempotencyKey: `t-${randomUUID()}` });
    const payment = await paymentOf(started.workflowId);
    const body = JSON.stringify({ id: 'evt_forged', type: 'payment_intent.succeeded', payment_intent: payment.id, reference: started.workflowId, amount_cents: 12_500 });
    const post = (signature: string) =>
      fetch(`${webhookUrl}/webhooks/payments`, { method: 'POST', headers: { 'content-type': 'application/json', 'payment-signature': signature }, body });

    assert.equal((await post(signPayment(randomBytes(32).toString('base64'), body, Math.floor(Date.now() / 1000)))).status, 401);
    assert.equal((await post('t=1,v1=00')).status, 401);

    assert.equal((await shop.status(started.workflowId)).state.phase, 'WAITING');
    await shop.cancel(started.workflowId);
    assert.equal((await shop.result(started.workflowId)).outcome, 'COMPENSATED');
    assert.deepEqual(await paymentStatuses(started.workflowId), ['canceled']);
  });

  void it('refunds a ticket with ticket-refund and sells its seat again, as a new ticket', TIMEOUT, async () => {
    const event = newEvent();
    const firstTicket = ticketFor(event, 'B7');
    const firstKey = `t-${randomUUID()}`;
    const first = await shop.start('ticket', firstTicket, { idempotencyKey: firstKey });
    await payments.pay((await paymentOf(first.workflowId)).id, CARD);
    const { outcome, entityId } = await shop.result(first.workflowId);
    assert.equal(outcome, 'COMPLETED');

    const refund = await shop.start('ticket-refund', { ticket: entityId! }, { idempotencyKey: `r-${randomUUID()}` });
    assert.equal(refund.reservation.status, 'SUCCESS');
    assert.equal((await shop.result(refund.workflowId)).outcome, 'COMPLETED');
    assert.deepEqual(await paymentStatuses(first.workflowId), ['refunded']);
    assert.deepEqual(await ticketRows(event, 'B7'), [{ status: 'RELEASED', ticket_code: ticketCode(first.workflowId), refunded: true }]);
    // Refunded once: a second refund finds no ticket.
    await assert.rejects(shop.start('ticket-refund', { ticket: entityId! }, { idempotencyKey: `r-${randomUUID()}` }), { name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });

    // The seat is sold again: a new ticket, paid and issued.
    const resale = await shop.start('ticket', ticketFor(event, 'B7'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(resale.reservation.status, 'SUCCESS');
    await payments.pay((await paymentOf(resale.workflowId)).id, CARD);
    const resold = await shop.result(resale.workflowId);
    assert.equal(resold.outcome, 'COMPLETED');
    assert.notEqual(resold.entityId, entityId);
    assert.deepEqual(await ticketRows(event, 'B7'), [
      { status: 'RELEASED', ticket_code: ticketCode(first.workflowId), refunded: true },
      { status: 'COMPLETED', ticket_code: ticketCode(resale.workflowId), refunded: false },
    ]);
    // The first buyer's retry still gets their own answer, the ticket they had.
    const retry = await shop.start('ticket', firstTicket, { idempotencyKey: firstKey });
    assert.equal(retry.workflowId, first.workflowId);
    assert.equal(retry.outcome, 'COMPLETED');
    assert.equal((await shop.result(retry.workflowId)).entityId, entityId);
  });

  void it('lets an unpaid hold expire: the payment cancelled, a late payment refused, the seat sold again', TIMEOUT, async () => {
    const event = newEvent();
    const started = await quick.start('ticket', ticketFor(event, 'C3'), { idempotencyKey: `t-${randomUUID()}` });
    const payment = await paymentOf(started.workflowId);
    const final = await quick.result(started.workflowId);

    assert.equal(final.outcome, 'COMPENSATED');
    assert.equal(final.reason, 'WAIT_TIMED_OUT');
    assert.deepEqual(await paymentStatuses(started.workflowId), ['canceled']);
    await assert.rejects(payments.pay(payment.id, CARD), (err: unknown) => err instanceof PaymentRefusedError && err.code === 'payment_intent_canceled');
    assert.deepEqual((await ticketRows(event, 'C3')).map((r) => r.status), ['COMPENSATED']);

    const next = await shop.start('ticket', ticketFor(event, 'C3'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(next.reservation.status, 'SUCCESS');
    await payments.pay((await paymentOf(next.workflowId)).id, CARD);
    assert.equal((await shop.result(next.workflowId)).outcome, 'COMPLETED');
  });

  void it('sells a seat two buyers race for once: one hold, one payment asked for, one ticket', TIMEOUT, async () => {
    const event = newEvent();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => shop.start('ticket', ticketFor(event, 'D4'), { idempotencyKey: `t-${randomUUID()}` })),
    );
    const winners = answers.filter((a) => a.reservation.status === 'SUCCESS');
    assert.equal(winners.length, 1, `answers: ${answers.map((a) => a.reservation.status).join(', ')}`);
    assert.ok(answers.every((a) => a === winners[0] || ((a.reservation.status === 'CONFLICT' || a.reservation.status === 'DUPLICATE') && !a.started)));

    await payments.pay((await paymentOf(winners[0]!.workflowId)).id, CARD);
    assert.equal((await shop.result(winners[0]!.workflowId)).outcome, 'COMPLETED');
    const losers = answers.filter((a) => a !== winners[0]);
    assert.deepEqual((await Promise.all(losers.map((a) => payments.intents(a.workflowId)))).flat(), []);
    assert.deepEqual(await ticketRows(event, 'D4'), [{ status: 'COMPLETED', ticket_code: ticketCode(winners[0]!.workflowId), refunded: false }]);
  });

  void it('refuses a malformed request before any side effect', TIMEOUT, async () => {
    await assert.rejects(shop.start('ticket', ticketFor(newEvent(), 'row 5'), { idempotencyKey: `t-${randomUUID()}` }), {
      name: 'SagaInputError',
      code: 'INVALID_INPUT',
    });
  });

  void it(`rides out a ${OUTAGE_MS / 1000}-second outage of the payment service while an expired hold is undone, without an operator`, { timeout: OUTAGE_MS + 60_000 }, async () => {
    const event = newEvent();
    const started = await quick.start('ticket', ticketFor(event, 'E5'), { idempotencyKey: `t-${randomUUID()}` });
    await paymentOf(started.workflowId);

    // The payment service goes down: its port refuses every call (the connection is reset) for a minute.
    await paymentServer.close();
    let attempts = 0;
    const down: Server = createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => down.listen(paymentsPort, '127.0.0.1', resolve));
    await delay(OUTAGE_MS);
    await new Promise<void>((resolve) => down.close(() => resolve()));

    // Meanwhile the hold expired and its compensation kept calling, and no operator was asked for.
    assert.ok(attempts >= 3, `the compensation called ${attempts} times during the outage`);
    const { state } = await quick.status(started.workflowId);
    assert.equal(state.phase, 'COMPENSATING');
    assert.equal(state.attention, undefined);

    paymentServer = await paymentServerOn(paymentsPort);
    const final = await quick.result(started.workflowId);
    assert.equal(final.outcome, 'COMPENSATED');
    assert.equal(final.reason, 'WAIT_TIMED_OUT');
    assert.deepEqual(await paymentStatuses(started.workflowId), ['canceled']);
  });
});
