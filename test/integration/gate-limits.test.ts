/**
 * Limits at the gate (SagaDefinition.limits) against real Redis, PostgreSQL, Temporal and the payment
 * provider: sagas in flight and starts per second of one caller, per caller and per scope value,
 * under real concurrency; refused starts leave no workflow, lease or count; sagas count themselves
 * out however they end, a worker killed mid-saga included; HTTP answers 429 with Retry-After.
 */
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSagaServer } from '../../src/http';
import { limitKeys } from '../../src/rms';
import type { StartedSaga, StartOptions } from '../../src/client';
import { killWorkerProcesses, startWorkerProcess, workerRunning } from '../helpers/processes';
import { eventually, order, startHarness, withWorker as runWorker, type SagaHarness } from '../helpers/saga-harness';
import { DECLINED_CARD, ordersTable } from '../fixtures/orders';
import { limitedSagaTypesFor } from '../fixtures/limited-sagas';

let h: SagaHarness;
beforeAll(async () => {
  // No worker but the tests' own: a started saga stays in flight until a test lets it run. A lease
  // that outlives the heartbeat timeout plus a retry: a surviving worker can take over a write.
  h = await startHarness('gate limits', { worker: false, sagaTypes: limitedSagaTypesFor, env: { LEASE_MS: '6000', HEARTBEAT_INTERVAL_MS: '300', HEARTBEAT_TIMEOUT_MS: '1500' } });
});
afterAll(async () => {
  killWorkerProcesses();
  await h?.stop();
});

/** A worker of the harness's types, until `fn` resolves. */
function withWorker<T>(fn: () => Promise<T>): Promise<T> {
  return runWorker({ config: h.config, sagas: h.types }, fn);
}

/** Lets the sagas `started` run to their ends. */
async function finish(started: readonly StartedSaga[]): Promise<void> {
  await withWorker(() => Promise.all(started.filter((s) => s.started).map((s) => h.client.result(s.workflowId))));
}

/** How many sagas count in each counter of `owner`'s limits that a saga of `type` with `data` counts in. */
async function inFlight(type: string, data: unknown, owner: string): Promise<number[]> {
  const { limits } = h.client.prepare(type, data, undefined, owner);
  return Promise.all(limits!.counters.map((id) => h.redis.zcard(limitKeys(h.config.redis.keyPrefix, limits!.tag, id).inFlight)));
}

/** Nothing of `answer` is left: no workflow under its key, no lease on its intent. */
async function expectNothingLeft(answer: StartedSaga): Promise<void> {
  await expect(h.client.temporal.workflow.getHandle(answer.workflowId).describe()).rejects.toThrow(/not found/i);
  expect((await h.rms.inspect(answer.intentKey)).holder).toBeUndefined();
}

function start(type: string, data: unknown, options: StartOptions): Promise<StartedSaga> {
  return h.client.start(type, data, options);
}

describe('a limit of sagas in flight', () => {
  it('admits exactly N of 50 concurrent starts; the others start nothing and hold nothing, and the count is back to 0 when the N end', async () => {
    const owner = 'limits-fifty';
    // Five clients, as five processes of one app would be: only Redis sees every start.
    const clients = Array.from({ length: 5 }, () => h.newClient());
    const carts = Array.from({ length: 50 }, () => order());

    const answers = await Promise.all(carts.map((cart, i) => clients[i % 5]!.start('order-in-flight', cart, { owner })));

    const admitted = answers.filter((a) => a.reservation.status === 'SUCCESS');
    const refused = answers.filter((a) => a.reservation.status !== 'SUCCESS');
    expect(admitted).toHaveLength(5);
    expect(admitted.every((a) => a.started)).toBe(true);
    expect(refused).toHaveLength(45);
    for (const answer of refused) {
      expect(answer).toMatchObject({ started: false, limited: 'IN_FLIGHT', reservation: { status: 'CONFLICT', retryAfterMs: expect.any(Number) } });
      expect(answer.reservation.status === 'CONFLICT' && answer.reservation.retryAfterMs).toBeGreaterThan(0);
    }
    await Promise.all(refused.map(expectNothingLeft));
    expect(await inFlight('order-in-flight', carts[0], owner)).toEqual([5]);

    await finish(admitted);

    expect(await inFlight('order-in-flight', carts[0], owner)).toEqual([0]);
    const again = await start('order-in-flight', order(), { owner });
    expect(again.reservation.status).toBe('SUCCESS');
    await finish([again]);
  });

  it('still answers a DUPLICATE, a CONFLICT on a held intent and a retry of a running saga at the limit, counting none of them', async () => {
    const owner = 'limits-answers';
    const existing = order();
    const done = await start('order-one', existing, { owner });
    await finish([done]);
    const running = order();
    const held = await start('order-one', running, { owner });
    expect(held.reservation.status).toBe('SUCCESS');

    // The same entity under another key: DUPLICATE, in its one round trip.
    const duplicate = await start('order-one', existing, { owner });
    // The held intent under another key: CONFLICT, of the intent (no `limited`).
    const conflict = await start('order-one', running, { owner });
    // The running saga's own key: its SUCCESS and token.
    const retry = await start('order-one', running, { owner, idempotencyKey: held.idempotencyKey });
    // A new intent: refused by the limit.
    const limited = await start('order-one', order(), { owner });

    expect(duplicate).toMatchObject({ started: false, reservation: { status: 'DUPLICATE' } });
    expect(duplicate.limited).toBeUndefined();
    expect(conflict).toMatchObject({ started: false, reservation: { status: 'CONFLICT' } });
    expect(conflict.limited).toBeUndefined();
    expect(retry).toMatchObject({ workflowId: held.workflowId, started: true, reservation: held.reservation });
    expect(limited).toMatchObject({ started: false, limited: 'IN_FLIGHT', reservation: { status: 'CONFLICT' } });
    await expectNothingLeft(limited);
    expect(await inFlight('order-one', running, owner)).toEqual([1]);

    await finish([held]);
    expect(await inFlight('order-one', running, owner)).toEqual([0]);
  });

  it('answers a retry of an ended saga\'s key from its saga at the limit: no 429, no start counted', async () => {
    const owner = 'limits-ended';
    const cart = order({ payment: { card: DECLINED_CARD } });
    const declined = await start('order-one', cart, { owner });
    await finish([declined]);
    // The caller is at its limit of one saga in flight; the declined saga's intent is free.
    const held = await start('order-one', order(), { owner });
    expect(held.reservation.status).toBe('SUCCESS');

    const retry = await start('order-one', cart, { owner, idempotencyKey: declined.idempotencyKey });

    expect(retry).toMatchObject({ workflowId: declined.workflowId, started: true, replayed: true, outcome: 'COMPENSATED' });
    expect(retry.limited).toBeUndefined();
    expect(await inFlight('order-one', order(), owner)).toEqual([1]);
    await finish([held]);
  });

  it('is per caller: another owner at the same type is admitted while one is at its limit', async () => {
    const first = await start('order-one', order(), { owner: 'limits-caller-a' });
    const refused = await start('order-one', order(), { owner: 'limits-caller-a' });
    const other = await start('order-one', order(), { owner: 'limits-caller-b' });

    expect(first.reservation.status).toBe('SUCCESS');
    expect(refused).toMatchObject({ limited: 'IN_FLIGHT' });
    expect(other.reservation.status).toBe('SUCCESS');
    await finish([first, other]);
  });

  it('is per declared scope value: one customer at its limit does not hold back another', async () => {
    const owner = 'limits-customers';
    const alice = `alice-${Date.now()}`;
    const bob = `bob-${Date.now()}`;
    const aliceFirst = order({ customer: alice });
    const aliceSecond = order({ customer: alice, items: [{ sku: 'gadget', quantity: 1, priceCents: 4999 }] });

    const first = await start('order-per-customer', aliceFirst, { owner });
    const second = await start('order-per-customer', aliceSecond, { owner });
    const bobs = await start('order-per-customer', order({ customer: bob }), { owner });

    expect(first.reservation.status).toBe('SUCCESS');
    expect(second).toMatchObject({ started: false, limited: 'IN_FLIGHT' });
    await expectNothingLeft(second);
    expect(bobs.reservation.status).toBe('SUCCESS');
    // The caller's counter holds both sagas; each customer's, its own.
    expect(await inFlight('order-per-customer', aliceFirst, owner)).toEqual([2, 1]);
    // The customer's id is in no key: only its keyed digest.
    const keys = await h.redis.keys(`${h.config.redis.keyPrefix}*`);
    expect(keys.some((k) => k.includes(alice) || k.includes(bob))).toBe(false);

    await finish([first, bobs]);
    expect(await inFlight('order-per-customer', aliceFirst, owner)).toEqual([0, 0]);
    const later = await start('order-per-customer', aliceSecond, { owner });
    expect(later.reservation.status).toBe('SUCCESS');
    await finish([later]);
  });
});

describe('a limit of starts per second', () => {
  it('admits R of concurrent starts in a second, tells the others when to come back, and admits again then', async () => {
    const owner = 'limits-rate';
    const answers = await Promise.all(Array.from({ length: 10 }, () => start('order-rate', order(), { owner })));
    const answered = Date.now();

    const admitted = answers.filter((a) => a.reservation.status === 'SUCCESS');
    const refused = answers.filter((a) => a.reservation.status !== 'SUCCESS');
    expect(admitted).toHaveLength(3);
    expect(refused).toHaveLength(7);
    const waits = refused.map((a) => (a.reservation.status === 'CONFLICT' ? a.reservation.retryAfterMs : -1));
    for (const answer of refused) expect(answer).toMatchObject({ started: false, limited: 'RATE' });
    for (const wait of waits) {
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(1000);
    }
    await Promise.all(refused.map(expectNothingLeft));

    // The window is the behaviour under test: once every start of the first batch is a second old
    // (each was admitted before `answered`), three starts are admitted again.
    await delay(answered + 1000 - Date.now() + 20);
    const later = await Promise.all(Array.from({ length: 4 }, () => start('order-rate', order(), { owner })));
    expect(later.filter((a) => a.reservation.status === 'SUCCESS')).toHaveLength(3);

    await finish([...admitted, ...later]);
  });
});

describe('a saga counts itself out', () => {
  it('when it ends compensated (a declined card) and when it is cancelled', async () => {
    const owner = 'limits-ends';
    const declinedCustomer = `declined-${Date.now()}`;
    const declined = await start('order-in-flight', order({ customer: declinedCustomer, payment: { card: DECLINED_CARD } }), { owner });
    const slow = await start('order-in-flight', order({ simulate: { stepDelayMs: 10_000 } }), { owner });
    expect(await inFlight('order-in-flight', order(), owner)).toEqual([2]);

    const [compensated, cancelled] = await withWorker(async () => {
      await eventually(() => h.client.status(slow.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the slow saga to run its steps');
      await h.client.cancel(slow.workflowId);
      return Promise.all([h.client.result(declined.workflowId), h.client.result(slow.workflowId)]);
    });

    expect(compensated.outcome).toBe('COMPENSATED');
    expect(cancelled).toMatchObject({ outcome: 'COMPENSATED', reason: 'CANCELLED' });
    expect(await inFlight('order-in-flight', order(), owner)).toEqual([0]);
    // A retry of the compensated saga's key: its freed intent is reserved and counted again, then
    // the key's saga is found ended; the count goes at once, with the lease.
    const retry = await start('order-in-flight', order({ customer: declinedCustomer, payment: { card: DECLINED_CARD } }), { owner, idempotencyKey: declined.idempotencyKey });
    expect(retry).toMatchObject({ workflowId: declined.workflowId, replayed: true, outcome: 'COMPENSATED' });
    expect(await inFlight('order-in-flight', order(), owner)).toEqual([0]);
  });

  it('when its worker was killed mid-write and another worker finished it', async () => {
    const owner = 'limits-crash';
    const module = { SAGA_TYPES_MODULE: path.resolve(__dirname, '../fixtures/limited-sagas.ts') };
    const workers = [await startWorkerProcess(h.config, module), await startWorkerProcess(h.config, module)];
    const started = await start('order-one', order({ simulate: { writeDelayMs: 4000 } }), { owner });
    expect(started.reservation.status).toBe('SUCCESS');
    const { running: victim, other: survivor } = await workerRunning(h.client.temporal.workflow.getHandle(started.workflowId), 'writeEntity', workers);

    victim.child.kill('SIGKILL');
    await victim.exited;
    const final = await h.client.result(started.workflowId);
    survivor.child.kill('SIGTERM');
    await survivor.exited;

    expect(final.outcome).toBe('COMPLETED');
    expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'COMPLETED' });
    expect(await inFlight('order-one', order(), owner)).toEqual([0]);
  });
});

describe('over HTTP', () => {
  it('a client at its limit is answered 429 with Retry-After, starting nothing; another client is not held back', async () => {
    const clients = [
      { id: 'limits_alice', token: 'limits_alice-token-0123456789' },
      { id: 'limits_bob', token: 'limits_bob-token-0123456789' },
    ];
    const app = createSagaServer({ client: h.client, types: h.types, clients, readiness: {} });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const post = (token: string, key: string) =>
      fetch(`${base}/v1/sagas/order-one`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'Idempotency-Key': key }, body: JSON.stringify(order()) });
    try {
      const stamp = Date.now().toString(36);
      const first = await post(clients[0]!.token, `first-${stamp}`);
      const limited = await post(clients[0]!.token, `second-${stamp}`);
      const bobs = await post(clients[1]!.token, `first-${stamp}`);

      expect(first.status).toBe(201);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(limited.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await limited.json()).toMatchObject({ type: '/problems/limited', status: 429, limit: 'IN_FLIGHT', retryAfterMs: expect.any(Number) });
      await expect(h.client.temporal.workflow.getHandle(`order-one-limits_alice.second-${stamp}`).describe()).rejects.toThrow(/not found/i);
      expect(bobs.status).toBe(201);
      const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, { post: { responses: Record<string, unknown> } }> };
      expect(openapi.paths['/v1/sagas/order-one']?.post.responses['429']).toBeDefined();
      expect(openapi.paths['/v1/sagas/order']?.post.responses['429']).toBeUndefined();

      const ids = [`order-one-limits_alice.first-${stamp}`, `order-one-limits_bob.first-${stamp}`];
      await withWorker(() => Promise.all(ids.map((id) => h.client.result(id))));
      expect(await inFlight('order-one', order(), 'http:limits_alice')).toEqual([0]);
    } finally {
      await app.close();
    }
  });
});
