/**
 * A heartbeat is a write on the Temporal server: it persists the activity's progress in the
 * workflow's state (on the dev server, one UpdateWorkflowExecution each). So the saga's activities
 * beat at their interval only, never as they start: a write or a step that ends within one interval
 * costs the server none, and work that lasts beats at each interval with its lease's expiry. The
 * activities run for real (real Redis, real PostgreSQL) in the SDK's activity test environment, which
 * reports each heartbeat.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createSagaActivities, type OperationStepResult, type StepRequest, type WriteOutcome } from '../../src/activities/saga';
import { createPool } from '../../src/db/pool';
import { Rms, createRedis, intentKey } from '../../src/rms';

import { testConfig } from '../helpers/context';
import { eventually, order, settledWithin } from '../helpers/saga-harness';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { orderSaga, sagaTypes } from '../fixtures/orders';

const config = testConfig('heartbeats');
// An interval far longer than a write or a step takes here.
const timings = { leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000, compensationAttempts: 1 };
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

/** An activity environment of saga `sagaKey` that records every heartbeat: when (ms after `since`) and with what. */
function recording(sagaKey: string) {
  const env = new MockActivityEnvironment({ workflowExecution: { workflowId: sagaKey, runId: randomUUID() } });
  const beats: { atMs: number; details: unknown }[] = [];
  const since = performance.now();
  env.on('heartbeat', (details: unknown) => beats.push({ atMs: performance.now() - since, details }));
  return { env, beats };
}

/** The lease of a new `order` intent, held by a session of its own. */
async function held(leaseMs: number) {
  const intent = intentKey(orderSaga.scope, { test: randomUUID() }, TEST_INTENT_SECRET);
  const sessionId = `session-${randomUUID()}`;
  const lease = await rms.reserve({ intent, sessionId, leaseMs });
  if (lease.status !== 'SUCCESS') throw new Error(`could not arrange the lease: ${lease.status}`);
  return { type: 'order', intentKey: intent, sessionId, fencingToken: lease.fencingToken };
}

it('sends no heartbeat for a fenced write or a step that ends within one interval', async () => {
  const owner = await held(timings.leaseMs);
  const input = orderSaga.schema.parse(order());
  const sagaKey = `saga-${randomUUID()}`;
  const writing = recording(sagaKey);
  const write = (r: Parameters<typeof activities.writeEntity>[0]) => activities.writeEntity(r);
  const written = await writing.env.run<Parameters<typeof write>, WriteOutcome, typeof write>(write, { ...owner, payload: input, timings, register: true });
  if (written.status !== 'WRITTEN') throw new Error(`the write did not write: ${written.status}`);
  const stepping = recording(sagaKey);
  const step = (r: StepRequest) => activities.runStep(r);
  const request: StepRequest = { ...owner, name: 'reserveStock', sagaKey, payload: input, created: { entityId: written.entityId, results: {} }, completes: true };

  const done = await stepping.env.run<[StepRequest], OperationStepResult, typeof step>(step, request);

  expect(done).toMatchObject({ replayed: false, completed: true });
  expect(writing.beats).toEqual([]);
  expect(stepping.beats).toEqual([]);
});

it("beats at each interval of work that lasts, with the lease's expiry, and not as it starts", async () => {
  const leaseMs = 600;
  const intervalMs = 100;
  const owner = await held(leaseMs);
  const { env, beats } = recording(`saga-${randomUUID()}`);
  const hold = (r: Parameters<typeof activities.holdLock>[0]) => activities.holdLock(r);
  const holding = env.run(hold, { ...owner, leaseMs, heartbeatIntervalMs: intervalMs });

  try {
    await eventually(() => Promise.resolve(beats.length), (n) => n >= 3, 'three heartbeats', 5_000);
  } finally {
    env.cancel('CANCELLED');
    await settledWithin(holding, 5_000);
    await rms.release({ intent: owner.intentKey, sessionId: owner.sessionId, fencingToken: owner.fencingToken });
  }

  // The first beat one interval in (the lease's first extension, before the work, is no beat).
  expect(beats[0]!.atMs).toBeGreaterThanOrEqual(intervalMs - 1);
  for (const beat of beats) expect(beat.details).toEqual({ expiresAt: expect.any(Number) });
});
