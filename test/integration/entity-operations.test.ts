/**
 * Operations on an existing order (order-cancel, order-amend) under the order's fenced lock, with the
 * real Temporal dev server, Redis, PostgreSQL and the payment provider over HTTP.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { StartedSaga } from '../../src/client';
import type { SagaState } from '../../src/shared';
import { killWorkerProcesses, startWorkerProcess } from '../helpers/processes';
import { eventually, order, rowIdOf, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { defineSagaTypes, encodeEntityId } from '../../src/sagas';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { ordersTable, REFUND_REFUSED_CARD, sagaTypesFor } from '../fixtures/orders';

const CARD = '4242424242424242';
const DECLINED = '4000000000000002';

let h: SagaHarness;
beforeAll(async () => {
  // And `order-unattended`: the order saga ending COMPENSATION_FAILED at once, without waiting for a redrive.
  h = await startHarness('entity operations', {
    sagaTypes: (config, providerUrl) => {
      const types = sagaTypesFor(config, providerUrl);
      return defineSagaTypes(...Object.values(types), { ...types.order!, type: 'order-unattended', compensation: { ...types.order!.compensation, attentionMs: 0 } });
    },
  });
});
afterAll(async () => {
  await h?.stop();
});

/** Two SKUs of this test's own, with `stock` units each. */
async function ownSkus(stock = 1000): Promise<[string, string]> {
  const tag = randomUUID().slice(0, 8);
  const skus: [string, string] = [`op-${tag}-a`, `op-${tag}-b`];
  for (const sku of skus) await h.pool.query('INSERT INTO stock (sku, available) VALUES ($1, $2)', [sku, stock]);
  return skus;
}

async function stockOf(skus: readonly string[]): Promise<number[]> {
  const { rows } = await h.pool.query<{ sku: string; available: string }>('SELECT sku, available FROM stock WHERE sku = ANY($1)', [skus]);
  return skus.map((sku) => Number(rows.find((r) => r.sku === sku)!.available));
}

interface OrderRow {
  items: { sku: string; quantity: number; priceCents: number }[];
  amount_cents: string;
  payment_key: string;
  cancelled_at: Date | null;
  cancelled_by: string | null;
  last_operation_token: string | null;
}

/** The row of the order a caller knows as `id`. */
async function rowOf(id: string): Promise<OrderRow> {
  const { rows } = await h.pool.query<OrderRow>(
    'SELECT items, amount_cents, payment_key, cancelled_at, cancelled_by, last_operation_token::text FROM orders WHERE id = $1',
    [rowIdOf(id)],
  );
  return rows[0]!;
}

/** A completed order of `a` × 2 at 1250 and `b` × 1 at 4999 on SKUs of its own; its id and creating saga. */
async function completedOrder(skus: readonly [string, string], quantities: [number, number] = [2, 1]): Promise<{ id: string; sagaKey: string }> {
  const started = await h.client.start(
    'order',
    order({
      items: [
        { sku: skus[0], quantity: quantities[0], priceCents: 1250 },
        { sku: skus[1], quantity: quantities[1], priceCents: 4999 },
      ],
    }),
  );
  const final = await h.client.result(started.workflowId);
  expect(final.outcome).toBe('COMPLETED');
  return { id: final.entityId!, sagaKey: started.workflowId };
}

/** The provider's charges that are live (succeeded, not refunded), among those made with `references`. */
async function liveCharges(references: readonly string[]) {
  const all = (await Promise.all(references.map((r) => h.chargesOf(r)))).flat();
  return all.filter((c) => c.status === 'succeeded' && !c.refunded);
}

async function lockHolder(started: StartedSaga) {
  return (await h.rms.inspect(started.intentKey)).holder;
}

describe('order-cancel', () => {
  it('releases the stock, marks the order cancelled and refunds its charge, then gives the lock back', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    expect(await stockOf(skus)).toEqual([998, 999]);

    const started = await h.client.start('order-cancel', { order: created.id });
    expect(started.reservation.status).toBe('SUCCESS');
    expect(started.intentKey).toMatch(/^order-lock:/);
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPLETED', entityId: created.id, stepsDone: ['cancelOrder', 'refundOrder'] });
    expect(await rowOf(created.id)).toMatchObject({ cancelled_at: expect.any(Date), cancelled_by: started.workflowId, last_operation_token: final.fencingToken });
    expect(await stockOf(skus)).toEqual([1000, 1000]);
    expect(await h.chargesOf(created.sagaKey)).toMatchObject([{ status: 'succeeded', refunded: true, amount_cents: 2 * 1250 + 4999 }]);
    expect(await lockHolder(started)).toBeUndefined();
    // The order row still holds its intent: the same cart again is a duplicate.
    expect((await ordersTable.findById(h.pool, rowIdOf(created.id)))?.status).toBe('COMPLETED');
  });

  it('refuses a second cancellation, leaving the first one as it was', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const first = await h.client.start('order-cancel', { order: created.id });
    expect((await h.client.result(first.workflowId)).outcome).toBe('COMPLETED');

    const second = await h.client.start('order-cancel', { order: created.id });
    const final = await h.client.result(second.workflowId);
    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: [] });
    expect(final.errors[0]?.message).toContain('ORDER_CANCELLED');
    // Its compensation undid nothing of the first cancellation.
    expect(await rowOf(created.id)).toMatchObject({ cancelled_by: first.workflowId });
    expect(await stockOf(skus)).toEqual([1000, 1000]);
    expect(await lockHolder(second)).toBeUndefined();
  });

  it('answers CONFLICT, starting nothing, while the order\'s creating saga still runs; SUCCESS once it ended', async () => {
    const skus = await ownSkus();
    const creating = await h.client.start('order', order({ items: [{ sku: skus[0], quantity: 1, priceCents: 100 }], simulate: { stepDelayMs: 1500 } }));
    const running = await eventually(() => h.client.status(creating.workflowId), (s) => s.state.entityId !== undefined && s.state.phase === 'RUNNING_STEPS', 'the order to run its steps');

    const early = await h.client.start('order-cancel', { order: running.state.entityId! });
    expect(early).toMatchObject({ started: false, reservation: { status: 'CONFLICT', retryAfterMs: 1000 } });
    expect(await lockHolder(early)).toBeUndefined();

    expect((await h.client.result(creating.workflowId)).outcome).toBe('COMPLETED');
    const later = await h.client.start('order-cancel', { order: running.state.entityId! }, { idempotencyKey: early.idempotencyKey });
    expect(later.reservation.status).toBe('SUCCESS');
    expect((await h.client.result(later.workflowId)).outcome).toBe('COMPLETED');
  });

  it('refuses an order that does not exist with a typed error, holding nothing', async () => {
    // An id as this version hands out, of a row that does not exist.
    const missing = encodeEntityId(TEST_INTENT_SECRET, 'orders', '987654321987');
    await expect(h.client.start('order-cancel', { order: missing })).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });
    const prepared = h.client.prepare('order-cancel', { order: missing });
    expect((await h.rms.inspect(prepared.intentKey)).holder).toBeUndefined();
    await expect(h.client.start('order-cancel', { order: 'one' })).rejects.toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
  });

  it('refuses an id no row can have (past bigint) as a missing order, holding nothing', async () => {
    // 19 digits, as the order app's schema allows, but above PostgreSQL's bigint: no order has it.
    const beyond = '9999999999999999999';

    await expect(h.client.start('order-cancel', { order: beyond })).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });
    // It is refused before the gate: no lock key names it, so none can be held.
    expect(() => h.client.prepare('order-cancel', { order: beyond })).toThrow(expect.objectContaining({ code: 'ENTITY_NOT_FOUND' }));
  });
});

describe('an order\'s id', () => {
  it('is opaque: no row number, nothing to count along, and still the id its operations take', async () => {
    const skus = await ownSkus();
    const [first, second] = [await completedOrder(skus), await completedOrder(skus)];

    for (const { id } of [first, second]) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // The rows underneath are numbered in order; the ids show none of it.
    expect(BigInt(rowIdOf(second.id))).toBeGreaterThan(BigInt(rowIdOf(first.id)));
    // Its bytes do not carry the row number in the clear (a digit of a short row id may occur in it by chance).
    expect(Buffer.from(second.id, 'base64url').readBigUInt64BE(0)).not.toBe(BigInt(rowIdOf(second.id)));
    const cancel = await h.client.start('order-cancel', { order: first.id });
    expect(await h.client.result(cancel.workflowId)).toMatchObject({ outcome: 'COMPLETED', entityId: first.id });
  });

  it('names no order when altered or made up, holding nothing', async () => {
    const created = await completedOrder(await ownSkus());
    const altered = created.id.slice(0, 3) + (created.id[3] === 'A' ? 'B' : 'A') + created.id.slice(4);

    for (const id of [altered, 'A'.repeat(22)]) {
      await expect(h.client.start('order-cancel', { order: id })).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND', message: expect.stringContaining(id) });
    }
    expect(await rowOf(created.id)).toMatchObject({ cancelled_at: null, last_operation_token: null });
  });

  // Ids of earlier versions (the bare row id), taken only where the table opts in: owners.test.ts.
});

describe('an order\'s owner', () => {
  it('is recorded with the order, and another owner\'s operation is answered as one on a missing order, holding nothing', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const { rows } = await h.pool.query<{ created_by: string }>('SELECT created_by FROM orders WHERE id = $1', [rowIdOf(created.id)]);
    expect(rows).toEqual([{ created_by: 'app' }]);

    // One after the other: two at once share the order's lock, and the second would get CONFLICT.
    const attempts = [
      () => h.client.start('order-cancel', { order: created.id }, { owner: 'someone-else' }),
      () => h.client.start('order-amend', { order: created.id, items: [{ sku: skus[0], quantity: 1 }], payment: { card: CARD } }, { owner: 'someone-else' }),
      () => h.client.start('order-cancel', { order: encodeEntityId(TEST_INTENT_SECRET, 'orders', '987654321986') }, { owner: 'someone-else' }),
    ];

    for (const attempt of attempts) await expect(attempt()).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });
    expect((await h.rms.inspect(h.client.prepare('order-cancel', { order: created.id }).intentKey)).holder).toBeUndefined();
    expect(await rowOf(created.id)).toMatchObject({ cancelled_at: null, amount_cents: String(2 * 1250 + 4999) });
    // Its owner's own cancellation goes through.
    const own = await h.client.start('order-cancel', { order: created.id });
    expect((await h.client.result(own.workflowId)).outcome).toBe('COMPLETED');
  });

  it('learns nothing of another owner\'s work on its order: a held lock is CONFLICT to the owner, a missing order to anyone else', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const amending = await h.client.start('order-amend', { order: created.id, items: [{ sku: skus[0], quantity: 3 }], payment: { card: CARD }, simulate: { stepDelayMs: 2000 } });
    await eventually(() => h.client.status(amending.workflowId), (s) => s.state.stepsDone.includes('priceAmendment'), 'the amendment to hold the lock');

    await expect(h.client.start('order-cancel', { order: created.id }, { owner: 'someone-else' })).rejects.toMatchObject({ name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });
    expect(await h.client.start('order-cancel', { order: created.id })).toMatchObject({ started: false, reservation: { status: 'CONFLICT' } });
    expect((await h.client.result(amending.workflowId)).outcome).toBe('COMPLETED');
  });

  // An order from before owners were recorded (created_by empty): owners.test.ts.

  it.each([[''], ['has space'], ['x'.repeat(65)]])('refuses the owner %j with a TypeError, before any gate', async (owner) => {
    await expect(h.client.start('order-cancel', { order: '1' }, { owner })).rejects.toThrow(TypeError);
  });
});

describe('an order whose saga ended COMPENSATION_FAILED', () => {
  /** An order whose stock ran short and whose refund was refused (its type does not wait for a redrive): its row REGISTERED, its intent held. */
  async function stuckOrder() {
    const skus = await ownSkus(1);
    const cart = order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: skus[0], quantity: 5, priceCents: 100 }] });
    const started = await h.client.start('order-unattended', cart);
    const final = await h.client.result(started.workflowId);
    expect(final.outcome).toBe('COMPENSATION_FAILED');
    return { cart, started, entityId: final.entityId! };
  }

  it('answers its operations CONFLICT until an operator settles it; kept, its operations find it', async () => {
    const { started, entityId } = await stuckOrder();
    const stuck = await h.client.start('order-cancel', { order: entityId });
    expect(stuck).toMatchObject({ started: false, reservation: { status: 'CONFLICT' } });

    const settled = await h.client.settle(started.workflowId, 'keep');

    expect(settled).toEqual({ workflowId: started.workflowId, row: 'COMPLETED', intentFreed: false });
    const cancel = await h.client.start('order-cancel', { order: entityId }, { idempotencyKey: stuck.idempotencyKey });
    expect(cancel.reservation.status).toBe('SUCCESS');
    await h.client.result(cancel.workflowId);
  });

  it('undone by the operator, is no order: its operations find none, and the same cart may be ordered again', async () => {
    const { cart, started, entityId } = await stuckOrder();
    expect((await h.client.start('order', cart)).reservation.status).toBe('DUPLICATE');

    const settled = await h.client.settle(started.workflowId, 'undo');

    expect(settled).toEqual({ workflowId: started.workflowId, row: 'COMPENSATED', intentFreed: true });
    expect((await ordersTable.findById(h.pool, rowIdOf(entityId)))?.status).toBe('COMPENSATED');
    await expect(h.client.start('order-cancel', { order: entityId })).rejects.toMatchObject({ code: 'ENTITY_NOT_FOUND' });
    const again = await h.client.start('order-unattended', cart);
    expect(again.reservation.status).toBe('SUCCESS');
    await h.client.result(again.workflowId);
  });

  it('is the only end settle accepts: a completed saga is refused, its row untouched', async () => {
    const created = await completedOrder(await ownSkus());

    await expect(h.client.settle(created.sagaKey, 'undo')).rejects.toMatchObject({ name: 'SettleError', message: expect.stringContaining('not COMPENSATION_FAILED') });
    expect((await ordersTable.findById(h.pool, rowIdOf(created.id)))?.status).toBe('COMPLETED');
  });
});

describe('order-amend', () => {
  it('charges the new total, moves the stock, and refunds the previous charge', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const started = await h.client.start('order-amend', {
      order: created.id,
      items: [
        { sku: skus[0], quantity: 5 },
        { sku: skus[1], quantity: 0 },
      ],
      payment: { card: CARD },
    });
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['priceAmendment', 'chargeAmendedOrder', 'applyAmendment', 'refundPreviousCharge'] });
    expect(await rowOf(created.id)).toMatchObject({
      items: [{ sku: skus[0], quantity: 5, priceCents: 1250 }],
      amount_cents: '6250',
      payment_key: `${started.workflowId}:chargeAmendedOrder`,
      cancelled_at: null,
    });
    expect(await stockOf(skus)).toEqual([995, 1000]);
    expect(await liveCharges([created.sagaKey, started.workflowId])).toMatchObject([{ amount_cents: 6250, reference: started.workflowId }]);
    expect(await lockHolder(started)).toBeUndefined();
  });

  it('leaves the order as it was when the new charge is declined', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const before = await rowOf(created.id);
    const started = await h.client.start('order-amend', { order: created.id, items: [{ sku: skus[0], quantity: 3 }], payment: { card: DECLINED } });
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: ['priceAmendment'] });
    expect(await rowOf(created.id)).toMatchObject({ items: before.items, amount_cents: before.amount_cents, payment_key: before.payment_key });
    expect(await stockOf(skus)).toEqual([998, 999]);
    expect(await liveCharges([created.sagaKey, started.workflowId])).toMatchObject([{ reference: created.sagaKey }]);
    expect(await lockHolder(started)).toBeUndefined();
  });

  it('refuses an amendment that leaves nothing to charge, before any charge, keeping the order', async () => {
    const skus = await ownSkus();
    const created = await h.client.start(
      'order',
      order({
        items: [
          { sku: skus[0], quantity: 2, priceCents: 1250 },
          { sku: skus[1], quantity: 1, priceCents: 0 },
        ],
      }),
    );
    const { entityId } = await h.client.result(created.workflowId);
    const before = await rowOf(entityId!);

    const started = await h.client.start('order-amend', { order: entityId, items: [{ sku: skus[0], quantity: 0 }], payment: { card: CARD } });
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: [] });
    expect(final.errors[0]?.message).toContain('ZERO_TOTAL');
    expect(await rowOf(entityId!)).toMatchObject({ items: before.items, amount_cents: '2500', payment_key: before.payment_key });
    expect(await stockOf(skus)).toEqual([998, 999]);
    expect(await liveCharges([created.workflowId, started.workflowId])).toMatchObject([{ reference: created.workflowId, amount_cents: 2500 }]);
    expect(await lockHolder(started)).toBeUndefined();
  });

  it('refunds its own charge when the stock runs short, and keeps the order', async () => {
    const skus = await ownSkus(3);
    const created = await completedOrder(skus, [2, 1]);
    const started = await h.client.start('order-amend', { order: created.id, items: [{ sku: skus[0], quantity: 9 }], payment: { card: CARD } });
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['revertAmendment', 'refundAmendedCharge'] });
    expect(final.errors[0]?.message).toContain('OUT_OF_STOCK');
    expect(await rowOf(created.id)).toMatchObject({ amount_cents: String(2 * 1250 + 4999), payment_key: `${created.sagaKey}:chargePayment` });
    expect(await stockOf(skus)).toEqual([1, 2]);
    expect(await liveCharges([created.sagaKey, started.workflowId])).toMatchObject([{ reference: created.sagaKey }]);
  });

  it('answers CONFLICT to another operation while one holds the order\'s lock', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const slow = await h.client.start('order-amend', { order: created.id, items: [{ sku: skus[0], quantity: 4 }], payment: { card: CARD }, simulate: { stepDelayMs: 1500 } });
    expect(slow.reservation.status).toBe('SUCCESS');

    const cancel = await h.client.start('order-cancel', { order: created.id });
    expect(cancel).toMatchObject({ started: false, reservation: { status: 'CONFLICT' } });
    const wait = (cancel.reservation as { retryAfterMs: number }).retryAfterMs;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(Number(h.config.saga.leaseMs));

    expect((await h.client.result(slow.workflowId)).outcome).toBe('COMPLETED');
    const after = await h.client.start('order-cancel', { order: created.id }, { idempotencyKey: cancel.idempotencyKey });
    expect((await h.client.result(after.workflowId)).outcome).toBe('COMPLETED');
  });
});

describe('fencing', () => {
  it('claims a COMPLETED row only for a token at or above the last claim', async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus);
    const claim = (token: string) => ordersTable.claim(h.pool, { id: rowIdOf(created.id), fencingToken: token });
    const base = BigInt((await ordersTable.findById(h.pool, rowIdOf(created.id)))!.lastFencingToken);

    expect(await claim(String(base + 10n))).toEqual({ status: 'CLAIMED' });
    expect(await claim(String(base + 10n))).toEqual({ status: 'CLAIMED' });
    expect(await claim(String(base + 5n))).toEqual({ status: 'FENCED_OUT' });
    expect(await ordersTable.claim(h.pool, { id: '987654321987', fencingToken: '1' })).toEqual({ status: 'NOT_FOUND' });
    expect((await ordersTable.findById(h.pool, rowIdOf(created.id)))?.lastOperationToken).toBe(String(base + 10n));
  });

  it('fences out a lock holder paused past its lease: the newer holder\'s operation stands, the stale one undoes its own charge', async () => {
    const fenced = await startHarness('entity operations paused holder', { worker: false });
    try {
      const skus = await ownSkus();
      const paused = await startWorkerProcess(fenced.config);
      const creating = await fenced.client.start('order', order({ items: [{ sku: skus[0], quantity: 2, priceCents: 1000 }] }));
      const created = await fenced.client.result(creating.workflowId);
      expect(created.outcome).toBe('COMPLETED');

      // The amendment holds the lock, has claimed the row, and is slow to charge; then its worker stops.
      const stale = await fenced.client.start('order-amend', {
        order: created.entityId!,
        items: [{ sku: skus[0], quantity: 7 }],
        payment: { card: CARD },
        simulate: { stepDelayMs: 2000 },
      });
      await eventually(() => fenced.client.status(stale.workflowId), (s) => s.state.stepsDone.includes('priceAmendment'), 'the amendment to price itself');
      paused.child.kill('SIGSTOP');
      await eventually(() => fenced.rms.inspect(stale.intentKey), (i) => i.holder === undefined, 'the lock\'s lease to end', 20_000);

      await startWorkerProcess(fenced.config);
      const newer = await fenced.client.start('order-cancel', { order: created.entityId! });
      expect(newer.reservation.status).toBe('SUCCESS');
      // The stale holder wakes up while the newer one runs (a stopped worker would also swallow the
      // tasks its pending polls are handed).
      paused.child.kill('SIGCONT');
      const [newerFinal, staleFinal] = await Promise.all([fenced.client.result(newer.workflowId), fenced.client.result(stale.workflowId)]);

      expect(newerFinal.outcome, JSON.stringify(newerFinal.errors)).toBe("COMPLETED");
      expect(BigInt(newerFinal.fencingToken!)).toBeGreaterThan(BigInt(staleFinal.fencingToken!));
      expect(staleFinal.outcome, JSON.stringify(staleFinal.errors)).toBe('COMPENSATED');
      expect(['LEASE_LOST', 'FENCED_OUT']).toContain(staleFinal.reason);
      expect(staleFinal.stepsDone).not.toContain('applyAmendment');
      const row = await rowOf(created.entityId!);
      expect(row).toMatchObject({ cancelled_by: newer.workflowId, amount_cents: '2000', last_operation_token: newerFinal.fencingToken });
      expect(await stockOf(skus)).toEqual([1000, 1000]);
      expect(await liveChargesOf(fenced, [creating.workflowId, stale.workflowId])).toEqual([]);
    } finally {
      killWorkerProcesses();
      await fenced.stop();
    }
  });
});

async function liveChargesOf(harness: SagaHarness, references: readonly string[]) {
  const all = (await Promise.all(references.map((r) => harness.chargesOf(r)))).flat();
  return all.filter((c) => c.status === 'succeeded' && !c.refunded);
}

describe('50 concurrent amendments and cancellations of one order', () => {
  it('end in the state of one serial order of them: row, stock and payments agree', { timeout: 240_000 }, async () => {
    const skus = await ownSkus();
    const created = await completedOrder(skus, [10, 10]);
    type Op = { kind: 'amend'; a: number; b: number } | { kind: 'cancel' };
    const ops: Op[] = Array.from({ length: 50 }, (_, i) =>
      i % 10 === 7 ? { kind: 'cancel' } : { kind: 'amend', a: 1 + ((i * 7) % 9), b: (i * 5) % 6 },
    );
    // Each caller retries its own key on CONFLICT, waiting at most the holder's remaining lease.
    const call = async (op: Op): Promise<{ op: Op; started: StartedSaga; final: SagaState }> => {
      const key = randomUUID();
      for (;;) {
        const started =
          op.kind === 'cancel'
            ? await h.client.start('order-cancel', { order: created.id }, { idempotencyKey: key })
            : await h.client.start(
                'order-amend',
                { order: created.id, items: [{ sku: skus[0], quantity: op.a }, { sku: skus[1], quantity: op.b }], payment: { card: CARD } },
                { idempotencyKey: key },
              );
        if (started.reservation.status === 'SUCCESS') return { op, started, final: await h.client.result(started.workflowId) };
        expect(started.reservation.status).toBe('CONFLICT');
        await delay(Math.min((started.reservation as { retryAfterMs: number }).retryAfterMs, 50 + Math.random() * 200));
      }
    };
    const runs = await Promise.all(ops.map(call));

    // The serial order is the order of the lock's tokens; play it on the order as created.
    runs.sort((x, y) => (BigInt(x.final.fencingToken!) < BigInt(y.final.fencingToken!) ? -1 : 1));
    const state = { a: 10, b: 10, cancelled: false, charge: `${created.sagaKey}:chargePayment` };
    for (const { op, started, final } of runs) {
      if (state.cancelled) {
        expect(final, `${started.workflowId} after the cancellation`).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
        expect(final.errors[0]?.message).toContain('ORDER_CANCELLED');
      } else if (op.kind === 'amend' && state.b === 0) {
        // An earlier amendment removed the second line: an amendment naming it is refused.
        expect(final, `${started.workflowId} after the line was removed`).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
        expect(final.errors[0]?.message).toContain('NOT_IN_ORDER');
      } else if (op.kind === 'cancel') {
        expect(final.outcome).toBe('COMPLETED');
        state.cancelled = true;
      } else {
        expect(final.outcome, JSON.stringify(final.errors)).toBe('COMPLETED');
        Object.assign(state, { a: op.a, b: op.b, charge: `${started.workflowId}:chargeAmendedOrder` });
      }
    }
    expect(runs.map((r) => r.final.outcome)).toContain('COMPLETED');

    const row = await rowOf(created.id);
    const lines = [
      { sku: skus[0], quantity: state.a, priceCents: 1250 },
      { sku: skus[1], quantity: state.b, priceCents: 4999 },
    ].filter((l) => l.quantity > 0);
    const amount = lines.reduce((sum, l) => sum + l.quantity * l.priceCents, 0);
    expect(row).toMatchObject({ items: lines, amount_cents: String(amount), payment_key: state.charge, cancelled_at: state.cancelled ? expect.any(Date) : null });
    expect(await stockOf(skus)).toEqual(state.cancelled ? [1000, 1000] : [1000 - state.a, 1000 - state.b]);
    const live = await liveCharges([created.sagaKey, ...runs.map((r) => r.started.workflowId)]);
    expect(live.map((c) => c.amount_cents)).toEqual(state.cancelled ? [] : [amount]);
    expect((await h.rms.inspect(runs[0]!.started.intentKey)).holder).toBeUndefined();
  });
});
