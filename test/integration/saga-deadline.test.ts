/**
 * Saga deadlines (a type's `deadlineMs`, a start's within it) against the real Temporal dev server,
 * Redis, PostgreSQL and the payment provider over HTTP. Each test runs the worker only while it
 * needs one, so a saga can be made to wait for its worker past its deadline.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineSagaTypes, type SagaTypes } from '../../src/sagas';
import { eventually, order, rowIdOf, startHarness, withWorker as runWorker, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, sagaTypesFor } from '../fixtures/orders';

const CARD = '4242424242424242';

/** The order types, and the order saga and order-amend under deadlines of their own. */
function typesWithDeadlines(config: Parameters<typeof sagaTypesFor>[0], providerUrl: string): SagaTypes {
  const types = sagaTypesFor(config, providerUrl);
  return defineSagaTypes(...Object.values(types), { ...types.order!, type: 'order-timed', deadlineMs: 60_000 }, { ...types['order-amend']!, type: 'order-amend-timed', deadlineMs: 60_000 });
}

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga deadline', { worker: false, sagaTypes: typesWithDeadlines });
});
afterAll(async () => {
  await h?.stop();
});

/** A worker of the harness's types, until `fn` resolves. */
function withWorker<T>(fn: () => Promise<T>): Promise<T> {
  return runWorker({ config: h.config, sagas: h.types }, fn);
}

async function liveCharges(reference: string) {
  return (await h.chargesOf(reference)).filter((c) => c.status === 'succeeded' && !c.refunded);
}

describe('a saga deadline', () => {
  it('stops a saga from taking a step past it: the running step ends, what was done is undone, and it ends EXPIRED for every retry', async () => {
    // The charge step takes 4 s; the deadline passes while it runs.
    const cart = order({ simulate: { stepDelayMs: 4000 } });
    const started = await h.client.start('order-timed', cart, { deadlineMs: 3000 });

    const final = await withWorker(() => h.client.result(started.workflowId));

    expect(final).toMatchObject({ outcome: 'EXPIRED', reason: 'DEADLINE_EXCEEDED', stepsDone: ['chargePayment'], compensationsRun: ['refundPayment', 'undoEntity'] });
    expect(final.errors).toContainEqual(expect.objectContaining({ type: 'DEADLINE_EXCEEDED', message: expect.stringContaining('before step reserveStock') }));
    expect((await ordersTable.findById(h.pool, rowIdOf(final.entityId!)))?.status).toBe('COMPENSATED');
    expect(await liveCharges(started.workflowId)).toEqual([]);
    expect(await h.rms.inspect(started.intentKey)).toMatchObject({ exists: false });
    // Its key answers EXPIRED from now on (the intent itself is free: the order may be placed again).
    const retry = await h.client.start('order-timed', cart, { idempotencyKey: started.idempotencyKey });
    expect(retry).toMatchObject({ workflowId: started.workflowId, started: true, outcome: 'EXPIRED' });
  });

  it('that passed before the fenced write ends the saga EXPIRED having written nothing, its reservation given back', async () => {
    const cart = order();
    const started = await h.client.start('order-timed', cart, { deadlineMs: 200 });
    expect(started.reservation.status).toBe('SUCCESS');
    // No worker until the deadline has passed.
    await delay(500);

    const final = await withWorker(() => h.client.result(started.workflowId));

    expect(final).toMatchObject({ outcome: 'EXPIRED', reason: 'DEADLINE_EXCEEDED', stepsDone: [], compensationsRun: [] });
    expect(final.entityId).toBeUndefined();
    expect(await ordersTable.find(h.pool, started.intentKey)).toBeUndefined();
    expect(await h.chargesOf(started.workflowId)).toEqual([]);
    expect(await h.rms.inspect(started.intentKey)).toEqual({ intent: started.intentKey, exists: false });
    expect(await h.client.start('order-timed', cart, { idempotencyKey: started.idempotencyKey })).toMatchObject({ started: true, outcome: 'EXPIRED' });
  });

  it('ends an operation past it EXPIRED, the entity as it was and its lock given back', async () => {
    const created = await withWorker(async () => h.client.result((await h.client.start('order', order())).workflowId));
    const before = await ordersTable.findById(h.pool, rowIdOf(created.entityId!));
    const started = await h.client.start(
      'order-amend-timed',
      { order: created.entityId, items: [{ sku: 'widget', quantity: 5 }], payment: { card: CARD }, simulate: { stepDelayMs: 4000 } },
      { deadlineMs: 3000 },
    );

    const final = await withWorker(() => h.client.result(started.workflowId));

    // The charge step (4 s) was running at the deadline: it ended, and its charge was refunded.
    expect(final).toMatchObject({ outcome: 'EXPIRED', reason: 'DEADLINE_EXCEEDED', entityId: created.entityId, stepsDone: ['priceAmendment', 'chargeAmendedOrder'], compensationsRun: ['refundAmendedCharge'] });
    expect((await ordersTable.findById(h.pool, rowIdOf(created.entityId!)))?.data).toEqual(before?.data);
    expect(await liveCharges(started.workflowId)).toEqual([]);
    expect((await h.rms.inspect(started.intentKey)).holder).toBeUndefined();
  });

  it('of a start is at most its type\'s: a longer one, or one that is no whole number of ms, is refused before the gate', async () => {
    const cart = order();
    for (const deadlineMs of [60_001, 0, 1.5]) {
      await expect(h.client.start('order-timed', cart, { deadlineMs })).rejects.toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
    }
    expect(await h.rms.inspect(h.client.prepare('order-timed', cart).intentKey)).toEqual({ intent: h.client.prepare('order-timed', cart).intentKey, exists: false });
    // A type without a deadline takes a start's.
    expect(h.client.prepare('order', cart).deadlineMs).toBeUndefined();
    expect(h.client.prepare('order-timed', cart).deadlineMs).toBe(60_000);
  });

  it('is recorded as the EXPIRED outcome, where list finds it', async () => {
    const started = await h.client.start('order-timed', order(), { deadlineMs: 1, idempotencyKey: `expired-${randomUUID()}` });
    await delay(50);
    await withWorker(() => h.client.result(started.workflowId));

    // Visibility follows the saga's end a moment later.
    const listed = await eventually(() => h.client.list({ type: 'order-timed', outcome: 'EXPIRED' }), (found) => found.some((s) => s.workflowId === started.workflowId), 'the saga to be listed EXPIRED');
    expect(listed.find((s) => s.workflowId === started.workflowId)).toMatchObject({ phase: 'EXPIRED', outcome: 'EXPIRED' });
  });
});
