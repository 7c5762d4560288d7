/**
 * The tickets app against real services: PostgreSQL and Redis on their default local addresses, and
 * the Temporal server at TEMPORAL_ADDRESS (with reservation-saga's search attributes: `npx saga
 * setup` registers them). The run makes a database, Redis key prefix and task queues of its own, runs
 * the payment service, the app's webhook and two workers in this process (one holding seats for a
 * minute, one for two seconds, for the holds that are meant to expire), and removes what it made.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ENTITY_ID_PATTERN, loadConfig, SagaClient } from 'reservation-saga';
import { createWorker, ensureDatabase, type AppWorker } from 'reservation-saga/worker';
import { migrateTickets } from '../src/migrate';
import { DECLINED_CARD, ticketCode, ticketSagas, type TicketInput } from '../src/sagas';
import { PaymentRefusedError, PaymentsClient } from '../src/services/client';
import { createPaymentServer } from '../src/services/payments';
import { signPayment } from '../src/services/signature';
import { createPaymentWebhook } from '../src/webhook';

const TEMPORAL_ADDRESS = process.env.TEMPORAL_ADDRESS;
if (!TEMPORAL_ADDRESS) throw new Error('set TEMPORAL_ADDRESS to a Temporal server with reservation-saga\'s search attributes (npx saga setup registers them)');

const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
const database = `tickets_test_${run}`;
const databaseUrl = `postgres://postgres@127.0.0.1:5432/${database}`;
const keyPrefix = `tickets-test:${run}:`;
const webhookSecret = randomBytes(32).toString('base64');
/** How long the `quick` worker holds a seat: the holds meant to expire. */
const QUICK_HOLD_MS = 2000;
/** The outage of the payment service that an expired hold's compensation rides out. */
const OUTAGE_MS = 60_000;
const CARD = '4242424242424242';

let pool: pg.Pool;
let paymentServer: FastifyInstance;
let paymentsPort: number;
let webhook: FastifyInstance;
let payments: PaymentsClient;
/** Holds a seat for a minute: time enough for a buyer to pay. */
let shop: Shop;
/** Holds a seat for QUICK_HOLD_MS. */
let quick: Shop;

interface Shop {
  client: SagaClient;
  app: AppWorker;
  running: Promise<void>;
}

const paymentServerOn = (port: number) => {
  const server = createPaymentServer({ pool, webhook: { url: `${webhookUrl}/webhooks/payments`, secret: webhookSecret } });
  return server.listen({ host: '127.0.0.1', port }).then(() => server);
};
let webhookUrl: string;

async function openShop(name: string, holdMs: number): Promise<Shop> {
  const config = loadConfig({
    TEMPORAL_ADDRESS,
    TEMPORAL_TASK_QUEUE: `tickets-test-${name}-${run}`,
    DATABASE_URL: databaseUrl,
    REDIS_URL: 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: keyPrefix,
    INTENT_KEY_SECRET: intentSecret,
    SAGA_CODEC_KEYS: codecKeys,
    // The failures the tests provoke (the payment service's outage) are expected: only errors are logged.
    LOG_LEVEL: 'ERROR',
  });
  const sagas = ticketSagas({ payments: { url: `http://127.0.0.1:${paymentsPort}`, timeoutMs: 2000 }, holdMs });
  const app = await createWorker({ sagas, config });
  const running = app.worker.run();
  return { client: await SagaClient.connect({ sagas, config }), app, running };
}
// One secret and one codec for both shops: they sell the same seats.
const intentSecret = randomBytes(32).toString('base64');
const codecKeys = `k1:${randomBytes(32).toString('base64')}`;

/** A port free now, for a server that must be named before it can be made. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

before(async () => {
  await ensureDatabase(databaseUrl);
  await migrateTickets(databaseUrl);
  pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  // The payment service is told where the webhook is before the webhook (which needs a shop) exists.
  const webhookPort = await freePort();
  webhookUrl = `http://127.0.0.1:${webhookPort}`;
  paymentServer = await paymentServerOn(0);
  paymentsPort = (paymentServer.server.address() as AddressInfo).port;
  payments = new PaymentsClient({ baseUrl: `http://127.0.0.1:${paymentsPort}`, timeoutMs: 5000 });
  shop = await openShop('shop', 60_000);
  quick = await openShop('quick', QUICK_HOLD_MS);
  // The webhook signals through the long-hold shop's client: a signal reaches a saga on any task queue.
  webhook = createPaymentWebhook({ client: shop.client, secret: webhookSecret });
  await webhook.listen({ host: '127.0.0.1', port: webhookPort });
});

after(async () => {
  for (const s of [shop, quick]) {
    if (!s) continue;
    await s.client.close();
    s.app.worker.shutdown();
    await s.running;
    await s.app.close();
  }
  await webhook?.close();
  await paymentServer?.close();
  await pool?.end();
  const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
  const redis = new Redis('redis://127.0.0.1:6379');
  for await (const keys of redis.scanStream({ match: `${keyPrefix}*`, count: 500 }) as AsyncIterable<string[]>) {
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
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
  const { rows } = await pool.query<{ status: string; ticket_code: string | null; refunded: boolean }>(
    'SELECT status, ticket_code, refunded_at IS NOT NULL AS refunded FROM tickets WHERE event = $1 AND seat = $2 ORDER BY id',
    [event, seat],
  );
  return rows;
}

const TIMEOUT = { timeout: 60_000 };

void describe('the tickets app', () => {
  void it('holds the seat while its buyer pays, and issues the ticket when the payment service confirms', TIMEOUT, async () => {
    const event = newEvent();
    const started = await shop.client.start('ticket', ticketFor(event, 'A1'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(started.reservation.status, 'SUCCESS');
    const payment = await paymentOf(started.workflowId);
    const waiting = await eventually('the hold', async () => {
      const { state } = await shop.client.status(started.workflowId);
      return state.phase === 'WAITING' ? state : undefined;
    });
    assert.equal(waiting.waiting?.signal, 'payment-confirmed');

    // Held: another buyer of the seat is told it is taken, and no saga starts for them.
    const other = await shop.client.start('ticket', ticketFor(event, 'A1'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(other.reservation.status, 'DUPLICATE');
    assert.equal(other.started, false);

    // A declined card changes nothing: the seat stays held for the buyer to pay with another.
    await assert.rejects(payments.pay(payment.id, DECLINED_CARD), (err: unknown) => err instanceof PaymentRefusedError && err.code === 'card_declined');
    assert.equal((await shop.client.status(started.workflowId)).state.phase, 'WAITING');
    await payments.pay(payment.id, CARD);
    const final = await shop.client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    assert.match(final.entityId ?? '', ENTITY_ID_PATTERN);
    assert.deepEqual(await ticketRows(event, 'A1'), [{ status: 'COMPLETED', ticket_code: ticketCode(started.workflowId), refunded: false }]);
    assert.deepEqual(await paymentStatuses(started.workflowId), ['succeeded']);
    assert.equal((await shop.client.start('ticket', ticketFor(event, 'A1'), { idempotencyKey: `t-${randomUUID()}` })).reservation.status, 'DUPLICATE');
  });

  void it('refuses a confirmation the payment service did not sign: the seat stays held, unpaid', TIMEOUT, async () => {
    const event = newEvent();
    const started = await shop.client.start('ticket', ticketFor(event, 'A2'), { idempotencyKey: `t-${randomUUID()}` });
    const payment = await paymentOf(started.workflowId);
    const body = JSON.stringify({ id: 'evt_forged', type: 'payment_intent.succeeded', payment_intent: payment.id, reference: started.workflowId, amount_cents: 12_500 });
    const post = (signature: string) =>
      fetch(`${webhookUrl}/webhooks/payments`, { method: 'POST', headers: { 'content-type': 'application/json', 'payment-signature': signature }, body });

    assert.equal((await post(signPayment(randomBytes(32).toString('base64'), body, Math.floor(Date.now() / 1000)))).status, 401);
    assert.equal((await post('t=1,v1=00')).status, 401);

    assert.equal((await shop.client.status(started.workflowId)).state.phase, 'WAITING');
    await shop.client.cancel(started.workflowId);
    assert.equal((await shop.client.result(started.workflowId)).outcome, 'COMPENSATED');
    assert.deepEqual(await paymentStatuses(started.workflowId), ['canceled']);
  });

  void it('refunds a ticket with ticket-refund and sells its seat again, as a new ticket', TIMEOUT, async () => {
    const event = newEvent();
    const firstTicket = ticketFor(event, 'B7');
    const firstKey = `t-${randomUUID()}`;
    const first = await shop.client.start('ticket', firstTicket, { idempotencyKey: firstKey });
    await payments.pay((await paymentOf(first.workflowId)).id, CARD);
    const { outcome, entityId } = await shop.client.result(first.workflowId);
    assert.equal(outcome, 'COMPLETED');

    const refund = await shop.client.start('ticket-refund', { ticket: entityId! }, { idempotencyKey: `r-${randomUUID()}` });
    assert.equal(refund.reservation.status, 'SUCCESS');
    assert.equal((await shop.client.result(refund.workflowId)).outcome, 'COMPLETED');
    assert.deepEqual(await paymentStatuses(first.workflowId), ['refunded']);
    assert.deepEqual(await ticketRows(event, 'B7'), [{ status: 'RELEASED', ticket_code: ticketCode(first.workflowId), refunded: true }]);
    // Refunded once: a second refund finds no ticket.
    await assert.rejects(shop.client.start('ticket-refund', { ticket: entityId! }, { idempotencyKey: `r-${randomUUID()}` }), { name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });

    // The seat is sold again: a new ticket, paid and issued.
    const resale = await shop.client.start('ticket', ticketFor(event, 'B7'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(resale.reservation.status, 'SUCCESS');
    await payments.pay((await paymentOf(resale.workflowId)).id, CARD);
    const resold = await shop.client.result(resale.workflowId);
    assert.equal(resold.outcome, 'COMPLETED');
    assert.notEqual(resold.entityId, entityId);
    assert.deepEqual(await ticketRows(event, 'B7'), [
      { status: 'RELEASED', ticket_code: ticketCode(first.workflowId), refunded: true },
      { status: 'COMPLETED', ticket_code: ticketCode(resale.workflowId), refunded: false },
    ]);
    // The first buyer's retry still gets their own answer, the ticket they had.
    const retry = await shop.client.start('ticket', firstTicket, { idempotencyKey: firstKey });
    assert.equal(retry.workflowId, first.workflowId);
    assert.equal(retry.outcome, 'COMPLETED');
    assert.equal((await shop.client.result(retry.workflowId)).entityId, entityId);
  });

  void it('lets an unpaid hold expire: the payment cancelled, a late payment refused, the seat sold again', TIMEOUT, async () => {
    const event = newEvent();
    const started = await quick.client.start('ticket', ticketFor(event, 'C3'), { idempotencyKey: `t-${randomUUID()}` });
    const payment = await paymentOf(started.workflowId);
    const final = await quick.client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPENSATED');
    assert.equal(final.reason, 'WAIT_TIMED_OUT');
    assert.deepEqual(await paymentStatuses(started.workflowId), ['canceled']);
    await assert.rejects(payments.pay(payment.id, CARD), (err: unknown) => err instanceof PaymentRefusedError && err.code === 'payment_intent_canceled');
    assert.deepEqual((await ticketRows(event, 'C3')).map((r) => r.status), ['COMPENSATED']);

    const next = await shop.client.start('ticket', ticketFor(event, 'C3'), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(next.reservation.status, 'SUCCESS');
    await payments.pay((await paymentOf(next.workflowId)).id, CARD);
    assert.equal((await shop.client.result(next.workflowId)).outcome, 'COMPLETED');
  });

  void it('sells a seat two buyers race for once: one hold, one payment asked for, one ticket', TIMEOUT, async () => {
    const event = newEvent();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => shop.client.start('ticket', ticketFor(event, 'D4'), { idempotencyKey: `t-${randomUUID()}` })),
    );
    const winners = answers.filter((a) => a.reservation.status === 'SUCCESS');
    assert.equal(winners.length, 1, `answers: ${answers.map((a) => a.reservation.status).join(', ')}`);
    assert.ok(answers.every((a) => a === winners[0] || ((a.reservation.status === 'CONFLICT' || a.reservation.status === 'DUPLICATE') && !a.started)));

    await payments.pay((await paymentOf(winners[0]!.workflowId)).id, CARD);
    assert.equal((await shop.client.result(winners[0]!.workflowId)).outcome, 'COMPLETED');
    const losers = answers.filter((a) => a !== winners[0]);
    assert.deepEqual((await Promise.all(losers.map((a) => payments.intents(a.workflowId)))).flat(), []);
    assert.deepEqual(await ticketRows(event, 'D4'), [{ status: 'COMPLETED', ticket_code: ticketCode(winners[0]!.workflowId), refunded: false }]);
  });

  void it('refuses a malformed request before any side effect', TIMEOUT, async () => {
    await assert.rejects(shop.client.start('ticket', ticketFor(newEvent(), 'row 5'), { idempotencyKey: `t-${randomUUID()}` }), {
      name: 'SagaInputError',
      code: 'INVALID_INPUT',
    });
  });

  void it(`rides out a ${OUTAGE_MS / 1000}-second outage of the payment service while an expired hold is undone, without an operator`, { timeout: OUTAGE_MS + 60_000 }, async () => {
    const event = newEvent();
    const started = await quick.client.start('ticket', ticketFor(event, 'E5'), { idempotencyKey: `t-${randomUUID()}` });
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
    const { state } = await quick.client.status(started.workflowId);
    assert.equal(state.phase, 'COMPENSATING');
    assert.equal(state.attention, undefined);

    paymentServer = await paymentServerOn(paymentsPort);
    const final = await quick.client.result(started.workflowId);
    assert.equal(final.outcome, 'COMPENSATED');
    assert.equal(final.reason, 'WAIT_TIMED_OUT');
    assert.deepEqual(await paymentStatuses(started.workflowId), ['canceled']);
  });
});
