/**
 * Every answer stays true (DESIGN.md invariant 10): a retry of an ended saga's key gets that saga's
 * answer even after another request took the intent, in Redis and after Redis lost its data; and a
 * SUCCESS is not taken back because no worker had picked the saga up yet. Real Redis, PostgreSQL,
 * Temporal dev server and payment provider; workers run only where a test lets them.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { ActivityInterceptorsFactory, WorkerOptions } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StartedSaga } from '../../src/client';
import type { SagaDefinition } from '../../src/sagas';
import { intentKeys } from '../../src/rms';
import { eventually, order, startHarness, withWorker as runWorker, type SagaHarness } from '../helpers/saga-harness';
import { DECLINED_CARD, ordersTable, sagaTypesFor } from '../fixtures/orders';
import { entityOwnerOf, markEntityExists } from '../../src/gate';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('answers', { worker: false });
});
afterAll(async () => {
  await h?.stop();
});

/** A worker of the order types, until `fn` resolves. */
function withWorker<T>(fn: () => Promise<T>): Promise<T> {
  return runWorker({ config: h.config, sagas: sagaTypesFor(h.config, h.providerUrl) }, fn);
}

/**
 * Holds every attempt of the activity `activity` at its start until `release()`: `reached` resolves
 * once one is held. For a worker's `workerOptions`.
 */
function holdActivity(activity: string): { workerOptions: Partial<WorkerOptions>; reached: Promise<void>; release: () => void } {
  let reach!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  const holder: ActivityInterceptorsFactory = (ctx) => ({
    inbound: {
      async execute(input, next) {
        if (ctx.info.activityType === activity) {
          reach();
          await released;
        }
        return next(input);
      },
    },
  });
  return { workerOptions: { interceptors: { activity: [holder] } }, reached, release };
}

/** Redis loses every key of `intent` (a restart, a flush, a failover to a replica that lagged). */
async function wipe(intent: string): Promise<void> {
  const { processing, entityExists, endedSessions } = intentKeys(h.config.redis.keyPrefix, intent);
  await h.redis.del(processing, entityExists, endedSessions);
}

/** The order `cart` of key `key` with a declined card, run to its end: COMPENSATED, its intent freed. */
async function compensated(cart: ReturnType<typeof order>, key: string): Promise<StartedSaga> {
  const first = await h.client.start('order', { ...cart, payment: { card: DECLINED_CARD } }, { idempotencyKey: key });
  expect(first.reservation.status).toBe('SUCCESS');
  expect((await withWorker(() => h.client.result(first.workflowId))).outcome).toBe('COMPENSATED');
  return first;
}

/** The same cart under another key with a good card, run to its end: the entity now exists. */
async function createdByAnother(cart: ReturnType<typeof order>): Promise<StartedSaga> {
  const other = await h.client.start('order', cart, { idempotencyKey: `other-${randomUUID()}` });
  expect(other.reservation.status).toBe('SUCCESS');
  expect((await withWorker(() => h.client.result(other.workflowId))).outcome).toBe('COMPLETED');
  return other;
}

describe('a retry of an ended saga\'s key', () => {
  it('gets its own saga\'s outcome (COMPENSATED), not DUPLICATE, after another request created the entity', async () => {
    const cart = order();
    const key = `declined-${randomUUID()}`;
    const first = await compensated(cart, key);
    await createdByAnother(cart);

    const retry = await h.client.start('order', { ...cart, payment: { card: DECLINED_CARD } }, { idempotencyKey: key });

    expect(retry).toMatchObject({ workflowId: first.workflowId, runId: first.runId, started: true, replayed: true, outcome: 'COMPENSATED', reservation: first.reservation });
    // The other request's answer is untouched: a new key is still a DUPLICATE of that entity.
    expect((await h.client.start('order', cart)).reservation.status).toBe('DUPLICATE');
  });

  it('gets its own saga\'s outcome, not CONFLICT, while another request holds the intent', async () => {
    const cart = order();
    const key = `declined-held-${randomUUID()}`;
    const first = await compensated(cart, key);
    // Another saga has the intent now and waits for a worker (none runs).
    const holder = await h.client.start('order', cart);
    expect(holder.reservation.status).toBe('SUCCESS');

    const retry = await h.client.start('order', { ...cart, payment: { card: DECLINED_CARD } }, { idempotencyKey: key });

    expect(retry).toMatchObject({ workflowId: first.workflowId, replayed: true, outcome: 'COMPENSATED' });
    // The holder's lease is left as it was.
    expect((await h.rms.inspect(holder.intentKey)).holder?.sessionId).not.toBeUndefined();
    await h.client.temporal.workflow.getHandle(holder.workflowId).terminate('test over');
  });

  it('gets its own saga\'s outcome after Redis lost every key of the intent, whichever request comes first', async () => {
    const cart = order();
    const key = `declined-wiped-${randomUUID()}`;
    const first = await compensated(cart, key);
    const other = await createdByAnother(cart);

    // The retry is the first request after the loss: the truth check finds it was the key of an ended saga.
    await wipe(first.intentKey);
    const retry = await h.client.start('order', { ...cart, payment: { card: DECLINED_CARD } }, { idempotencyKey: key });
    expect(retry).toMatchObject({ workflowId: first.workflowId, replayed: true, outcome: 'COMPENSATED' });

    // Another request comes first after the loss: it is answered DUPLICATE and repairs Redis, and the
    // retry that follows is answered from its saga by Redis alone.
    await wipe(first.intentKey);
    expect((await h.client.start('order', cart)).reservation.status).toBe('DUPLICATE');
    expect(await h.redis.exists(intentKeys(h.config.redis.keyPrefix, first.intentKey).endedSessions)).toBe(1);
    const again = await h.client.start('order', { ...cart, payment: { card: DECLINED_CARD } }, { idempotencyKey: key });
    expect(again).toMatchObject({ workflowId: first.workflowId, replayed: true, outcome: 'COMPENSATED' });
    // And the creating request's own retry still gets its own answer.
    expect(await h.client.start('order', cart, { idempotencyKey: other.idempotencyKey })).toMatchObject({ workflowId: other.workflowId, replayed: true, outcome: 'COMPLETED' });
  });

  it('gets its own saga\'s outcome after Redis lost its data and a late finalise marked the other entity', async () => {
    const cart = order();
    const key = `declined-late-finalise-${randomUUID()}`;
    const first = await compensated(cart, key);
    const other = await createdByAnother(cart);
    await wipe(first.intentKey);
    // What the other saga's finalise does when it finds its lease gone (LOST): the marker repaired from its row.
    const row = await ordersTable.find(h.pool, first.intentKey);
    await markEntityExists(h, ordersTable, first.intentKey, entityOwnerOf(row!));

    const retry = await h.client.start('order', { ...cart, payment: { card: DECLINED_CARD } }, { idempotencyKey: key });

    expect(retry).toMatchObject({ workflowId: first.workflowId, replayed: true, outcome: 'COMPENSATED' });
    expect(await h.client.start('order', cart, { idempotencyKey: other.idempotencyKey })).toMatchObject({ replayed: true, outcome: 'COMPLETED' });
  });

  it('of an operation gets its own outcome while another operation holds the entity\'s lock', async () => {
    const created = await h.client.start('order', order());
    const entityId = (await withWorker(() => h.client.result(created.workflowId))).entityId!;
    const key = `amend-declined-${randomUUID()}`;
    const amend = { order: entityId, items: [{ sku: 'widget', quantity: 3 }], payment: { card: DECLINED_CARD } };
    const declined = await h.client.start('order-amend', amend, { idempotencyKey: key });
    expect((await withWorker(() => h.client.result(declined.workflowId))).outcome).toBe('COMPENSATED');
    // Another operation of the same owner takes the entity's lock and waits for a worker.
    const cancel = await h.client.start('order-cancel', { order: entityId });
    expect(cancel.reservation.status).toBe('SUCCESS');

    const retry = await h.client.start('order-amend', amend, { idempotencyKey: key });

    expect(retry).toMatchObject({ workflowId: declined.workflowId, replayed: true, outcome: 'COMPENSATED' });
    await h.client.temporal.workflow.getHandle(cancel.workflowId).terminate('test over');
  });
});

describe('a saga whose write finds another saga\'s entity in PostgreSQL', () => {
  it('ends REJECTED, wrote and undid nothing, and leaves its key to a new attempt', async () => {
    const cart = order();
    const def = h.types.order as SagaDefinition;
    const intent = h.client.prepare('order', cart).intentKey;
    // Another saga's row, written and about to be registered (its finalise under way), older than ours.
    const held = await h.rms.reserve({ intent, sessionId: 'another-saga', leaseMs: 60_000 });
    if (held.status !== 'SUCCESS') throw new Error(`could not arrange the other saga: ${held.status}`);
    await def.table.writeFenced(h.pool, { intentKey: intent, sessionId: 'another-saga', fencingToken: held.fencingToken, data: def.row(def.schema.parse(cart), { sagaKey: 'another-saga' }), createdBy: 'app' });
    await h.rms.release({ intent, sessionId: 'another-saga', fencingToken: held.fencingToken });
    const registering = await h.pool.connect();
    try {
      await registering.query('BEGIN');
      expect(await def.table.markRegistered(registering, { intentKey: intent, fencingToken: held.fencingToken })).toEqual({ status: 'OK' });
      // The gate and the saga's confirmation see the row PROCESSING (not yet committed REGISTERED).
      const first = await h.client.start('order', cart);
      expect(first.reservation.status).toBe('SUCCESS');

      const final = await withWorker(async () => {
        // The saga's write waits on the other saga's row, which is then registered.
        await eventually(
          () => h.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO \"orders\"%'"),
          (r) => r.rows[0]!.n > 0,
          'the write to wait on the row',
        );
        await registering.query('COMMIT');
        return h.client.result(first.workflowId);
      });

      expect(final).toMatchObject({ outcome: 'REJECTED', reason: 'DUPLICATE', stepsDone: [], compensationsRun: [] });
      expect(await ordersTable.find(h.pool, intent)).toMatchObject({ status: 'REGISTERED', lastFencingToken: held.fencingToken });
      // A REJECTED saga holds no answer: its key is a new attempt, told DUPLICATE now.
      expect(await h.client.start('order', cart, { idempotencyKey: first.idempotencyKey })).toMatchObject({ reservation: { status: 'DUPLICATE' }, started: false });
    } finally {
      await registering.query('ROLLBACK').catch(() => undefined);
      registering.release();
    }
  });
});

describe('a running saga whose write lost its lease to another request', () => {
  it('answers a retry of its key from the saga, not CONFLICT, while it compensates', async () => {
    // The saga's compensation waits here until the retry was answered: the window in which its key
    // used to be answered CONFLICT from the other request's lease (a fault run found it, with a
    // worker killed mid-write and the compensation's worker gone too).
    const undo = holdActivity('undoEntity');
    const cart = order({ simulate: { writeDelayMs: 4000 } });
    const key = `lease-lost-${randomUUID()}`;
    await runWorker({ config: h.config, sagas: sagaTypesFor(h.config, h.providerUrl), workerOptions: undo.workerOptions }, async () => {
      // On every path: the worker stops only once the held compensation has run.
      try {
        const first = await h.client.start('order', cart, { idempotencyKey: key });
        expect(first.reservation.status).toBe('SUCCESS');
        await eventually(() => h.rms.inspect(first.intentKey), (i) => i.holder !== undefined && i.holder.remainingMs <= h.config.saga.leaseMs, 'the write to hold its own lease');
        // The write's lease is gone (as when its worker stops past it), and another request takes the intent.
        await h.redis.del(intentKeys(h.config.redis.keyPrefix, first.intentKey).processing);
        const other = await h.client.start('order', cart, { idempotencyKey: `other-${randomUUID()}` });
        expect(other.reservation.status).toBe('SUCCESS');
        await undo.reached;

        const retry = await h.client.start('order', cart, { idempotencyKey: key });

        expect(retry).toMatchObject({ workflowId: first.workflowId, runId: first.runId, started: true, replayed: true, reservation: first.reservation });
        expect(retry.outcome).toBeUndefined();
        undo.release();
        expect(await h.client.result(first.workflowId)).toMatchObject({ outcome: 'COMPENSATED', reason: 'LEASE_LOST' });
        expect((await h.client.result(other.workflowId)).outcome).toBe('COMPLETED');
        expect(await h.client.start('order', cart, { idempotencyKey: key })).toMatchObject({ runId: first.runId, replayed: true, outcome: 'COMPENSATED' });
      } finally {
        undo.release();
      }
    });
  });
});

describe('a SUCCESS answered while no worker runs', () => {
  // A short lease, as a fleet tuned for fast take-over has: what the gate held for it used to lapse
  // while every worker was down.
  const SHORT = { leaseMs: 1500, heartbeatIntervalMs: 250, heartbeatTimeoutMs: 1000 };

  it('keeps its intent past the saga\'s lease until a worker picks it up: another request gets CONFLICT, and the saga completes', async () => {
    const client = h.newClient(SHORT);
    const cart = order();
    const first = await client.start('order', cart);
    expect(first.reservation.status).toBe('SUCCESS');
    // Every worker stays down for longer than the lease (the fault this guards against).
    await delay(SHORT.leaseMs * 2);

    const second = await client.start('order', cart);

    expect(second).toMatchObject({ reservation: { status: 'CONFLICT' }, started: false });
    // Told to come back within a lease, not when the pickup lease ends.
    expect(second.reservation.status === 'CONFLICT' && second.reservation.retryAfterMs).toBeLessThanOrEqual(SHORT.leaseMs);
    const final = await withWorker(() => client.result(first.workflowId));
    expect(final).toMatchObject({ outcome: 'COMPLETED', fencingToken: first.reservation.status === 'SUCCESS' ? first.reservation.fencingToken : '' });
    expect(final.errors).toEqual([]);
    expect((await client.start('order', cart)).reservation.status).toBe('DUPLICATE');
  });

  it('refuses a pickup lease shorter than the saga\'s lease', () => {
    expect(() => h.newClient({}, { pickupLeaseMs: h.config.saga.leaseMs - 1 })).toThrow(/pickupLeaseMs: must be a whole number of milliseconds from timings\.leaseMs/);
  });
});
