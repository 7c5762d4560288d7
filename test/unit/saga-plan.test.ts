import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/db';
import { encodeEntityId, isSealedStart, planSaga, prepareSaga, reservationMac, sagaSessionId, unkeyedRequestHash } from '../../src/sagas';
import { DEFAULT_OWNER } from '../../src/shared';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { sagaTypes, type OrderInput } from '../fixtures/orders';

const ROOT = path.resolve(__dirname, '../..');
const timings = { leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000, compensationAttempts: 5 };
const cart: OrderInput = {
  customer: 'ada',
  items: [
    { sku: 'y-ray', quantity: 1, priceCents: 100 },
    { sku: 'jam', quantity: 2, priceCents: 250 },
  ],
  payment: { card: '4242424242424242' },
};
const ctx = (idempotencyKey: string) => ({ workflowId: `order-${idempotencyKey}`, namespace: 'default', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });

describe('planSaga: what the worker derives from a start by type', () => {
  it('derives the same plan the client prepares, from {type, idempotencyKey, data} alone', () => {
    const plan = planSaga({ type: 'order', idempotencyKey: 'k1', data: cart }, ctx('k1'));

    const prepared = prepareSaga('order', cart, { idempotencyKey: 'k1', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
    // A start that names no owner runs for the default owner, and counts in no limits (it passed no gate).
    expect(plan).toEqual({ ...prepared, owner: DEFAULT_OWNER, sessionId: sagaSessionId('default', 'order-k1') });
    expect(plan.limits).toBeUndefined();
  });

  it('re-derives, never trusts, what a client from before the gate computed', () => {
    const forged = { ...prepareSaga('order', cart, { idempotencyKey: 'k1', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }), intentKey: `order:${'A'.repeat(43)}`, steps: [], requestHash: 'x' };

    const plan = planSaga(forged, ctx('k1'));

    expect(plan).toMatchObject({ intentKey: prepareSaga('order', cart, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }).intentKey, steps: [{ step: 'chargePayment' }, { step: 'reserveStock' }] });
    expect(plan.requestHash).not.toBe('x');
  });

  it('hashes the request under the intent secret: no plain hash of the card-bearing request to search, the same for one secret', () => {
    const prepare = (secret: Uint8Array) => prepareSaga('order', cart, { idempotencyKey: 'k1', timings, intentSecret: secret, types: sagaTypes });
    const plainSha256 = createHash('sha256').update(canonicalJson({ type: 'order', payload: prepare(TEST_INTENT_SECRET).payload }), 'utf8').digest('hex');

    expect(prepare(TEST_INTENT_SECRET).requestHash).toMatch(/^[0-9a-f]{64}$/);
    expect(prepare(TEST_INTENT_SECRET).requestHash).toBe(prepare(TEST_INTENT_SECRET).requestHash);
    expect(prepare(TEST_INTENT_SECRET).requestHash).not.toBe(plainSha256);
    expect(prepare(new Uint8Array(32).fill(7)).requestHash).not.toBe(prepare(TEST_INTENT_SECRET).requestHash);
    // What sagas of earlier versions recorded, and a retry still matches.
    expect(unkeyedRequestHash(prepare(TEST_INTENT_SECRET))).toBe(plainSha256);
  });

  it('keys an intent by its text in NFC, and names the key earlier versions gave a text that was not', () => {
    const prepare = (customer: string) => prepareSaga('order', { ...cart, customer }, { idempotencyKey: 'k1', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
    const composed = prepare('Zo\u00eb');
    const decomposed = prepare('Zoe\u0308');

    expect(decomposed.intentKey).toBe(composed.intentKey);
    expect(composed.legacyIntentKey).toBeUndefined();
    expect(decomposed.legacyIntentKey).toMatch(/^order:/);
    expect(decomposed.legacyIntentKey).not.toBe(decomposed.intentKey);
    // The saga's own data is kept as it came: only the intent is normalised.
    expect((decomposed.payload as OrderInput).customer).toBe('Zoe\u0308');
  });

  it('refuses a key whose workflow id would be another type\'s saga: order + cancel-x is order-cancel + x', () => {
    const prepare = (type: string, data: unknown, idempotencyKey: string) => () => prepareSaga(type, data, { idempotencyKey, timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });

    for (const key of ['cancel-x', 'amend-1']) {
      expect(prepare('order', cart, key)).toThrow(expect.objectContaining({ name: 'SagaInputError', code: 'INVALID_INPUT' }));
    }
    expect(prepare('order', cart, 'cancel-x')).toThrow('may not begin with "cancel-": "order-cancel-x" is the workflow id of the order-cancel saga of key "x"');
    expect(prepare('order', cart, 'cancelx')).not.toThrow();
    expect(prepare('order-cancel', { order: encodeEntityId(TEST_INTENT_SECRET, 'orders', '1') }, 'x')).not.toThrow();
  });

  it('takes the caller’s timings within bounds, the worker’s where none are given', () => {
    const own = { leaseMs: 3000, heartbeatIntervalMs: 300, heartbeatTimeoutMs: 1500 };

    expect(planSaga({ type: 'order', idempotencyKey: 'k1', data: cart, timings: own }, ctx('k1')).timings).toEqual({ ...own, compensationAttempts: 5 });
    expect(planSaga({ type: 'order', idempotencyKey: 'k1', data: cart }, ctx('k1')).timings).toEqual(timings);
  });

  it.each([
    ['not an object', [1, 2], /must be an object/],
    ['a field it does not know', { type: 'order', idempotencyKey: 'k1', payload: cart }, /unknown field "payload"/],
    ['no data', { type: 'order', idempotencyKey: 'k1' }, /missing field data/],
    ['an unknown type', { type: 'nope', idempotencyKey: 'k1', data: cart }, /unknown saga type "nope"/],
    ['a bad key', { type: 'order', idempotencyKey: 'has space', data: cart }, /idempotency key must be/],
    ['data the type refuses', { type: 'order', idempotencyKey: 'k1', data: { ...cart, items: [] } }, /invalid order input at items/],
    ['an order that costs nothing', { type: 'order', idempotencyKey: 'k1', data: { ...cart, items: [{ sku: 'widget', quantity: 2, priceCents: 0 }] } }, /invalid order input at items: an order must cost something/],
    ['a zero lease', { type: 'order', idempotencyKey: 'k1', data: cart, timings: { leaseMs: 0 } }, /timings.leaseMs/],
    ['a lease within a heartbeat', { type: 'order', idempotencyKey: 'k1', data: cart, timings: { leaseMs: 1000 } }, /heartbeatTimeoutMs < leaseMs/],
    ['a thousand compensation attempts', { type: 'order', idempotencyKey: 'k1', data: cart, timings: { compensationAttempts: 1000 } }, /compensationAttempts/],
    ['a reservation of another session', { type: 'order', idempotencyKey: 'k1', data: cart, reservation: { sessionId: 'x', fencingToken: '1', expiresAt: 1 } }, /not taken for this saga's session/],
    ['a reservation with a bad token', { type: 'order', idempotencyKey: 'k1', data: cart, reservation: { sessionId: 'x', fencingToken: '-1', expiresAt: 1 } }, /reservation.fencingToken/],
    ['a reservation with a MAC that is no hash', { type: 'order', idempotencyKey: 'k1', data: cart, reservation: { sessionId: sagaSessionId('default', 'order-k1'), fencingToken: '1', expiresAt: 1, mac: 'x' } }, /reservation.mac: must be 64 hex digits/],
  ])('refuses %s with INVALID_INPUT or UNKNOWN_SAGA_TYPE, naming the problem', (_, start, message) => {
    expect(() => planSaga(start, ctx('k1'))).toThrow(message);
    try {
      planSaga(start, ctx('k1'));
    } catch (err) {
      expect(err).toMatchObject({ name: 'SagaInputError', code: expect.stringMatching(/^(INVALID_INPUT|UNKNOWN_SAGA_TYPE)$/) });
    }
  });

  it('refuses a saga running under a workflow id its type and key do not name', () => {
    expect(() => planSaga({ type: 'order', idempotencyKey: 'k1', data: cart }, ctx('k2'))).toThrow(/must run as workflow id "order-k1"/);
  });
});

describe('a gate reservation sealed with the intent secret', () => {
  const requestHash = prepareSaga('order', cart, { idempotencyKey: 'k1', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }).requestHash;
  const taken = { sessionId: sagaSessionId('default', 'order-k1'), fencingToken: '17', expiresAt: 1_800_000_000_000 };
  const sealed = (reservation: object, secret: Uint8Array = TEST_INTENT_SECRET, saga = { workflowId: 'order-k1', requestHash }) => ({ ...reservation, mac: reservationMac(taken, saga, secret) });
  const startWith = (reservation: object, data: unknown = cart) => ({ type: 'order', idempotencyKey: 'k1', data, reservation });
  const isSealed = (start: unknown) => isSealedStart(start, planSaga(start, ctx('k1')), TEST_INTENT_SECRET);

  it('is planned without its MAC: the plan has the shape plans always had', () => {
    expect(planSaga(startWith(sealed(taken)), ctx('k1')).reservation).toEqual(taken);
  });

  it('holds for the reservation, the saga and the request SagaClient sealed it for', () => {
    expect(isSealed(startWith(sealed(taken)))).toBe(true);
  });

  it.each([
    ['no MAC (a start of an earlier version, or any plain client)', startWith(taken)],
    ['a MAC under another secret', startWith(sealed(taken, new Uint8Array(32).fill(7)))],
    ['a MAC of another token', startWith({ ...sealed(taken), fencingToken: '18' })],
    ['a MAC of another expiry', startWith({ ...sealed(taken), expiresAt: taken.expiresAt + 1 })],
    ['a MAC of another request (the same reservation, other data)', startWith(sealed(taken), { ...cart, customer: 'eve' })],
    ['a MAC of another saga', startWith(sealed(taken, TEST_INTENT_SECRET, { workflowId: 'order-k2', requestHash }))],
    ['the request hash as its MAC', startWith({ ...taken, mac: requestHash })],
  ])('does not hold with %s', (_, start) => {
    expect(isSealed(start)).toBe(false);
  });

  it('does not hold for a start of the older shape, whose reservation is not planned', () => {
    const older = { ...prepareSaga('order', cart, { idempotencyKey: 'k1', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }), reservation: sealed(taken) };

    expect(planSaga(older, ctx('k1')).reservation).toBeUndefined();
    expect(isSealed(older)).toBe(false);
  });
});

describe('sagaSessionId', () => {
  it('is one session per workflow id and namespace, usable as an RMS session', () => {
    const a = sagaSessionId('default', 'order-k1');

    expect(sagaSessionId('default', 'order-k1')).toBe(a);
    expect(sagaSessionId('default', 'order-k2')).not.toBe(a);
    expect(sagaSessionId('other', 'order-k1')).not.toBe(a);
    expect(a).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });
});

describe('the order intent', () => {
  it('is the same on a host whose locale sorts j after y (Lithuanian)', () => {
    const script = `const { prepareSaga } = require('./src/sagas'); const { sagaTypes } = require('./test/fixtures/orders'); process.stdout.write(prepareSaga('order', ${JSON.stringify(cart)}, { timings: ${JSON.stringify(timings)}, intentSecret: Buffer.from('${TEST_INTENT_SECRET.toString('base64')}', 'base64'), types: sagaTypes }).intentKey);`;
    const keyUnder = (locale: string) =>
      execFileSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], { cwd: ROOT, env: { ...process.env, LC_ALL: locale }, encoding: 'utf8' });

    const lithuanian = keyUnder('lt_LT.UTF-8');

    expect(lithuanian).toBe(keyUnder('C.UTF-8'));
    expect(lithuanian).toBe(prepareSaga('order', cart, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }).intentKey);
    // Two node processes, each loading the order app's sources through tsx: seconds on a loaded machine.
  }, 60_000);
});
