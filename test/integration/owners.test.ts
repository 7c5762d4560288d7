/**
 * Owners are exact (DESIGN.md invariant 12): a caller reaches only what it owns. A row with no owner
 * and an entity named by its bare row id are found only where their table opts in; a plain start
 * without an owner runs for the default owner; a non-owner's request for an entity takes no lease
 * (so it cannot make the owner's request CONFLICT); and a SagaClient's owner scopes every read and
 * signal without being passed again. Real Redis, PostgreSQL, Temporal dev server and payment provider.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineSagaTypes, fencedTable } from '../../src/sagas';
import { RESERVATION_SAGA_WORKFLOW } from '../../src/shared';
import { eventually, order, rowIdOf, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { sagaTypesFor } from '../fixtures/orders';

/** The orders table as a deployment that still has rows and ids of earlier versions declares it. */
const legacyOrders = fencedTable('orders', ['customer', 'items', 'amount_cents', 'payment_key'], { legacy: { ownerlessRows: true, numericIds: true } });

let h: SagaHarness;
beforeAll(async () => {
  // `order-cancel-legacy`: order-cancel on the opted-in table (the same rows, the same lock).
  h = await startHarness('owners', {
    sagaTypes: (config, providerUrl) => {
      const types = sagaTypesFor(config, providerUrl);
      return defineSagaTypes(...Object.values(types), { ...types['order-cancel']!, type: 'order-cancel-legacy', table: legacyOrders });
    },
  });
});
afterAll(async () => {
  await h?.stop();
});

/** A completed order of the client's owner (`app`); its entity id. */
async function completedOrder(): Promise<string> {
  const started = await h.client.start('order', order());
  const final = await h.client.result(started.workflowId);
  expect(final.outcome).toBe('COMPLETED');
  return final.entityId!;
}

/** The lock key of the order `id`. */
function lockOf(id: string): string {
  return h.client.prepare('order-cancel', { order: id }).intentKey;
}

describe('an order from before owners (created_by empty)', () => {
  it('is no one\'s where its table does not opt in: NOT_FOUND to every owner, holding nothing', async () => {
    const id = await completedOrder();
    await h.pool.query("UPDATE orders SET created_by = '' WHERE id = $1", [rowIdOf(id)]);

    for (const owner of ['app', 'someone-else']) {
      await expect(h.client.start('order-cancel', { order: id }, { owner })).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });
    }
    expect((await h.rms.inspect(lockOf(id))).holder).toBeUndefined();
  });

  it('is open to every owner where its table opts in (legacy.ownerlessRows)', async () => {
    const id = await completedOrder();
    await h.pool.query("UPDATE orders SET created_by = '' WHERE id = $1", [rowIdOf(id)]);

    const cancel = await h.client.start('order-cancel-legacy', { order: id }, { owner: 'someone-else' });

    expect((await h.client.result(cancel.workflowId)).outcome).toBe('COMPLETED');
  });

  it('is its owner\'s again once the documented migration gives it one', async () => {
    const id = await completedOrder();
    await h.pool.query("UPDATE orders SET created_by = '' WHERE id = $1", [rowIdOf(id)]);

    // The statement of docs/operations.md, kept to this test's row (other files share the table).
    await h.pool.query("UPDATE orders SET created_by = $1 WHERE created_by = '' AND id = $2", ['app', rowIdOf(id)]);

    await expect(h.client.start('order-cancel', { order: id }, { owner: 'someone-else' })).rejects.toMatchObject({ code: 'ENTITY_NOT_FOUND' });
    const own = await h.client.start('order-cancel', { order: id });
    expect((await h.client.result(own.workflowId)).outcome).toBe('COMPLETED');
  });
});

describe('an order named by its bare row id (ids of earlier versions)', () => {
  it('is NOT_FOUND where its table does not opt in, even to its owner, before any gate', async () => {
    const id = await completedOrder();

    await expect(h.client.start('order-cancel', { order: rowIdOf(id) })).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND', message: expect.stringContaining(rowIdOf(id)) });
    expect((await h.rms.inspect(lockOf(id))).holder).toBeUndefined();
  });

  it('names the order for its owner where its table opts in (legacy.numericIds), answered with the new id', async () => {
    const id = await completedOrder();

    const cancel = await h.client.start('order-cancel-legacy', { order: rowIdOf(id) });

    expect(await h.client.result(cancel.workflowId)).toMatchObject({ outcome: 'COMPLETED', entityId: id });
    await expect(h.client.start('order-cancel-legacy', { order: rowIdOf(id) }, { owner: 'someone-else' })).rejects.toMatchObject({ code: 'ENTITY_NOT_FOUND' });
  });
});

describe('a plain Temporal start that names no owner', () => {
  it('runs for the default owner: its order is `app`\'s, not open to every owner', async () => {
    const key = `plain-${randomUUID()}`;
    const workflowId = `order-${key}`;
    await h.client.temporal.workflow.start(RESERVATION_SAGA_WORKFLOW, { workflowId, taskQueue: h.config.temporal.taskQueue, args: [{ type: 'order', idempotencyKey: key, data: order() }] });
    const final = await h.client.result(workflowId);
    expect(final.outcome).toBe('COMPLETED');

    const { rows } = await h.pool.query<{ created_by: string }>('SELECT created_by FROM orders WHERE id = $1', [rowIdOf(final.entityId!)]);
    expect(rows).toEqual([{ created_by: 'app' }]);
    await expect(h.client.start('order-cancel', { order: final.entityId! }, { owner: 'someone-else' })).rejects.toMatchObject({ code: 'ENTITY_NOT_FOUND' });
  });
});

describe('a non-owner hammering an order\'s id', () => {
  it('takes no lease, and never makes its owner\'s cancel answer CONFLICT', async () => {
    const id = await completedOrder();
    const lock = lockOf(id);
    // The orders table locked: every lookup of the row waits, so whatever a request holds before its
    // lookup, it holds until the table is let go.
    const locker = await h.pool.connect();
    // Its own connection: the requests below may take every other one the pool has.
    const probe = await h.pool.connect();
    let hammering: Promise<unknown[]> | undefined;
    let own: Promise<Awaited<ReturnType<typeof h.client.start>>> | undefined;
    let heldMeanwhile: unknown;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE orders IN ACCESS EXCLUSIVE MODE');
      const [{ pid }] = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      hammering = Promise.all(
        Array.from({ length: 50 }, () =>
          h.client.start('order-cancel', { order: id }, { owner: 'intruder' }).then(
            (answer) => answer.reservation.status,
            (err: { code?: string }) => err.code,
          ),
        ),
      );
      await eventually(
        async () => (await probe.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])).rows[0]!.n,
        (n) => n > 0,
        'the intruder\'s requests to wait for the order\'s row',
      );
      heldMeanwhile = (await h.rms.inspect(lock)).holder;
      own = h.client.start('order-cancel', { order: id });
    } finally {
      await locker.query('COMMIT').catch(() => undefined);
      locker.release();
      probe.release();
    }

    const answer = await own;
    expect(answer.reservation.status).toBe('SUCCESS');
    expect(heldMeanwhile).toBeUndefined();
    expect(new Set(await hammering)).toEqual(new Set(['ENTITY_NOT_FOUND']));
    expect((await h.client.result(answer.workflowId)).outcome).toBe('COMPLETED');
    expect((await h.rms.inspect(lock)).holder).toBeUndefined();
  });
});

describe('a SagaClient\'s owner', () => {
  it('scopes status, result, cancel, redrive and list without being passed on each call', async () => {
    const teamX = h.newClient({}, { owner: 'team-x' });
    const running = await h.client.start('order', order({ simulate: { stepDelayMs: 5000 } }));
    const own = await teamX.start('order', order());
    await teamX.result(own.workflowId);

    await expect(teamX.status(running.workflowId)).rejects.toBeInstanceOf(WorkflowNotFoundError);
    await expect(teamX.result(running.workflowId)).rejects.toBeInstanceOf(WorkflowNotFoundError);
    await expect(teamX.redrive(running.workflowId)).rejects.toBeInstanceOf(WorkflowNotFoundError);
    await expect(teamX.cancel(running.workflowId)).rejects.toBeInstanceOf(WorkflowNotFoundError);
    await eventually(() => h.client.list({ owner: 'team-x' }), (found) => found.some((s) => s.workflowId === own.workflowId), 'team-x\'s saga to be listed');
    const listed = (await teamX.list()).map((s) => s.workflowId);
    expect(listed).toContain(own.workflowId);
    expect(listed).not.toContain(running.workflowId);

    // Its own sagas it reaches as ever, and the other owner's saga ran on untouched.
    expect((await teamX.status(own.workflowId)).state.outcome).toBe('COMPLETED');
    expect((await h.newClient().result(running.workflowId)).outcome).toBe('COMPLETED');
  });

  it('is not the operator\'s: an operator client reaches every owner\'s saga, and a call may still name one', async () => {
    const operator = h.newClient({}, { operator: true });
    const theirs = await h.newClient({}, { owner: 'team-y' }).start('order', order());

    expect((await operator.result(theirs.workflowId)).outcome).toBe('COMPLETED');
    expect((await operator.status(theirs.workflowId)).state.outcome).toBe('COMPLETED');
    await expect(operator.status(theirs.workflowId, { owner: 'app' })).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});


describe('a DUPLICATE asked to find the existing entity (findExisting)', () => {
  it('names the entity to its owner, and nothing to another owner or when not asked', async () => {
    const cart = order();
    const first = await h.client.start('order', cart);
    const { entityId } = await h.client.result(first.workflowId);

    const mine = await h.client.start('order', cart, { findExisting: true });
    const notAsked = await h.client.start('order', cart);
    const theirs = await h.client.start('order', cart, { findExisting: true, owner: 'someone-else' });

    expect(mine).toMatchObject({ reservation: { status: 'DUPLICATE' }, started: false, entityId });
    for (const other of [notAsked, theirs]) {
      expect(other.reservation.status).toBe('DUPLICATE');
      expect(other).not.toHaveProperty('entityId');
    }
    // The id names the entity its operations take.
    const cancel = await h.client.start('order-cancel', { order: mine.entityId! });
    expect((await h.client.result(cancel.workflowId)).outcome).toBe('COMPLETED');
  });

  it('names nothing once the entity is released: the intent is free again', async () => {
    const cart = order();
    const first = await h.client.start('order', cart);
    const { entityId } = await h.client.result(first.workflowId);
    const returned = await h.client.start('order-return', { order: entityId! });
    expect((await h.client.result(returned.workflowId)).outcome).toBe('COMPLETED');

    const again = await h.client.start('order', cart, { findExisting: true });

    expect(again.reservation.status).toBe('SUCCESS');
    expect(again).not.toHaveProperty('entityId');
    expect((await h.client.result(again.workflowId)).outcome).toBe('COMPLETED');
  });
});
