/**
 * The example payment provider over real HTTP and the run's PostgreSQL, and its client. Each test
 * uses idempotency keys and references of its own (random), so the tests share the provider's tables
 * with each other and with the saga tests. A slow instance (processingDelayMs) holds keys long enough
 * to race them; a provider in a process of its own is killed between commit and reply.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';

import { testConfig } from '../helpers/context';
import { killProviderProcesses, startProviderProcess } from '../helpers/provider-process';
import { createProviderServer, DECLINED_TEST_CARD, ensureProviderSchema, IdempotencyKeyInUseError, IdempotencyKeyReusedError, IdempotencyKeyVoidedError, PaymentDeclinedError, PaymentProviderClient, PaymentProviderError, ProviderRequestError, ProviderUnavailableError, REFUND_REFUSED_TEST_CARD, RefundRefusedError, runPaymentProvider } from '../fixtures/orders';

const CARD = '4242424242424242';
/** The slow instance's processing time: long enough for twenty requests to arrive meanwhile. */
const SLOW_MS = 1500;

/** The connections of the slow instance carry this name, so a test can see one of them sleeping. */
const slowApplicationName = `provider-test-slow-${randomUUID().slice(0, 8)}`;

let pool: pg.Pool;
let slowPool: pg.Pool;
let provider: FastifyInstance;
let slowProvider: FastifyInstance;
let baseUrl: string;
let slowUrl: string;
let client: PaymentProviderClient;
let slowClient: PaymentProviderClient;
const logLines: string[] = [];

function newPool(max: number, applicationName: string): pg.Pool {
  const p = new pg.Pool({ connectionString: inject('databaseUrl'), max, statement_timeout: 60_000, application_name: applicationName });
  p.on('error', () => {});
  return p;
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  pool = newPool(8, 'provider-test');
  slowPool = newPool(30, slowApplicationName);
  // Concurrent callers (as parallel test files are) must not race creating the schema.
  await Promise.all([ensureProviderSchema(pool), ensureProviderSchema(slowPool), ensureProviderSchema(pool)]);
  provider = createProviderServer({ pool, log: (line) => logLines.push(line) });
  slowProvider = createProviderServer({ pool: slowPool, processingDelayMs: SLOW_MS, log: (line) => logLines.push(line) });
  baseUrl = await listen(provider);
  slowUrl = await listen(slowProvider);
  client = new PaymentProviderClient({ baseUrl, timeoutMs: 5000 });
  slowClient = new PaymentProviderClient({ baseUrl: slowUrl, timeoutMs: 10_000 });
});

afterAll(async () => {
  killProviderProcesses();
  await provider?.close();
  await slowProvider?.close();
  await pool?.end();
  await slowPool?.end();
});

const key = (label: string) => `test-${label}-${randomUUID()}`;

/** A POST with raw fetch, to see statuses, headers and bodies as a client of any language would. */
async function post(url: string, path: string, body: unknown, idempotencyKey?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  const response = await fetch(`${url}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: JSON.parse(text) as Record<string, unknown> };
}

async function chargeRows(idempotencyKey: string) {
  const { rows } = await pool.query<{ id: string; status: string; refunded_at: Date | null }>(
    'SELECT id, status, refunded_at FROM payment_provider.charges WHERE idempotency_key = $1',
    [idempotencyKey],
  );
  return rows;
}

async function keyRecord(idempotencyKey: string) {
  const { rows } = await pool.query<{ operation: string; state: string }>('SELECT operation, state FROM payment_provider.idempotency_keys WHERE key = $1', [idempotencyKey]);
  return rows[0];
}

/** Resolves once a connection of the slow instance sleeps in its processing delay (it holds a key). */
async function untilSlowProviderProcessing(): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const { rows } = await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`, [
      slowApplicationName,
    ]);
    if (rows.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('the slow provider never started processing');
}

describe('charges', () => {
  it('charges once with 201 and answers a retry with the same key from its store, marked Idempotent-Replayed', async () => {
    const k = key('charge');
    const reference = `ref-${randomUUID()}`;

    const first = await post(baseUrl, '/v1/charges', { amount_cents: 7499, card: CARD, reference }, k);
    const again = await post(baseUrl, '/v1/charges', { reference, card: CARD, amount_cents: 7499 }, k);

    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.body).toMatchObject({ id: expect.stringMatching(/^ch_/), object: 'charge', amount_cents: 7499, status: 'succeeded', reference, card_last4: '4242', refunded: false });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(await chargeRows(k)).toHaveLength(1);
    expect(await client.chargesByReference(reference)).toEqual([
      { id: first.body.id, status: 'succeeded', refunded: false, amount_cents: 7499, reference, card_last4: '4242', created_at: first.body.created_at },
    ]);
  });

  it('tells the client whether its charge was replayed', async () => {
    const request = { idempotencyKey: key('client'), amountCents: 1200, card: CARD, reference: `ref-${randomUUID()}` };

    const first = await client.charge(request);
    const again = await client.charge(request);

    expect(first).toEqual({ id: expect.stringMatching(/^ch_/), amountCents: 1200, status: 'succeeded', reference: request.reference, replayed: false });
    expect(again).toEqual({ ...first, replayed: true });
    expect(logLines).toContain(`provider: charge ${first.id} succeeded 1200 cents (key ${request.idempotencyKey})`);
    expect(logLines).toContain(`provider: charge replayed 201 (key ${request.idempotencyKey})`);
  });

  it('answers 422 idempotency_key_reused when a key comes back with another request', async () => {
    const k = key('reuse');
    await client.charge({ idempotencyKey: k, amountCents: 1000, card: CARD, reference: null });

    const raw = await post(baseUrl, '/v1/charges', { amount_cents: 1001, card: CARD }, k);

    expect(raw.status).toBe(422);
    expect(raw.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(raw.body).toMatchObject({ type: 'about:blank', title: 'Unprocessable Entity', status: 422, code: 'idempotency_key_reused' });
    await expect(client.charge({ idempotencyKey: k, amountCents: 1000, card: '5555555555554444' })).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
    await expect(client.refund({ idempotencyKey: k, chargeIdempotencyKey: key('other') })).rejects.toMatchObject({ name: 'IdempotencyKeyReusedError', status: 422 });
    expect(await chargeRows(k)).toHaveLength(1);
  });

  it('charges once when twenty identical requests race: the others get 409 idempotency_key_in_use or the replay', async () => {
    const k = key('race');
    const body = { amount_cents: 2500, card: CARD, reference: `ref-${randomUUID()}` };

    const answers = await Promise.all(Array.from({ length: 20 }, () => post(slowUrl, '/v1/charges', body, k)));

    const processed = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null);
    const inUse = answers.filter((a) => a.status === 409);
    const replayed = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === 'true');
    expect(processed).toHaveLength(1);
    expect(inUse.length + replayed.length).toBe(19);
    expect(inUse.length).toBeGreaterThan(0);
    for (const a of inUse) {
      expect(a.body).toMatchObject({ status: 409, code: 'idempotency_key_in_use' });
      expect(a.headers.get('retry-after')).toBe('1');
    }
    for (const a of replayed) expect(a.body.id).toBe(processed[0]!.body.id);
    expect(await chargeRows(k)).toHaveLength(1);
  });

  it('stores a declined charge as the key’s answer: 402 card_declined, replayed, thrown as PaymentDeclinedError', async () => {
    const k = key('declined');
    const reference = `ref-${randomUUID()}`;

    const first = await post(baseUrl, '/v1/charges', { amount_cents: 900, card: DECLINED_TEST_CARD, reference }, k);
    const again = await post(baseUrl, '/v1/charges', { amount_cents: 900, card: DECLINED_TEST_CARD, reference }, k);

    expect(first.status).toBe(402);
    expect(first.body).toMatchObject({ status: 402, code: 'card_declined', charge_id: expect.stringMatching(/^ch_/) });
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    const thrown = await client.charge({ idempotencyKey: k, amountCents: 900, card: DECLINED_TEST_CARD, reference }).catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(PaymentDeclinedError);
    expect(thrown).toMatchObject({ name: 'PaymentDeclinedError', code: 'card_declined', status: 402, chargeId: first.body.charge_id });
    expect(await client.chargesByReference(reference)).toMatchObject([{ status: 'declined', refunded: false, card_last4: '0002' }]);
  });
});

describe('refunds', () => {
  it('refunds a charge, replays the refund, and answers another refund of it with the same charge', async () => {
    const chargeKey = key('charge');
    const refundKey = key('refund');
    const reference = `ref-${randomUUID()}`;
    const charge = await client.charge({ idempotencyKey: chargeKey, amountCents: 4200, card: CARD, reference });

    const refund = await client.refund({ idempotencyKey: refundKey, chargeIdempotencyKey: chargeKey });
    const replay = await client.refund({ idempotencyKey: refundKey, chargeIdempotencyKey: chargeKey });
    const other = await client.refund({ idempotencyKey: key('refund-2'), chargeIdempotencyKey: chargeKey });

    expect(refund).toEqual({ status: 'refunded', chargeId: charge.id, amountCents: 4200, replayed: false });
    expect(replay).toEqual({ ...refund, replayed: true });
    expect(other).toEqual({ ...refund, replayed: false });
    expect(await client.chargesByReference(reference)).toMatchObject([{ id: charge.id, status: 'succeeded', refunded: true }]);
    const one = await fetch(`${baseUrl}/v1/charges/${charge.id}`);
    expect(await one.json()).toMatchObject({ id: charge.id, refunded: true, amount_cents: 4200 });
  });

  it('refuses to refund a charge of card …0259 with 402 refund_refused, stored and replayed', async () => {
    const chargeKey = key('charge');
    const refundKey = key('refund');
    await client.charge({ idempotencyKey: chargeKey, amountCents: 3100, card: REFUND_REFUSED_TEST_CARD });

    const first = await client.refund({ idempotencyKey: refundKey, chargeIdempotencyKey: chargeKey }).catch((err: unknown) => err);
    const raw = await post(baseUrl, '/v1/refunds', { charge_idempotency_key: chargeKey }, refundKey);

    expect(first).toBeInstanceOf(RefundRefusedError);
    expect(first).toMatchObject({ code: 'refund_refused', status: 402 });
    expect(raw.status).toBe(402);
    expect(raw.headers.get('idempotent-replayed')).toBe('true');
    expect(raw.body).toMatchObject({ code: 'refund_refused' });
    expect(await chargeRows(chargeKey)).toMatchObject([{ status: 'succeeded', refunded_at: null }]);
  });

  it('answers nothing_to_refund for a declined charge', async () => {
    const chargeKey = key('charge');
    await expect(client.charge({ idempotencyKey: chargeKey, amountCents: 500, card: DECLINED_TEST_CARD })).rejects.toBeInstanceOf(PaymentDeclinedError);

    const refund = await client.refund({ idempotencyKey: key('refund'), chargeIdempotencyKey: chargeKey });

    expect(refund).toEqual({ status: 'nothing_to_refund', chargeId: null, amountCents: 0, replayed: false });
  });

  it('voids a charge key that no charge was made with: a later charge with it gets 409 idempotency_key_voided', async () => {
    const chargeKey = key('charge');

    const refund = await client.refund({ idempotencyKey: key('refund'), chargeIdempotencyKey: chargeKey });
    const raw = await post(baseUrl, '/v1/charges', { amount_cents: 800, card: CARD }, chargeKey);
    const thrown = await client.charge({ idempotencyKey: chargeKey, amountCents: 800, card: CARD }).catch((err: unknown) => err);

    expect(refund).toEqual({ status: 'voided', chargeId: null, amountCents: 0, replayed: false });
    expect(raw.status).toBe(409);
    expect(raw.body).toMatchObject({ status: 409, code: 'idempotency_key_voided' });
    expect(thrown).toBeInstanceOf(IdempotencyKeyVoidedError);
    expect(thrown).toMatchObject({ name: 'IdempotencyKeyVoidedError', code: 'idempotency_key_voided', status: 409 });
    expect(await chargeRows(chargeKey)).toEqual([]);
    expect(await keyRecord(chargeKey)).toEqual({ operation: 'charge', state: 'voided' });
  });

  it('answers 409 idempotency_key_in_use to a refund while its charge is in flight, and refunds it once the charge committed', async () => {
    const chargeKey = key('charge');
    const refundKey = key('refund');
    const charging = slowClient.charge({ idempotencyKey: chargeKey, amountCents: 6100, card: CARD });
    await untilSlowProviderProcessing();

    const whileCharging = await client.refund({ idempotencyKey: refundKey, chargeIdempotencyKey: chargeKey }).catch((err: unknown) => err);
    const charge = await charging;
    const afterwards = await client.refund({ idempotencyKey: refundKey, chargeIdempotencyKey: chargeKey });

    expect(whileCharging).toBeInstanceOf(IdempotencyKeyInUseError);
    expect(whileCharging).toMatchObject({ code: 'idempotency_key_in_use', status: 409, retryAfterMs: 1000 });
    // The 409 stored nothing: the retry with the same refund key was processed afresh.
    expect(afterwards).toEqual({ status: 'refunded', chargeId: charge.id, amountCents: 6100, replayed: false });
  });
});

describe('bad requests', () => {
  it('answers 400 idempotency_key_missing or _invalid, and stores nothing', async () => {
    const missing = await post(baseUrl, '/v1/charges', { amount_cents: 100, card: CARD });
    const tooLong = await post(baseUrl, '/v1/charges', { amount_cents: 100, card: CARD }, 'k'.repeat(256));
    const refundMissing = await post(baseUrl, '/v1/refunds', { charge_idempotency_key: key('charge') });

    expect(missing).toMatchObject({ status: 400, body: { status: 400, code: 'idempotency_key_missing' } });
    expect(tooLong).toMatchObject({ status: 400, body: { code: 'idempotency_key_invalid' } });
    expect(refundMissing).toMatchObject({ status: 400, body: { code: 'idempotency_key_missing' } });
  });

  it('answers 400 invalid_request for malformed JSON, without a stack trace', async () => {
    const k = key('malformed');

    const raw = await post(baseUrl, '/v1/charges', `{"amount_cents": 100, "card": "${CARD}"`, k);

    expect(raw.status).toBe(400);
    expect(raw.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(raw.body).toEqual({ type: 'about:blank', title: 'Bad Request', status: 400, detail: 'the body is not valid JSON', code: 'invalid_request' });
    expect(await keyRecord(k)).toBeUndefined();
  });

  it('answers 400 invalid_request naming each invalid field, quoting no card number', async () => {
    const k = key('invalid');

    const raw = await post(baseUrl, '/v1/charges', { amount_cents: -5, card: '4242-4242', reference: 'x'.repeat(201), extra: 1 }, k);
    const thrown = await client.charge({ idempotencyKey: k, amountCents: 1.5, card: CARD }).catch((err: unknown) => err);

    expect(raw.status).toBe(400);
    expect(raw.body).toMatchObject({ code: 'invalid_request' });
    expect(raw.body.detail).toMatch(/amount_cents: must be positive/);
    expect(raw.body.detail).toMatch(/card: must be 12 to 19 digits/);
    expect(raw.body.detail).toMatch(/reference: must be at most 200 characters/);
    expect(raw.text).not.toContain('4242-4242');
    expect(raw.text).not.toMatch(/\bat .*\.(ts|js):\d+/);
    expect(thrown).toBeInstanceOf(ProviderRequestError);
    expect(thrown).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await keyRecord(k)).toBeUndefined();
  });

  it('answers 404 problems for unknown routes and charges, 413 over 16 KiB, and 200 on /livez', async () => {
    const route = await fetch(`${baseUrl}/v2/nothing`);
    const charge = await fetch(`${baseUrl}/v1/charges/ch_nothing`);
    const large = await post(baseUrl, '/v1/charges', { amount_cents: 100, card: CARD, padding: 'x'.repeat(17 * 1024) }, key('large'));
    const livez = await fetch(`${baseUrl}/livez`);

    expect(route.status).toBe(404);
    expect(route.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await route.json()).toMatchObject({ status: 404, code: 'not_found' });
    expect(charge.status).toBe(404);
    expect(await charge.json()).toMatchObject({ code: 'not_found' });
    expect(large.status).toBe(413);
    expect(livez.status).toBe(200);
  });
});

describe('card numbers', () => {
  it('keeps the last 4 digits only: no table and no log line holds the number', async () => {
    // A number no other test sends, so finding it anywhere means this test stored it.
    const card = `4${String(randomInt(10 ** 9)).padStart(9, '0')}${String(randomInt(10 ** 6)).padStart(6, '0')}`;
    const chargeKey = key('card');
    await client.charge({ idempotencyKey: chargeKey, amountCents: 1500, card, reference: `ref-${randomUUID()}` });
    await client.charge({ idempotencyKey: chargeKey, amountCents: 1500, card, reference: null }).catch(() => {});
    await client.refund({ idempotencyKey: key('refund'), chargeIdempotencyKey: chargeKey });

    const found: string[] = [];
    for (const table of ['charges', 'idempotency_keys', 'settings']) {
      const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM payment_provider.${table} t WHERE t::text LIKE '%' || $1 || '%'`, [card]);
      if (rows[0]!.n !== '0') found.push(table);
    }

    expect(found).toEqual([]);
    expect(await chargeRows(chargeKey)).toHaveLength(1);
    const { rows } = await pool.query<{ card_last4: string }>('SELECT card_last4 FROM payment_provider.charges WHERE idempotency_key = $1', [chargeKey]);
    expect(rows[0]!.card_last4).toBe(card.slice(-4));
    expect(logLines.filter((line) => line.includes(card))).toEqual([]);
  });
});

describe('a provider process killed between commit and reply', () => {
  it('loses the answer, not the charge: the retry with the same key is answered from the store, and the card is charged once', async () => {
    const k = key('crash');
    const reference = `ref-${randomUUID()}`;
    const first = await startProviderProcess({ databaseUrl: inject('databaseUrl'), crashOnKey: k });
    const crashing = new PaymentProviderClient({ baseUrl: first.url, timeoutMs: 10_000 });

    const lost = await crashing.charge({ idempotencyKey: k, amountCents: 9900, card: CARD, reference }).catch((err: unknown) => err);
    expect(await first.exited).toBe(137);
    const second = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port: first.port });
    const retried = await crashing.charge({ idempotencyKey: k, amountCents: 9900, card: CARD, reference });
    second.child.kill('SIGTERM');
    await second.exited;

    expect(lost).toBeInstanceOf(ProviderUnavailableError);
    expect(lost).toMatchObject({ code: 'unavailable', status: undefined });
    expect(retried).toMatchObject({ amountCents: 9900, replayed: true });
    expect(await chargeRows(k)).toEqual([expect.objectContaining({ id: retried.id, status: 'succeeded' })]);
    expect(second.output()).toContain(`provider: charge replayed 201 (key ${k})`);
  });
});

describe('runPaymentProvider', () => {
  it('makes its schema, listens where the config says, logs each outcome, and closes', async () => {
    const lines: string[] = [];
    const config = testConfig('provider run');
    const running = await runPaymentProvider({ databaseUrl: config.db.url, host: '127.0.0.1', port: 0, log: (line) => lines.push(line) });
    const k = key('run');

    const charge = await new PaymentProviderClient({ baseUrl: running.url, timeoutMs: 5000 }).charge({ idempotencyKey: k, amountCents: 300, card: CARD });
    await running.close();

    expect(running.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(lines).toEqual([`provider: charge ${charge.id} succeeded 300 cents (key ${k})`]);
    await expect(fetch(`${running.url}/livez`)).rejects.toThrow();
  });
});

describe('the client’s error mapping', () => {
  let fake: Server;
  let fakeUrl: string;
  /** What the fake provider answers next: status, headers, body. */
  let next: { status: number; headers?: Record<string, string>; body?: string; hang?: boolean };

  beforeAll(async () => {
    fake = createServer((_req: IncomingMessage, res: ServerResponse) => {
      if (next.hang) return;
      res.writeHead(next.status, { 'content-type': 'application/problem+json', ...next.headers });
      res.end(next.body ?? '');
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    fake.closeAllConnections();
    await new Promise((resolve) => fake.close(resolve));
  });

  const problem = (status: number, code?: string) => JSON.stringify({ type: 'about:blank', title: 't', status, detail: 'd', ...(code ? { code } : {}) });
  const charge = (timeoutMs = 2000, signal?: AbortSignal) =>
    new PaymentProviderClient({ baseUrl: fakeUrl, timeoutMs }).charge({ idempotencyKey: 'k', amountCents: 1, card: CARD }, signal).catch((err: unknown) => err);
  const refund = () => new PaymentProviderClient({ baseUrl: fakeUrl, timeoutMs: 2000 }).refund({ idempotencyKey: 'r', chargeIdempotencyKey: 'k' }).catch((err: unknown) => err);

  it.each([
    [500, problem(500, 'internal_error'), ProviderUnavailableError, { code: 'unavailable', status: 500 }],
    [503, 'Service Unavailable', ProviderUnavailableError, { code: 'unavailable', status: 503 }],
    [402, problem(402, 'card_declined'), PaymentDeclinedError, { code: 'card_declined', status: 402 }],
    [422, problem(422, 'idempotency_key_reused'), IdempotencyKeyReusedError, { code: 'idempotency_key_reused' }],
    [409, problem(409, 'idempotency_key_voided'), IdempotencyKeyVoidedError, { code: 'idempotency_key_voided' }],
    [400, problem(400, 'invalid_request'), ProviderRequestError, { code: 'invalid_request', status: 400 }],
    [404, '<html>not here</html>', ProviderRequestError, { code: 'http_404', status: 404 }],
    [200, 'not json', ProviderUnavailableError, { code: 'unavailable', status: 200 }],
  ])('maps a %i answer of a charge to its error class', async (status, body, type, fields) => {
    next = { status, body };

    const thrown = await charge();

    expect(thrown).toBeInstanceOf(type);
    expect(thrown).toBeInstanceOf(PaymentProviderError);
    expect(thrown).toMatchObject(fields);
  });

  it('reads Retry-After of a 409 in use as retryAfterMs', async () => {
    next = { status: 409, headers: { 'retry-after': '3' }, body: problem(409, 'idempotency_key_in_use') };

    expect(await charge()).toMatchObject({ name: 'IdempotencyKeyInUseError', retryAfterMs: 3000 });
  });

  it('maps a 402 of a refund to RefundRefusedError', async () => {
    next = { status: 402, body: problem(402, 'refund_refused') };

    expect(await refund()).toBeInstanceOf(RefundRefusedError);
  });

  it('throws ProviderUnavailableError when the provider does not answer in time, the caller aborts, or nothing listens', async () => {
    next = { status: 200, hang: true };
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));

    const timedOut = await charge(100);
    const aborted = await charge(10_000, AbortSignal.timeout(50));
    const unreachable = await new PaymentProviderClient({ baseUrl: `http://127.0.0.1:${closedPort}`, timeoutMs: 2000 })
      .charge({ idempotencyKey: 'k', amountCents: 1, card: CARD })
      .catch((err: unknown) => err);

    expect(timedOut).toBeInstanceOf(ProviderUnavailableError);
    expect((timedOut as Error).message).toMatch(/no answer within 100 ms/);
    expect(aborted).toBeInstanceOf(ProviderUnavailableError);
    expect((aborted as Error).message).toMatch(/aborted/);
    expect(unreachable).toBeInstanceOf(ProviderUnavailableError);
    expect(unreachable).toMatchObject({ code: 'unavailable', status: undefined });
  });
});
