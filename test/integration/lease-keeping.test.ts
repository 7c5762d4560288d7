/**
 * The lease a fenced write keeps alive ends with the attempt that keeps it: whatever way the attempt
 * ends (PostgreSQL out of reach before the write, a failed write, a lost lease), no timer goes on
 * extending it. And the beats that keep it cost the Temporal server a write each (a heartbeat persists
 * the activity's progress in the workflow's state), so they come at the interval only, never as the
 * work starts: a write or a step that ends within one interval sends none. The activities run for
 * real (real Redis, real PostgreSQL or an unreachable one) in the SDK's activity test environment,
 * which gives them a Temporal activity context and reports each heartbeat.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createSagaActivities, type OperationStepResult, type StepRequest, type WriteOutcome } from '../../src/activities/saga';
import { createPool } from '../../src/db/pool';
import { Rms, createRedis, intentKey } from '../../src/rms';

import { testConfig } from '../helpers/context';
import { eventually, order, settledWithin } from '../helpers/saga-harness';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { orderSaga, sagaTypes } from '../fixtures/orders';

const config = testConfig('lease keeping');
const timings = { leaseMs: 600, heartbeatIntervalMs: 100, heartbeatTimeoutMs: 400, compensationAttempts: 1 };
let redis: Redis | Cluster;
let rms: Rms;
beforeAll(() => {
  redis = createRedis(config.redis);
  rms = new Rms(redis, { keyPrefix: config.redis.keyPrefix });
});
afterAll(() => {
  redis.disconnect();
});

it('lets the lease expire when PostgreSQL cannot be reached for the write: no timer outlives the attempt', async () => {
  // PostgreSQL out of reach for this worker: connect() fails after its timeout.
  const unreachable = createPool({ ...config.db, url: 'postgres://postgres@127.0.0.1:1/none', connectTimeoutMs: 300 });
  const activities = createSagaActivities({ rms, pool: unreachable, timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
  const input = orderSaga.schema.parse(order());
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const held = await rms.reserve({ intent, sessionId: 'writer', leaseMs: timings.leaseMs });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${held.status}`);
  const owner = { type: 'order', intentKey: intent, sessionId: 'writer', fencingToken: held.fencingToken };

  const attempt = await new MockActivityEnvironment().run((req: Parameters<typeof activities.writeEntity>[0]) => activities.writeEntity(req), { ...owner, payload: input, timings }).then(
    () => undefined,
    (err: unknown) => err,
  );
  await unreachable.end();

  expect((attempt as Error).message).toMatch(/ECONNREFUSED|connect/);
  // Beats every 100 ms would keep a 600 ms lease forever; once the attempt is over, it ends.
  const after = await eventually(() => rms.inspect(intent), (i) => i.holder === undefined, 'the lease to expire', 5_000);
  expect(after.holder).toBeUndefined();
});

it('keeps a written row\'s lease as long as the pickup lease until finalise: a worker lost between the two costs no SUCCESS', async () => {
  const pool = createPool(config.db);
  const pickupLeaseMs = 20_000;
  const activities = createSagaActivities({ rms, pool, timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes, pickupLeaseMs });
  const input = orderSaga.schema.parse(order());
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const held = await rms.reserve({ intent, sessionId: 'writer', leaseMs: timings.leaseMs });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${held.status}`);
  const owner = { type: 'order', intentKey: intent, sessionId: 'writer', fencingToken: held.fencingToken };

  try {
    const write = (req: Parameters<typeof activities.writeEntity>[0]) => activities.writeEntity(req);
    const written = await new MockActivityEnvironment().run<Parameters<typeof write>, WriteOutcome, typeof write>(write, { ...owner, payload: input, timings });

    expect(written.status).toBe('WRITTEN');
    const { holder } = await rms.inspect(intent);
    expect(holder).toMatchObject({ sessionId: 'writer', fencingToken: held.fencingToken });
    // Far past its own 600 ms: the finalise that promotes it may be a worker's restart away.
    expect(holder!.remainingMs).toBeGreaterThan(pickupLeaseMs - 5_000);
  } finally {
    await rms.release({ intent, sessionId: 'writer', fencingToken: held.fencingToken });
    await pool.end();
  }
});

it("ends an entity lock's hold cancelled while its first extension is in flight: a stopping worker does not wait for it forever", async () => {
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const held = await rms.reserve({ intent, sessionId: 'holder', leaseMs: timings.leaseMs });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${held.status}`);
  // The RMS, its extensions held back until the activity was cancelled: a worker stopping (its
  // activities cancelled) while the hold's first extension is on its way to Redis.
  let extending!: () => void;
  const firstExtension = new Promise<void>((resolve) => (extending = resolve));
  let answer!: () => void;
  const cancelled = new Promise<void>((resolve) => (answer = resolve));
  const slow = Object.create(rms) as Rms;
  slow.extend = async (lease) => {
    extending();
    await cancelled;
    return rms.extend(lease);
  };
  const pool = createPool(config.db);
  const activities = createSagaActivities({ rms: slow, pool, timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
  const env = new MockActivityEnvironment();

  try {
    const hold = (req: Parameters<typeof activities.holdLock>[0]) => activities.holdLock(req);
    const holding = env.run(hold, { type: 'order', intentKey: intent, sessionId: 'holder', fencingToken: held.fencingToken, leaseMs: timings.leaseMs, heartbeatIntervalMs: timings.heartbeatIntervalMs });
    await firstExtension;
    env.cancel('WORKER_SHUTDOWN');
    answer();
    // Bounded: without an answer, the worker's shutdown would wait for this activity for good.
    const settled = await settledWithin(holding, 5_000);

    expect(settled, 'the hold to end').toEqual({ error: expect.objectContaining({ name: 'CancelledFailure' }) });
  } finally {
    await rms.release({ intent, sessionId: 'holder', fencingToken: held.fencingToken });
    await pool.end();
  }
});

/** An activity environment of saga `sagaKey` that records every heartbeat: when (ms after it was made) and with what. */
function recording(sagaKey: string) {
  const env = new MockActivityEnvironment({ workflowExecution: { workflowId: sagaKey, runId: randomUUID() } });
  const beats: { atMs: number; details: unknown }[] = [];
  const since = performance.now();
  env.on('heartbeat', (details: unknown) => beats.push({ atMs: performance.now() - since, details }));
  return { env, beats };
}

it('sends no heartbeat for a fenced write or a step that ends within one interval', async () => {
  // An interval far longer than a write or a step takes here.
  const quiet = { leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000, compensationAttempts: 1 };
  const pool = createPool(config.db);
  const activities = createSagaActivities({ rms, pool, timings: quiet, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
  const input = orderSaga.schema.parse(order());
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const held = await rms.reserve({ intent, sessionId: 'writer', leaseMs: quiet.leaseMs });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${held.status}`);
  const owner = { type: 'order', intentKey: intent, sessionId: 'writer', fencingToken: held.fencingToken };
  const sagaKey = `saga-${randomUUID()}`;

  try {
    const writing = recording(sagaKey);
    const write = (r: Parameters<typeof activities.writeEntity>[0]) => activities.writeEntity(r);
    const written = await writing.env.run<Parameters<typeof write>, WriteOutcome, typeof write>(write, { ...owner, payload: input, timings: quiet, register: true });
    if (written.status !== 'WRITTEN') throw new Error(`the write did not write: ${written.status}`);
    const stepping = recording(sagaKey);
    const step = (r: StepRequest) => activities.runStep(r);
    const request: StepRequest = { ...owner, name: 'reserveStock', sagaKey, payload: input, created: { entityId: written.entityId, results: {} }, completes: true };

    const done = await stepping.env.run<[StepRequest], OperationStepResult, typeof step>(step, request);

    expect(done).toMatchObject({ replayed: false, completed: true });
    expect(writing.beats).toEqual([]);
    expect(stepping.beats).toEqual([]);
  } finally {
    await pool.end();
  }
});

it("beats at each interval of work that lasts, with the lease's expiry, and not as it starts", async () => {
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const held = await rms.reserve({ intent, sessionId: 'holder', leaseMs: timings.leaseMs });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${held.status}`);
  const pool = createPool(config.db);
  const activities = createSagaActivities({ rms, pool, timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes });
  const { env, beats } = recording(`saga-${randomUUID()}`);
  const hold = (r: Parameters<typeof activities.holdLock>[0]) => activities.holdLock(r);
  const holding = env.run(hold, { type: 'order', intentKey: intent, sessionId: 'holder', fencingToken: held.fencingToken, leaseMs: timings.leaseMs, heartbeatIntervalMs: timings.heartbeatIntervalMs });

  try {
    await eventually(() => Promise.resolve(beats.length), (n) => n >= 3, 'three heartbeats', 5_000);
  } finally {
    env.cancel('CANCELLED');
    await settledWithin(holding, 5_000);
    await rms.release({ intent, sessionId: 'holder', fencingToken: held.fencingToken });
    await pool.end();
  }

  // The first beat one interval in (the lease's first extension, before the work, is no beat).
  expect(beats[0]!.atMs).toBeGreaterThanOrEqual(timings.heartbeatIntervalMs - 1);
  for (const beat of beats) expect(beat.details).toEqual({ expiresAt: expect.any(Number) });
});
