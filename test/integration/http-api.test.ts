/**
 * `saga serve` over real HTTP (fetch against a server on a free port) in front of the real gate:
 * Redis, PostgreSQL, Temporal and a worker of this file's own (test/helpers/saga-harness.ts).
 */
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createSagaServer, type SagaBackend, type SagaServerOptions } from '../../src/http';

import { envOf } from '../helpers/processes';
import { eventually, order, rowIdOf, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { DECLINED_CARD, REFUND_REFUSED_CARD, sagaTypesFor } from '../fixtures/orders';

const ROOT = path.resolve(__dirname, '../..');
const CLIENTS = [
  { id: 'alice', token: 'alice-token-0123456789abcdef' },
  { id: 'bob', token: 'bob-token-0123456789abcdef' },
];
const [ALICE, BOB] = CLIENTS as [(typeof CLIENTS)[0], (typeof CLIENTS)[0]];

let h: SagaHarness;
let base: string;

interface ProblemDoc {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

function serverOptions(overrides: Partial<SagaServerOptions> = {}): SagaServerOptions {
  const redis = h.redis as Redis;
  return {
    client: h.client,
    types: sagaTypesFor(h.config),
    clients: CLIENTS,
    readiness: {
      redis: async () => void (await redis.ping()),
      postgres: async () => void (await h.pool.query('SELECT 1')),
      temporal: async () => void (await h.client.temporal.connection.workflowService.getSystemInfo({})),
    },
    ...overrides,
  };
}

async function listen(app: FastifyInstance): Promise<string> {
  return app.listen({ host: '127.0.0.1', port: 0 });
}

function start(type: string, body: unknown, opts: { key?: string; token?: string | null; url?: string; prefer?: string; query?: string } = {}): Promise<Response> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (opts.prefer !== undefined) headers.Prefer = opts.prefer;
  if (opts.token !== null) headers.Authorization = `Bearer ${opts.token ?? ALICE.token}`;
  if (opts.key !== undefined) headers['Idempotency-Key'] = opts.key;
  return fetch(`${opts.url ?? base}/v1/sagas/${type}${opts.query ?? ''}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

function get(pathname: string, token: string | null = ALICE.token): Promise<Response> {
  return fetch(`${base}${pathname}`, { headers: token === null ? {} : { Authorization: `Bearer ${token}` } });
}

async function expectProblem(response: Response, status: number, type?: string): Promise<ProblemDoc> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  const doc = (await response.json()) as ProblemDoc;
  expect(doc).toMatchObject({ type: type ?? expect.any(String), title: expect.any(String), status, detail: expect.any(String) });
  return doc;
}

function uniqueKey(label: string): string {
  return `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Nothing was started for `key` of `clientId`: no workflow, and the data's intent holds no reservation. */
async function expectNothingStarted(clientId: string, key: string, data: unknown): Promise<void> {
  await expect(h.client.temporal.workflow.getHandle(`order-${clientId}.${key}`).describe()).rejects.toThrow(/not found/i);
  const { intentKey } = h.client.prepare('order', data);
  const inspection = await h.rms.inspect(intentKey);
  expect(inspection.holder).toBeFalsy();
  expect(inspection.exists).toBe(false);
}

beforeAll(async () => {
  h = await startHarness('http api');
  const app = createSagaServer(serverOptions());
  base = await listen(app);
  return async () => {
    await app.close();
  };
});

afterAll(async () => {
  await h?.stop();
});

describe('POST /v1/sagas/{type}', () => {
  it('starts a saga: 201 with its Location, and the same key and body again replays the same answer', async () => {
    const data = order({ simulate: { writeDelayMs: 2000 } });
    const key = uniqueKey('replay');

    const first = await start('order', data, { key });
    const firstBody = await first.json();
    const again = await start('order', data, { key });

    expect(first.status).toBe(201);
    expect(first.headers.get('location')).toBe(`/v1/sagas/order-alice.${key}`);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(firstBody).toEqual({
      workflowId: `order-alice.${key}`,
      runId: expect.any(String),
      intentKey: expect.stringMatching(/^order:/),
      reservation: { status: 'SUCCESS', fencingToken: expect.stringMatching(/^\d+$/), expiresAt: expect.any(Number) },
      links: { self: `/v1/sagas/order-alice.${key}`, ui: expect.stringContaining(`order-alice.${key}`) },
    });
    expect(again.status).toBe(201);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(firstBody);
  });

  it('accepts the key as a Structured Field string ("…") too', async () => {
    const key = uniqueKey('quoted');

    const response = await start('order', order(), { key: `"${key}"` });

    expect(response.status).toBe(201);
    expect(response.headers.get('location')).toBe(`/v1/sagas/order-alice.${key}`);
  });

  it('answers the same key with another body with 422 and starts nothing more', async () => {
    const key = uniqueKey('reuse');
    const first = await start('order', order(), { key });
    const other = order();

    const reused = await start('order', other, { key });

    expect(first.status).toBe(201);
    const doc = await expectProblem(reused, 422, '/problems/idempotency-key-reused');
    expect(doc.detail).not.toContain('alice.');
    const { intentKey } = h.client.prepare('order', other);
    expect((await h.rms.inspect(intentKey)).holder).toBeFalsy();
  });

  it('answers a request for an entity another request created with 409 duplicate, starting nothing', async () => {
    const data = order();
    const first = await start('order', data, { key: uniqueKey('dup-a') });
    const { workflowId } = (await first.json()) as { workflowId: string };
    await eventually(() => get(`/v1/sagas/${workflowId}`).then((r) => r.json() as Promise<{ phase: string }>), (s) => s.phase === 'COMPLETED', 'the first saga to complete');
    const key = uniqueKey('dup-b');

    const duplicate = await start('order', data, { key });

    const doc = await expectProblem(duplicate, 409, '/problems/duplicate');
    expect(doc.intentKey).toMatch(/^order:/);
    await expect(h.client.temporal.workflow.getHandle(`order-alice.${key}`).describe()).rejects.toThrow(/not found/i);
  });

  it('names the existing entity in a 409 duplicate asked with Prefer: existing-entity, to the client that created it only', async () => {
    const data = order();
    const first = await start('order', data, { key: uniqueKey('existing-a') });
    const { workflowId } = (await first.json()) as { workflowId: string };
    const done = await eventually(
      () => get(`/v1/sagas/${workflowId}`).then((r) => r.json() as Promise<{ phase: string; entityId?: string }>),
      (s) => s.phase === 'COMPLETED',
      'the first saga to complete',
    );

    const mine = await expectProblem(await start('order', data, { key: uniqueKey('existing-b'), prefer: 'existing-entity' }), 409, '/problems/duplicate');
    const unasked = await expectProblem(await start('order', data, { key: uniqueKey('existing-c') }), 409, '/problems/duplicate');
    const bobs = await expectProblem(await start('order', data, { key: uniqueKey('existing-d'), token: BOB.token, prefer: 'existing-entity' }), 409, '/problems/duplicate');

    expect(mine.entityId).toBe(done.entityId);
    expect(unasked).not.toHaveProperty('entityId');
    expect(bobs).not.toHaveProperty('entityId');
  });

  it('answers a request for an intent another request holds with 409 conflict and Retry-After, starting nothing', async () => {
    const data = order({ simulate: { writeDelayMs: 2000 } });
    const first = await start('order', data, { key: uniqueKey('conflict-a') });
    const key = uniqueKey('conflict-b');

    const conflict = await start('order', { ...data, simulate: undefined }, { key });

    expect(first.status).toBe(201);
    const doc = await expectProblem(conflict, 409, '/problems/conflict');
    expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(doc.retryAfterMs).toEqual(expect.any(Number));
    await expect(h.client.temporal.workflow.getHandle(`order-alice.${key}`).describe()).rejects.toThrow(/not found/i);
  });

  it('gives two clients sending the same key a saga each', async () => {
    const key = uniqueKey('shared');

    const alice = await start('order', order(), { key, token: ALICE.token });
    const bob = await start('order', order(), { key, token: BOB.token });

    expect(alice.status).toBe(201);
    expect(bob.status).toBe(201);
    expect(alice.headers.get('location')).toBe(`/v1/sagas/order-alice.${key}`);
    expect(bob.headers.get('location')).toBe(`/v1/sagas/order-bob.${key}`);
  });

  it.each([
    ['no Idempotency-Key', undefined, '/problems/idempotency-key-missing'],
    ['an Idempotency-Key with a space', 'two words', '/problems/idempotency-key-invalid'],
    ['an Idempotency-Key over 95 characters', 'k'.repeat(96), '/problems/idempotency-key-invalid'],
  ])('answers a request with %s with 400', async (_name, key, type) => {
    const data = order();

    const response = await start('order', data, { key });

    await expectProblem(response, 400, type);
    const { intentKey } = h.client.prepare('order', data);
    expect((await h.rms.inspect(intentKey)).holder).toBeFalsy();
  });

  it.each([
    ['no token', null],
    ['a wrong token', 'not-a-token-of-anyone-at-all'],
  ])('answers a request with %s with 401 and WWW-Authenticate, starting nothing', async (_name, token) => {
    const data = order();
    const key = uniqueKey('unauthorized');

    const response = await start('order', data, { key, token });

    const doc = await expectProblem(response, 401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(JSON.stringify(doc)).not.toContain(ALICE.token);
    await expectNothingStarted('alice', key, data);
  });

  it('refuses a body over the limit with 413, starting nothing', async () => {
    const data = order();
    const key = uniqueKey('large');
    // Valid JSON of a valid order, padded past 64 KiB with whitespace.
    const body = JSON.stringify(data).replace('{', `{${' '.repeat(70 * 1024)}`);

    const response = await start('order', body, { key });

    await expectProblem(response, 413);
    await expectNothingStarted('alice', key, data);
  });

  it('refuses a malformed body with 400 and a body of another type with 415, starting nothing', async () => {
    const data = order();
    const key = uniqueKey('malformed');

    const malformed = await start('order', `${JSON.stringify(data).slice(0, -1)},`, { key });
    const text = await fetch(`${base}/v1/sagas/order`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ALICE.token}`, 'Idempotency-Key': key, 'Content-Type': 'text/plain' },
      body: JSON.stringify(data),
    });

    await expectProblem(malformed, 400);
    await expectProblem(text, 415);
    await expectNothingStarted('alice', key, data);
  });

  it('answers data the saga type refuses with 422 naming the field', async () => {
    const data = { ...order(), payment: { card: 'not digits' } };

    const response = await start('order', data, { key: uniqueKey('invalid') });

    const doc = await expectProblem(response, 422, '/problems/invalid-input');
    expect(doc.detail).toContain('payment.card');
    expect(doc.detail).not.toContain('not digits');
  });

  it('starts an operation on an existing order, and answers one on an order that does not exist with 404 entity-not-found', async () => {
    // Alice's own order: an operation finds only its owner's entities.
    const created = (await (await start('order', order(), { key: uniqueKey('order-to-cancel'), prefer: 'wait=9' })).json()) as { entityId: string };

    const cancel = await start('order-cancel', { order: created.entityId }, { key: uniqueKey('cancel') });
    const missing = await start('order-cancel', { order: '987654321987' }, { key: uniqueKey('cancel-missing') });

    expect(cancel.status).toBe(201);
    const body = (await cancel.json()) as { workflowId: string; intentKey: string };
    expect(body.intentKey).toMatch(/^order-lock:/);
    expect((await h.client.result(body.workflowId)).outcome).toBe('COMPLETED');
    const doc = await expectProblem(missing, 404, '/problems/entity-not-found');
    expect(doc.detail).toContain('987654321987');
  });

  it('answers an operation on an id no row can have (past bigint) like a missing order: 404, never a 500', async () => {
    const beyond = await start('order-cancel', { order: '9999999999999999999' }, { key: uniqueKey('cancel-beyond') });

    await expectProblem(beyond, 404, '/problems/entity-not-found');
  });

  it('answers an unknown saga type with 404', async () => {
    const response = await start('invoice', order(), { key: uniqueKey('unknown') });

    await expectProblem(response, 404, '/problems/unknown-saga-type');
  });

  it('answers a request head over the limit with a 431 problem', async () => {
    const response = await start('order', order(), { key: uniqueKey('head'), token: 'x'.repeat(10_000) });

    await expectProblem(response, 431);
  });
});

describe('POST with Prefer: wait', () => {
  it('answers with the saga\'s end, its outcome and entity id, and a retry of the key gets the same', async () => {
    const key = uniqueKey('prefer-wait');
    const cart = order();

    const first = await start('order', cart, { key, prefer: 'wait=9' });
    const retry = await start('order', cart, { key, prefer: 'respond-async, wait=9' });

    expect(first.status).toBe(201);
    const body = (await first.json()) as { workflowId: string; outcome?: string; entityId?: string };
    expect(body).toMatchObject({ reservation: { status: 'SUCCESS' }, outcome: 'COMPLETED', entityId: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/) });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(body);
  });

  it('answers a retry of a compensated saga\'s key 201 with its outcome, after another key created the entity', async () => {
    const cart = order();
    const declined = { ...cart, payment: { card: DECLINED_CARD } };
    const key = uniqueKey('declined-then-taken');
    const first = await start('order', declined, { key, prefer: 'wait=9' });
    expect(first.status).toBe(201);
    expect(await first.json()).toMatchObject({ outcome: 'COMPENSATED' });
    const other = await start('order', cart, { key: uniqueKey('taker'), prefer: 'wait=9' });
    expect(await other.json()).toMatchObject({ outcome: 'COMPLETED' });

    const retry = await start('order', declined, { key });

    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toMatchObject({ reservation: { status: 'SUCCESS' }, outcome: 'COMPENSATED' });
  });

  it('answers a compensated saga\'s end with its reason', async () => {
    const cart = order({ items: [{ sku: 'rare-coin', quantity: 5, priceCents: 10 }] });

    const response = await start('order', cart, { key: uniqueKey('prefer-compensated'), prefer: 'wait=9' });

    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
  });

  it('gives the saga less time with ?deadlineMs, within its type\'s: past it the saga ends EXPIRED; a bad one is 422, starting nothing', async () => {
    // The charge step takes 3 s; the deadline passes while it runs, so the stock is never reserved.
    const response = await start('order', order({ simulate: { stepDelayMs: 3000 } }), { key: uniqueKey('deadline'), prefer: 'wait=9', query: '?deadlineMs=1500' });
    const malformed = await start('order', order(), { key: uniqueKey('deadline-bad'), query: '?deadlineMs=soon' });
    const tooLong = await start('order', order(), { key: uniqueKey('deadline-long'), query: `?deadlineMs=${31 * 24 * 3600 * 1000}` });

    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ outcome: 'EXPIRED', reason: 'DEADLINE_EXCEEDED' });
    for (const refused of [malformed, tooLong]) expect((await expectProblem(refused, 422, '/problems/invalid-input')).detail).toMatch(/deadline/i);
  });

  it('answers at once, as without it, for a duplicate: nothing to wait for', async () => {
    const cart = order();
    const firstKey = uniqueKey('prefer-original');
    const created = (await (await start('order', cart, { key: firstKey, prefer: 'wait=9' })).json()) as { outcome?: string };
    expect(created.outcome).toBe('COMPLETED');

    const duplicate = await start('order', cart, { key: uniqueKey('prefer-duplicate'), prefer: 'wait=9' });

    await expectProblem(duplicate, 409, '/problems/duplicate');
  });
});

describe('reading and cancelling sagas', () => {
  it('shows a saga of the caller\'s with its phase, steps and outcome, and no other client\'s', async () => {
    const key = uniqueKey('status');
    const started = await start('order', order(), { key });
    const { workflowId } = (await started.json()) as { workflowId: string };

    const final = await eventually(
      () => get(`/v1/sagas/${workflowId}`).then((r) => r.json() as Promise<{ status: string }>),
      (s) => s.status === 'COMPLETED',
      'the saga to complete',
    );
    const asBob = await get(`/v1/sagas/${workflowId}`, BOB.token);
    const missing = await get(`/v1/sagas/order-alice.${uniqueKey('none')}`);

    expect(final).toMatchObject({ workflowId, type: 'order', status: 'COMPLETED', phase: 'COMPLETED', outcome: 'COMPLETED', steps: ['chargePayment', 'reserveStock'], compensations: [], errors: [] });
    await expectProblem(asBob, 404, '/problems/saga-not-found');
    await expectProblem(missing, 404, '/problems/saga-not-found');
  });

  it('names a finished saga\'s entity, so its caller can run the entity\'s operations: an order read back and cancelled', async () => {
    const started = await start('order', order(), { key: uniqueKey('entity') });
    const { workflowId } = (await started.json()) as { workflowId: string };
    const final = await eventually(
      () => get(`/v1/sagas/${workflowId}`).then((r) => r.json() as Promise<{ status: string; entityId?: string }>),
      (s) => s.status === 'COMPLETED',
      'the saga to complete',
    );

    const cancel = await start('order-cancel', { order: final.entityId }, { key: uniqueKey('cancel-own') });

    // Opaque: no row number to count along.
    expect(final.entityId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(cancel.status).toBe(201);
    const cancelled = (await cancel.json()) as { workflowId: string };
    const done = await eventually(
      () => get(`/v1/sagas/${cancelled.workflowId}`).then((r) => r.json() as Promise<{ outcome?: string; entityId?: string }>),
      (s) => s.outcome !== undefined,
      'the cancellation to end',
    );
    expect(done).toMatchObject({ outcome: 'COMPLETED', entityId: final.entityId });
  });

  it('answers another client\'s order as a missing one: its operations are 404, and the order stays as it was', async () => {
    const started = await start('order', order(), { key: uniqueKey('alice-order'), prefer: 'wait=9' });
    const { entityId } = (await started.json()) as { entityId: string };

    const cancel = await start('order-cancel', { order: entityId }, { key: uniqueKey('bob-cancels'), token: BOB.token });
    const amend = await start('order-amend', { order: entityId, items: [{ sku: 'widget', quantity: 1 }], payment: { card: '4242424242424242' } }, { key: uniqueKey('bob-amends'), token: BOB.token });
    const missing = await start('order-cancel', { order: '987654321985' }, { key: uniqueKey('bob-missing'), token: BOB.token });

    const problems = await Promise.all([cancel, amend, missing].map((r) => expectProblem(r, 404, '/problems/entity-not-found')));
    // The same answer, word for word but the id, for another's order and for none.
    expect(problems[0]!.detail.replace(entityId, '<id>')).toBe(problems[2]!.detail.replace('987654321985', '<id>'));
    const { rows } = await h.pool.query('SELECT cancelled_at, created_by FROM orders WHERE id = $1', [rowIdOf(entityId)]);
    expect(rows).toEqual([{ cancelled_at: null, created_by: 'http:alice' }]);
  });

  it('shows, cancels and lists only sagas started for the caller: a library saga under a key in its namespace is not its own', async () => {
    // A library caller's key that looks like one of alice's namespaced keys: the same workflow id shape.
    const key = uniqueKey('lookalike');
    const cart = order();
    const library = await h.client.start('order', cart, { idempotencyKey: `alice.${key}` });
    const id = library.workflowId;

    const shown = await get(`/v1/sagas/${id}`);
    const cancelled = await fetch(`${base}/v1/sagas/${id}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${ALICE.token}` } });
    const listed = (await (await get('/v1/sagas?type=order&limit=1000')).json()) as { sagas: { workflowId: string }[] };
    const posted = await start('order', cart, { key });

    const shownDoc = await expectProblem(shown, 404, '/problems/saga-not-found');
    const cancelledDoc = await expectProblem(cancelled, 404, '/problems/saga-not-found');
    // Word for word what a saga of alice's that does not exist gets: nothing tells the two apart.
    const missing = await expectProblem(await get(`/v1/sagas/order-alice.${uniqueKey('none')}`), 404, '/problems/saga-not-found');
    expect(shownDoc).toEqual(missing);
    expect(cancelledDoc).toEqual(missing);
    expect(listed.sagas.map((s) => s.workflowId)).not.toContain(id);
    // Alice's own request with that key cannot be answered from the library's saga either.
    await expectProblem(posted, 422, '/problems/idempotency-key-reused');
    expect((await h.client.status(id)).status).not.toBe('CANCELED');
  });

  it('lists the caller\'s own sagas only, with filters', async () => {
    const aliceKey = uniqueKey('list');
    const bobKey = uniqueKey('list');
    await start('order', order(), { key: aliceKey });
    await start('order', order(), { key: bobKey, token: BOB.token });

    const listing = await eventually(
      () => get('/v1/sagas?type=order&limit=1000').then((r) => r.json() as Promise<{ sagas: { workflowId: string }[] }>),
      (l) => l.sagas.some((s) => s.workflowId === `order-alice.${aliceKey}`),
      'the saga to be listed',
    );
    const bad = await get('/v1/sagas?outcome=WHATEVER');
    const limited = (await (await get('/v1/sagas?limit=1')).json()) as { sagas: unknown[] };

    expect(listing.sagas.length).toBeGreaterThan(0);
    expect(listing.sagas.every((s) => s.workflowId.startsWith('order-alice.'))).toBe(true);
    await expectProblem(bad, 400);
    expect(limited.sagas).toHaveLength(1);
  });

  it('cancels a running saga with 202, and answers an ended one with 409 and another client with 404', async () => {
    const started = await start('order', order({ simulate: { writeDelayMs: 2000 } }), { key: uniqueKey('cancel') });
    const { workflowId } = (await started.json()) as { workflowId: string };

    const asBob = await fetch(`${base}/v1/sagas/${workflowId}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${BOB.token}` } });
    const cancelled = await fetch(`${base}/v1/sagas/${workflowId}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${ALICE.token}` } });
    const final = await eventually(
      () => get(`/v1/sagas/${workflowId}`).then((r) => r.json() as Promise<{ phase: string; outcome?: string }>),
      (s) => s.outcome !== undefined,
      'the cancelled saga to end',
    );
    const again = await fetch(`${base}/v1/sagas/${workflowId}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${ALICE.token}` } });

    await expectProblem(asBob, 404);
    expect(cancelled.status).toBe(202);
    expect(await cancelled.json()).toMatchObject({ workflowId, cancelRequested: true });
    expect(final.outcome).toBe('COMPENSATED');
    await expectProblem(again, 409, '/problems/saga-ended');
  });

  it("redrives a saga of the caller's waiting in NEEDS_ATTENTION, lists it by that phase, and no other client's or a saga that does not wait", async () => {
    // Short stock after the charge, and the card network refuses the refund: the saga waits for an operator.
    const data = order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] });
    const { workflowId } = (await (await start('order', data, { key: uniqueKey('attention') })).json()) as { workflowId: string };
    const waiting = await eventually(
      () => get(`/v1/sagas/${workflowId}`).then((r) => r.json() as Promise<{ phase: string }>),
      (s) => s.phase === 'NEEDS_ATTENTION',
      'the saga to need attention',
    );
    const redrive = (id: string, token: string) => fetch(`${base}/v1/sagas/${id}/redrive`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });

    const asBob = await redrive(workflowId, BOB.token);
    const redriven = await redrive(workflowId, ALICE.token);
    const listed = await eventually(
      () => get('/v1/sagas?phase=NEEDS_ATTENTION').then((r) => r.json() as Promise<{ sagas: { workflowId: string }[] }>),
      (body) => body.sagas.some((s) => s.workflowId === workflowId),
      'the saga to be listed by its phase',
    );
    const done = (await (await start('order', order(), { key: uniqueKey('not-waiting'), prefer: 'wait=9' })).json()) as { workflowId: string; outcome: string };
    const notWaiting = await redrive(done.workflowId, ALICE.token);

    expect(waiting).toMatchObject({ status: 'RUNNING', phase: 'NEEDS_ATTENTION', compensations: ['releaseStock'], attention: { pending: ['refundPayment', 'undoEntity'], redrives: 0 } });
    await expectProblem(asBob, 404, '/problems/saga-not-found');
    expect(redriven.status).toBe(200);
    // The refund is refused again: the saga waits again, the new failure in its errors.
    const after = (await redriven.json()) as { phase: string; errors: { at: string }[]; attention: { redrives: number } };
    expect(after).toMatchObject({ workflowId, status: 'RUNNING', phase: 'NEEDS_ATTENTION', attention: { redrives: 1 } });
    expect(after.errors.filter((e) => e.at === 'refundPayment')).toHaveLength(2);
    expect(listed.sagas.map((s) => s.workflowId)).toContain(workflowId);
    expect(done.outcome).toBe('COMPLETED');
    await expectProblem(notWaiting, 409, '/problems/not-needing-attention');
  });
});

describe('the curl walk-through (docs/examples/http-walkthrough.sh)', () => {
  it('drives an order saga end to end with plain curl: 201, replayed, 409, COMPLETED, 409 on cancel', async () => {
    const { stdout } = await promisify(execFile)('bash', [path.join(ROOT, 'docs/examples/http-walkthrough.sh')], {
      env: { ...process.env, SAGA_API_URL: base, SAGA_API_TOKEN: ALICE.token },
    });

    expect(stdout).toMatch(/: 201 Created, Location: \/v1\/sagas\/order-alice\.walkthrough-/);
    expect(stdout).toContain('the same request again: 201, Idempotent-Replayed: true');
    expect(stdout).toMatch(/the same cart under another key: 409 "type":"\/problems\/(conflict|duplicate)"/);
    expect(stdout).toMatch(/"outcome":"COMPLETED"/);
    expect(stdout).toMatch(/cancel: 409 "type":"\/problems\/saga-ended"/);
  });
});

describe('documents and probes', () => {
  it('serves an OpenAPI 3.1 document with the order schema, without a token', async () => {
    const response = await get('/openapi.json', null);
    const doc = (await response.json()) as {
      openapi: string;
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { $ref: string } }> } }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    };

    expect(response.status).toBe(200);
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/sagas/order', '/v1/sagas/order-cancel', '/v1/sagas/order-amend', '/v1/sagas', '/v1/sagas/{id}', '/v1/sagas/{id}/cancel', '/livez', '/readyz']),
    );
    expect(doc.paths['/v1/sagas/order']!.post!.requestBody!.content['application/json']!.schema.$ref).toBe('#/components/schemas/OrderData');
    expect(doc.components.schemas.OrderData!.required).toEqual(['customer', 'items', 'payment']);
    expect(doc.components.schemas.OrderData!.properties).toHaveProperty('payment');
  });

  it('answers /livez and /readyz without a token, and /readyz 503 when a service is down', async () => {
    const down = createSagaServer(serverOptions({ readiness: { redis: async () => undefined, temporal: () => Promise.reject(new Error('refused')) } }));
    const downUrl = await listen(down);
    onTestFinished(() => down.close());

    const livez = await get('/livez', null);
    const readyz = await get('/readyz', null);
    const notReady = await fetch(`${downUrl}/readyz`);

    expect(livez.status).toBe(200);
    expect(readyz.status).toBe(200);
    expect(await readyz.json()).toEqual({ status: 'ok', checks: { redis: 'ok', postgres: 'ok', temporal: 'ok' } });
    const doc = await expectProblem(notReady, 503, '/problems/unavailable');
    expect(doc.checks).toEqual({ redis: 'ok', temporal: 'unavailable' });
  });

  it('answers 503 past the request deadline', async () => {
    const client = h.client;
    const stuck: SagaBackend = {
      start: () => new Promise(() => undefined),
      list: client.list.bind(client),
      status: client.status.bind(client),
      cancel: client.cancel.bind(client),
      redrive: client.redrive.bind(client),
      signal: client.signal.bind(client),
      url: client.url.bind(client),
    };
    const app = createSagaServer(serverOptions({ client: stuck, requestTimeoutMs: 200 }));
    const url = await listen(app);
    onTestFinished(() => app.close());

    const response = await start('order', order(), { key: uniqueKey('deadline'), url });

    await expectProblem(response, 503, '/problems/deadline-exceeded');
    expect(response.headers.get('retry-after')).toBe('1');
  });
});

describe('shutdown', () => {
  it('answers every request received before close, completely, and then refuses connections', async () => {
    const client = h.client;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: SagaBackend = {
      start: async (...args) => {
        await gate;
        return client.start(...args);
      },
      list: client.list.bind(client),
      status: client.status.bind(client),
      cancel: client.cancel.bind(client),
      redrive: client.redrive.bind(client),
      signal: client.signal.bind(client),
      url: client.url.bind(client),
    };
    const app = createSagaServer(serverOptions({ client: slow }));
    const url = await listen(app);
    const requests = Array.from({ length: 20 }, (_, i) => start('order', order(), { key: uniqueKey(`drain-${i}`), url }));
    await eventually(async () => app.sagaStats.inFlight, (n) => n === 20, 'every request to be under way');

    const closed = app.close();
    setTimeout(release, 200);
    const responses = await Promise.all(requests);
    await closed;

    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201));
    for (const r of responses) expect(await r.json()).toMatchObject({ reservation: { status: 'SUCCESS' } });
    await expect(start('order', order(), { key: uniqueKey('late'), url })).rejects.toThrow();
  });

  it('saga serve stops on SIGTERM under load without dropping a request it received', async () => {
    const env = {
      ...envOf(h.config),
      SAGA_SERVE_ADDRESS: '127.0.0.1:0',
      SAGA_SERVE_TOKENS: CLIENTS.map((c) => `${c.id}:${c.token}`).join(','),
    };
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    // 'close': the process has exited and its output streams have ended.
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    onTestFinished(() => void child.kill('SIGKILL'));
    const url = await eventually(async () => /listening on (http:\/\/\S+)/.exec(output)?.[1], (u) => u !== undefined, `saga serve to listen; output:\n${output}`, 60_000);

    const sent = Array.from({ length: 30 }, (_, i) => ({ key: uniqueKey(`sigterm-${i}`), data: order() }));
    const requests = sent.map(({ key, data }) =>
      start('order', data, { key, url }).then(
        (r) => r.status,
        (err: Error) => `${err.message}: ${String((err.cause as Error | undefined)?.message)}`,
      ),
    );
    await Promise.race(requests);
    child.kill('SIGTERM');
    const statuses = await Promise.all(requests);
    expect(await exited).toBe(0);

    // Every request the server read was answered in full. A connection still in the kernel's accept
    // queue when the listener closed is reset unread (as on any server): its caller sees a
    // connection error, nothing of it was started, and it may retry with the same key.
    const received = Number(/serve: stopped after (\d+) request/.exec(output)?.[1]);
    expect(statuses.filter((s) => s === 201), output).toHaveLength(received);
    expect(received).toBeGreaterThan(0);
    const refused = sent.filter((_, i) => statuses[i] !== 201);
    for (const status of statuses) if (status !== 201) expect(String(status), output).toMatch(/ECONNRESET|ECONNREFUSED|other side closed|socket/);
    for (const { key, data } of refused) await expectNothingStarted(ALICE.id, key, data);
    expect(output).not.toContain(ALICE.token);
  });
});
