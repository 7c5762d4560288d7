/**
 * The lease a fenced write keeps alive ends with the attempt that keeps it: whatever way the attempt
 * ends (PostgreSQL out of reach before the write, a failed write, a lost lease), no timer goes on
 * extending it. The write activity runs for real (real Redis, real PostgreSQL or an unreachable one)
 * in the SDK's activity test environment, which gives it a Temporal activity context.
 */
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createSagaActivities, type WriteOutcome } from '../../src/activities/saga';
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
