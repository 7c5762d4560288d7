/**
 * The saga's fewer round trips (patch write-registers), as its activities run them for real (real
 * Redis, real PostgreSQL, the order app's table and stock) in the SDK's activity test environment:
 * the fenced write registers its row in its own transaction and promotes the reservation, and the
 * last step, in our database, completes the row in the step's transaction. Each test is an
 * interleaving that would break a guarantee if the merged activity did less than the two it replaces.
 */
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createSagaActivities, type OperationStepResult, type StepRequest, type WriteOutcome } from '../../src/activities/saga';
import { createPool } from '../../src/db/pool';
import { Rms, createRedis, intentKey } from '../../src/rms';
import { intentKeys } from '../../src/rms/keys';

import { testConfig } from '../helpers/context';
import { order } from '../helpers/saga-harness';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { orderSaga, ordersTable, sagaTypes } from '../fixtures/orders';

const config = testConfig('write registers');
const timings = { leaseMs: 5_000, heartbeatIntervalMs: 500, heartbeatTimeoutMs: 2_000, compensationAttempts: 1 };
let redis: Redis | Cluster;
let rms: Rms;
let pool: Pool;
let activities: ReturnType<typeof createSagaActivities>;
beforeAll(() => {
  redis = createRedis(config.redis);
  rms = new Rms(redis, { keyPrefix: config.redis.keyPrefix });
  pool = createPool(config.db);
  activities = createSagaActivities({ rms, pool, timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
});
afterAll(async () => {
  redis.disconnect();
  await pool.end();
});

type WriteRequest = Parameters<ReturnType<typeof createSagaActivities>['writeEntity']>[0];

/** A saga of `order` holding its reservation: its owner and its write's request. */
async function reserved() {
  const input = orderSaga.schema.parse(order());
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const sessionId = `session-${randomUUID()}`;
  const held = await rms.reserve({ intent, sessionId, leaseMs: timings.leaseMs });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${held.status}`);
  const owner = { type: 'order', intentKey: intent, sessionId, fencingToken: held.fencingToken };
  const write: WriteRequest = { ...owner, payload: input, timings, register: true };
  return { owner, write, input, sagaKey: `saga-${randomUUID()}` };
}

/** Runs the write as attempt `attempt` of the activity of saga `sagaKey`. */
function writeAs(sagaKey: string, attempt: number, req: WriteRequest): Promise<WriteOutcome> {
  const env = new MockActivityEnvironment({ attempt, workflowExecution: { workflowId: sagaKey, runId: randomUUID() } });
  const write = (r: WriteRequest) => activities.writeEntity(r);
  return env.run<[WriteRequest], WriteOutcome, typeof write>(write, req);
}

it('commits the row REGISTERED, never PROCESSING, and promotes the reservation to the entity marker', async () => {
  const { owner, write, sagaKey } = await reserved();

  const written = await writeAs(sagaKey, 1, write);

  expect(written.status).toBe('WRITTEN');
  expect(await ordersTable.find(pool, owner.intentKey)).toMatchObject({ status: 'REGISTERED', lastFencingToken: owner.fencingToken });
  const held = await rms.inspect(owner.intentKey);
  expect(held.holder).toBeUndefined();
  expect(held).toMatchObject({ exists: true, existsToken: owner.fencingToken });
});

it('answers a retry of a write that committed, whose lease is gone by now, with its own entity: no LEASE_LOST, the marker repaired', async () => {
  // Attempt 1 commits the registered row, then its reply is lost; meanwhile Redis loses the intent's
  // keys (a flush), so the lease that attempt held is gone. Attempt 2 must not take its own entity
  // for a lost lease: the saga, told SUCCESS, would compensate it.
  const { owner, write, sagaKey } = await reserved();
  const first = await writeAs(sagaKey, 1, write);
  await redis.del(...keysOf(owner.intentKey));

  const retried = await writeAs(sagaKey, 2, write);

  expect(retried).toEqual(first);
  expect(await ordersTable.find(pool, owner.intentKey)).toMatchObject({ status: 'REGISTERED', lastFencingToken: owner.fencingToken });
  expect(await rms.inspect(owner.intentKey)).toMatchObject({ exists: true, existsToken: owner.fencingToken });
});

it("does not take a newer holder's registered entity for its own on a retry: LEASE_LOST, that entity untouched", async () => {
  // A's first attempt is given up before it commits (a paused worker), A's lease ends, B takes the
  // intent and registers its row; A's retry finds a REGISTERED row, but not under its token.
  const a = await reserved();
  await redis.del(...keysOf(a.owner.intentKey));
  const b = await rms.reserve({ intent: a.owner.intentKey, sessionId: 'newer', leaseMs: timings.leaseMs });
  if (b.status !== 'SUCCESS') throw new Error(`could not arrange the newer lease: ${b.status}`);
  const bWrite: WriteRequest = { ...a.write, sessionId: 'newer', fencingToken: b.fencingToken };
  expect((await writeAs(`saga-${randomUUID()}`, 1, bWrite)).status).toBe('WRITTEN');

  const retried = await writeAs(a.sagaKey, 2, a.write).then(
    () => undefined,
    (err: unknown) => err,
  );

  expect(retried).toMatchObject({ type: 'LEASE_LOST' });
  expect(await ordersTable.find(pool, a.owner.intentKey)).toMatchObject({ status: 'REGISTERED', lastFencingToken: b.fencingToken });
  expect(await rms.inspect(a.owner.intentKey)).toMatchObject({ exists: true, existsToken: b.fencingToken });
});

it('refuses a write whose lease a newer holder took before it committed: nothing registered, nothing promoted', async () => {
  const { owner, write, sagaKey } = await reserved();
  await redis.del(...keysOf(owner.intentKey));
  const newer = await rms.reserve({ intent: owner.intentKey, sessionId: 'newer', leaseMs: timings.leaseMs });
  if (newer.status !== 'SUCCESS') throw new Error(`could not arrange the newer lease: ${newer.status}`);

  const attempt = await writeAs(sagaKey, 1, write).then(
    () => undefined,
    (err: unknown) => err,
  );

  expect(attempt).toMatchObject({ type: 'LEASE_LOST' });
  expect(await ordersTable.find(pool, owner.intentKey)).toBeUndefined();
  expect(await rms.inspect(owner.intentKey)).toMatchObject({ exists: false, holder: { sessionId: 'newer' } });
  await rms.release({ intent: owner.intentKey, sessionId: 'newer', fencingToken: newer.fencingToken });
});

/** The Redis keys of `intent` under this run's prefix: lease, marker, ended sessions. */
function keysOf(intent: string): string[] {
  const { processing, entityExists, endedSessions } = intentKeys(config.redis.keyPrefix, intent);
  return [processing, entityExists, endedSessions];
}

/** Runs the last step, reserveStock, for the saga of `owner` whose row is `entityId`. */
function lastStep(sagaKey: string, owner: StepRequest, attempt = 1): Promise<OperationStepResult> {
  const env = new MockActivityEnvironment({ attempt, workflowExecution: { workflowId: sagaKey, runId: randomUUID() } });
  const step = (r: StepRequest) => activities.runStep(r);
  return env.run<[StepRequest], OperationStepResult, typeof step>(step, owner);
}

it("completes the row in the last step's own transaction, and a replay of that step answers from its record", async () => {
  const { owner, write, sagaKey, input } = await reserved();
  const written = await writeAs(sagaKey, 1, write);
  if (written.status !== 'WRITTEN') throw new Error('the write did not write');
  const step: StepRequest = { ...owner, name: 'reserveStock', sagaKey, payload: input, created: { entityId: written.entityId, results: {} }, completes: true };

  const done = await lastStep(sagaKey, step);
  const replayed = await lastStep(sagaKey, step, 2);

  expect(done).toMatchObject({ replayed: false, completed: true });
  expect(await ordersTable.find(pool, owner.intentKey)).toMatchObject({ status: 'COMPLETED' });
  // The replay says nothing of the row: the saga completes it itself (a no-op now).
  expect(replayed).toMatchObject({ replayed: true });
  expect(replayed).not.toHaveProperty('completed');
  const { rows } = await pool.query<{ quantity: string }>('SELECT quantity FROM stock_reservations WHERE saga_key = $1', [sagaKey]);
  expect(rows.map((r) => Number(r.quantity)).sort()).toEqual([1, 2]);
});

it('rolls the last step back with the completion when the row is no longer the saga\'s: no stock taken, no record, FENCED_OUT', async () => {
  const { owner, write, sagaKey, input } = await reserved();
  const written = await writeAs(sagaKey, 1, write);
  if (written.status !== 'WRITTEN') throw new Error('the write did not write');
  // The row was undone meanwhile (a late attempt: the saga compensated): COMPENSATED cannot become COMPLETED.
  await ordersTable.markCompensated(pool, owner);
  const step: StepRequest = { ...owner, name: 'reserveStock', sagaKey, payload: input, created: { entityId: written.entityId, results: {} }, completes: true };

  const attempt = await lastStep(sagaKey, step).then(
    () => undefined,
    (err: unknown) => err,
  );

  expect(attempt).toMatchObject({ type: 'FENCED_OUT' });
  const { rows } = await pool.query('SELECT 1 FROM stock_reservations WHERE saga_key = $1', [sagaKey]);
  expect(rows).toEqual([]);
  const records = await pool.query("SELECT status FROM idempotency_store WHERE key LIKE $1 || ':%'", [sagaKey]);
  expect(records.rows).toEqual([]);
});
