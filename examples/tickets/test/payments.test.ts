/**
 * The payment service's contract, what the ticket sagas and the webhook receiver rely on: an intent
 * is created once per idempotency key; paying charges once; each payment is announced by one signed
 * event, sent again until the app takes it; a cancellation by the creation's key is answered only
 * once that creation has settled, voids a key no intent was created with, and refunds a paid
 * intent; a refund is made at most once per intent; and all of it is in PostgreSQL, so a restarted
 * service carries on. Needs PostgreSQL only.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { startTestDatabase, type TestDatabase } from 'reservation-saga/testing';
import { KeyInUseError, KeyVoidedError, PaymentRefusedError, PaymentsClient, ServiceRequestError } from '../src/services/client';
import { createPaymentServer, DECLINED_CARD, PAYMENTS_SCHEMA_SQL, type PaymentEvent } from '../src/services/payments';
import { signPayment, verifyPaymentSignature } from '../src/services/signature';

const SECRET = `whsec_${randomBytes(16).toString('hex')}`;
const CARD = '4242424242424242';
const SLOW_MS = 1000;

let database: TestDatabase;
let pool: pg.Pool;
let server: FastifyInstance;
let port: number;
let receiver: Server;
let payments: PaymentsClient;
/** Does not wait while a key is in use: sees the service's 409 itself. */
let impatient: PaymentsClient;

/** What the tests wait on: `received` (the receiver answered an attempt), `delivered`, `failed`, `creationStarted`. */
const bus = new EventEmitter();
/** Every webhook request the receiver got, in order, with whether its signature was valid. */
const received: { event: PaymentEvent; valid: boolean }[] = [];
/** What the receiver answers to an intent's next attempts (then 200). */
const answers = new Map<string, number[]>();
const logLines: string[] = [];

function next<A extends unknown[]>(name: string, match: (...args: A) => boolean): Promise<A> {
  return new Promise((resolve) => {
    const listener = (...args: unknown[]) => {
      if (!match(...(args as A))) return;
      bus.off(name, listener);
      resolve(args as A);
    };
    bus.on(name, listener);
  });
}

async function startServer(onPort: number): Promise<FastifyInstance> {
  const s = createPaymentServer({
    pool,
    webhook: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/payments`, secret: SECRET },
    createDelayMs: (body) => (body.description === 'slow' ? SLOW_MS : 0),
    log: (line) => logLines.push(line),
    hooks: {
      creationStarted: (key) => bus.emit('creationStarted', key),
      webhookDelivered: (event, status) => bus.emit('delivered', event, status),
      webhookFailed: (event, why) => bus.emit('failed', event, why),
    },
  });
  await s.listen({ host: '127.0.0.1', port: onPort });
  return s;
}

before(async () => {
  // A database of the test's own, empty: the payment service's schema is what is tested here.
  database = await startTestDatabase({ migrate: false });
  pool = database.pool;
  await pool.query(PAYMENTS_SCHEMA_SQL);
  await pool.query(PAYMENTS_SCHEMA_SQL); // idempotent
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const header = req.headers['payment-signature'];
      const valid = verifyPaymentSignature(SECRET, typeof header === 'string' ? header : undefined, raw);
      const event = JSON.parse(raw) as PaymentEvent;
      received.push({ event, valid });
      const status = valid ? (answers.get(event.payment_intent)?.shift() ?? 200) : 400;
      res.writeHead(status).end();
      bus.emit('received', event, status);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  server = await startServer(0);
  port = (server.server.address() as AddressInfo).port;
  payments = new PaymentsClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 5000 });
  impatient = new PaymentsClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 5000, waitWhileInUseMs: 0 });
});

after(async () => {
  await server?.close();
  receiver?.closeAllConnections();
  await new Promise((resolve) => (receiver ? receiver.close(resolve) : resolve(undefined)));
  await database?.stop();
});

const key = (what: string) => `${what}-${randomUUID()}`;
const refused = (code: string) => (err: unknown) => err instanceof PaymentRefusedError && err.code === code;
const attemptsOf = (id: string) => received.filter((r) => r.event.payment_intent === id);

async function newIntent(description?: string): Promise<{ creationKey: string; id: string; reference: string }> {
  const creationKey = key('create');
  const reference = key('ticket');
  const { id } = await payments.createIntent(creationKey, { amountCents: 2500, reference, ...(description ? { description } : {}) });
  return { creationKey, id, reference };
}

/** Pays `id` and waits until the app took the event. */
async function payDelivered(id: string): Promise<PaymentEvent> {
  const delivered = next<[PaymentEvent, number]>('delivered', (event) => event.payment_intent === id);
  assert.equal((await payments.pay(id, CARD)).status, 'succeeded');
  return (await delivered)[0];
}

void describe('the payment service', () => {
  void it('creates an intent once per idempotency key, and refuses the key with another body', async () => {
    const { creationKey, id, reference } = await newIntent();
    assert.match(id, /^pi_/);
    assert.equal((await payments.createIntent(creationKey, { amountCents: 2500, reference })).id, id);
    await assert.rejects(payments.createIntent(creationKey, { amountCents: 9900, reference }), (err) => err instanceof ServiceRequestError && err.status === 422 && err.code === 'idempotency_key_reused');
    assert.deepEqual(await payments.intents(reference), [{ id, status: 'requires_payment', amountCents: 2500, reference, refunded: false }]);

    const url = `http://127.0.0.1:${port}/v1/payment-intents`;
    const replay = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': creationKey }, body: JSON.stringify({ amount_cents: 2500, reference }) });
    assert.equal(replay.status, 201);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    const keyless = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount_cents: 2500, reference }) });
    assert.equal(keyless.status, 400);
  });

  void it('declines a card and takes another; paying twice charges once and sends one signed event', async () => {
    const { id, reference } = await newIntent();
    await assert.rejects(payments.pay(id, DECLINED_CARD), refused('card_declined'));
    assert.equal((await payments.intent(id)).status, 'requires_payment');

    const event = await payDelivered(id);
    assert.equal((await payments.pay(id, CARD)).status, 'succeeded');

    assert.deepEqual(event, { id: event.id, type: 'payment_intent.succeeded', payment_intent: id, reference, amount_cents: 2500 });
    assert.match(event.id, /^evt_/);
    assert.deepEqual(attemptsOf(id), [{ event, valid: true }]);
    const { rows } = await pool.query('SELECT status FROM payments.webhook_events WHERE payment_intent = $1', [id]);
    assert.deepEqual(rows, [{ status: 'delivered' }]);
    const intent = await payments.intent(id);
    assert.equal(intent.cardLast4, '4242');
    assert.ok(!logLines.some((line) => line.includes(CARD) || line.includes(DECLINED_CARD)), 'no card number in the log');
  });

  void it('sends the event again until the app answers 2xx, and stops at a final 4xx', async () => {
    const { id } = await newIntent();
    answers.set(id, [500, 503]);
    const event = await payDelivered(id);
    assert.deepEqual(attemptsOf(id), [0, 1, 2].map(() => ({ event, valid: true })));

    const refusedOne = await newIntent();
    answers.set(refusedOne.id, [400]);
    const failed = next<[PaymentEvent, string]>('failed', (e) => e.payment_intent === refusedOne.id);
    await payments.pay(refusedOne.id, CARD);
    assert.match((await failed)[1], /400/);
    assert.equal(attemptsOf(refusedOne.id).length, 1);
  });

  void it('signs so that a tampered, re-signed or old request fails verification', () => {
    const body = JSON.stringify({ id: 'evt_1', type: 'payment_intent.succeeded' });
    const now = 1_750_000_000;
    const header = signPayment(SECRET, body, now);
    assert.ok(verifyPaymentSignature(SECRET, header, body, { nowS: now + 5 }));
    assert.ok(verifyPaymentSignature(SECRET, `${header},v1=${'0'.repeat(64)}`, body, { nowS: now }), 'one valid v1 among several');
    assert.equal(verifyPaymentSignature(SECRET, header, body.replace('evt_1', 'evt_2'), { nowS: now }), false);
    assert.equal(verifyPaymentSignature('another secret', header, body, { nowS: now }), false);
    assert.equal(verifyPaymentSignature(SECRET, header.replace(`t=${now}`, `t=${now + 1}`), body, { nowS: now }), false);
    assert.equal(verifyPaymentSignature(SECRET, header, body, { nowS: now + 301 }), false);
    assert.equal(verifyPaymentSignature(SECRET, undefined, body), false);
    assert.equal(verifyPaymentSignature(SECRET, 'v1=abc,t=x', body), false);
  });

  void it('voids a creation key no intent was made with: a creation arriving later is refused and creates nothing', async () => {
    const creationKey = key('create');
    const reference = key('ticket');
    const cancelKey = key('cancel');
    const voided = { status: 'voided', paymentIntent: null, refund: null };
    assert.deepEqual(await payments.cancelByCreationKey(cancelKey, creationKey), voided);
    assert.deepEqual(await payments.cancelByCreationKey(cancelKey, creationKey), voided);
    await assert.rejects(payments.createIntent(creationKey, { amountCents: 2500, reference }), KeyVoidedError);
    assert.deepEqual(await payments.intents(reference), []);
  });

  void it('answers a cancellation 409 while the creation is processed, then cancels the intent it made', async () => {
    const creationKey = key('create');
    const reference = key('ticket');
    const cancelKey = key('cancel');
    const started = next<[string]>('creationStarted', (k) => k === creationKey);
    const creation = payments.createIntent(creationKey, { amountCents: 2500, reference, description: 'slow' });
    await started;

    await assert.rejects(impatient.cancelByCreationKey(cancelKey, creationKey), (err) => err instanceof KeyInUseError && err.code === 'creation_in_progress');
    // A patient caller (as the saga's compensation is) waits for the creation to settle, then cancels.
    const canceled = await payments.cancelByCreationKey(cancelKey, creationKey);
    const { id } = await creation;
    assert.deepEqual(canceled, { status: 'canceled', paymentIntent: id, refund: null });
    await assert.rejects(payments.pay(id, CARD), refused('payment_intent_canceled'));
    assert.deepEqual(await payments.intents(reference), [{ id, status: 'canceled', amountCents: 2500, reference, refunded: false }]);
  });

  void it('refunds a paid intent when its payment is cancelled, once, whatever key asks', async () => {
    const { creationKey, id } = await newIntent();
    await payDelivered(id);
    const refunded = await payments.cancelByCreationKey(key('cancel'), creationKey);
    assert.equal(refunded.status, 'refunded');
    assert.equal(refunded.paymentIntent, id);
    assert.match(refunded.refund ?? '', /^re_/);
    assert.deepEqual(await payments.cancelByCreationKey(key('cancel'), creationKey), refunded);
    assert.deepEqual(await payments.refund(key('refund'), id), { id: refunded.refund, amountCents: 2500 });
    assert.equal((await payments.intent(id)).refund, refunded.refund);
    await assert.rejects(payments.pay(id, CARD), refused('payment_intent_refunded'));
  });

  void it('refunds a paid intent at most once, and refuses to refund an unpaid one', async () => {
    const { id } = await newIntent();
    const early = key('refund');
    await assert.rejects(payments.refund(early, id), refused('payment_intent_not_paid'));
    await payDelivered(id);
    await assert.rejects(payments.refund(early, id), refused('payment_intent_not_paid'), 'a refusal is stored with its key');

    const refundKey = key('refund');
    const refund = await payments.refund(refundKey, id);
    assert.match(refund.id, /^re_/);
    assert.equal(refund.amountCents, 2500);
    assert.deepEqual(await payments.refund(refundKey, id), refund);
    assert.deepEqual(await payments.refund(key('refund'), id), refund);
    const { rows } = await pool.query('SELECT id FROM payments.refunds WHERE payment_intent = $1', [id]);
    assert.deepEqual(rows, [{ id: refund.id }]);
    assert.deepEqual((await payments.intents((await payments.intent(id)).reference)).map((i) => [i.status, i.refunded]), [['refunded', true]]);
    await assert.rejects(payments.refund(key('refund'), 'pi_unknown'), refused('payment_intent_not_found'));
  });

  void it('carries on after a restart: a new server on the same database answers, and sends what was pending', async () => {
    const { creationKey, id, reference } = await newIntent();
    answers.set(id, Array<number>(20).fill(503));
    const firstAttempt = next<[PaymentEvent, number]>('received', (event) => event.payment_intent === id);
    await payments.pay(id, CARD);
    const [event] = await firstAttempt;

    await server.close(); // the service is down: its event is still pending, in PostgreSQL
    answers.delete(id);
    const delivered = next<[PaymentEvent, number]>('delivered', (e) => e.payment_intent === id);
    server = await startServer(port);
    assert.deepEqual((await delivered)[0], event);
    assert.ok(attemptsOf(id).every((r) => r.valid && r.event.id === event.id));

    assert.deepEqual(await payments.intents(reference), [{ id, status: 'succeeded', amountCents: 2500, reference, refunded: false }]);
    assert.equal((await payments.cancelByCreationKey(key('cancel'), creationKey)).status, 'refunded');
  });
});
