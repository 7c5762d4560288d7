/**
 * Changing a saga type while sagas of it run, against the real Temporal dev server, Redis,
 * PostgreSQL and the payment provider: a running saga finishes on the steps it was planned with, and
 * a worker that could not finish it refuses to start, naming the saga and the step.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { defineOperation, defineSaga, defineSagaTypes, type EntityOperation, type SagaDefinition, type SagaTypes } from '../../src/sagas';
import { eventually, order, startHarness, withWorker as runWorker, type SagaHarness } from '../helpers/saga-harness';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga type change', { worker: false });
});
afterAll(async () => {
  await h?.stop();
});

/** A worker of `types`, until `fn` resolves. */
function withWorker<T>(types: SagaTypes, fn: () => Promise<T>): Promise<T> {
  return runWorker({ config: h.config, sagas: types }, fn);
}

/** The order type of the next version: it no longer reserves stock (the shop sells only to order). */
function withoutStock(retired: boolean): SagaTypes {
  const { kind: _kind, ...v1 } = h.types.order as SagaDefinition<unknown>;
  const { reserveStock, releaseStock, ...kept } = v1.handlers;
  return defineSagaTypes(defineSaga({
    ...v1,
    steps: v1.steps.filter((s) => s.step !== 'reserveStock'),
    handlers: kept,
    ...(retired ? { retiredHandlers: { reserveStock: reserveStock!, releaseStock: releaseStock! } } : {}),
  }));
}

/**
 * The order-amend type of the next version: its charge step is renamed `chargeAmendment`, undone by
 * `refundAmendment` (the same code under new names); the old names are kept as retired handlers.
 */
function amendWithRenamedCharge(): SagaTypes {
  const { kind: _kind, ...v1 } = h.types['order-amend'] as EntityOperation<unknown>;
  const { chargeAmendedOrder, refundAmendedCharge, ...kept } = v1.handlers;
  const v2 = defineOperation({
    ...v1,
    steps: v1.steps.map((s) => (s.step === 'chargeAmendedOrder' ? { step: 'chargeAmendment', compensation: 'refundAmendment' } : s)),
    handlers: { ...kept, chargeAmendment: chargeAmendedOrder!, refundAmendment: refundAmendedCharge! },
    retiredHandlers: { chargeAmendedOrder: chargeAmendedOrder!, refundAmendedCharge: refundAmendedCharge! },
  });
  return defineSagaTypes(...Object.values(h.types).filter((t) => t.type !== 'order-amend'), v2);
}

/** The order type of the next version: its schema, still `.strict()`, drops the `simulate` field. */
function withoutSimulate(): SagaTypes {
  const { kind: _kind, ...v1 } = h.types.order as SagaDefinition<unknown>;
  const schema = (v1.schema as unknown as z.ZodObject).omit({ simulate: true });
  return defineSagaTypes(...Object.values(h.types).filter((t) => t.type !== 'order'), defineSaga({ ...v1, schema }));
}

/** Two SKUs of this test's own, with `stock` units each. */
async function ownSkus(stock: number): Promise<[string, string]> {
  const tag = randomUUID().slice(0, 8);
  const skus: [string, string] = [`tc-${tag}-a`, `tc-${tag}-b`];
  for (const sku of skus) await h.pool.query('INSERT INTO stock (sku, available) VALUES ($1, $2)', [sku, stock]);
  return skus;
}

describe('a saga type changed while sagas of it run', () => {
  it('refuses a worker without a handler a running saga needs, naming both; with it retired, the saga ends on its planned steps and new ones run the new', async () => {
    expect(h.types.order!.steps.map((s) => s.step)).toEqual(['chargePayment', 'reserveStock']);
    // Planned by a worker of the current version, which stops while the saga runs its first step.
    const inFlight = await h.client.start('order', order({ simulate: { stepDelayMs: 1500 } }));
    await withWorker(h.types, () => eventually(() => h.client.status(inFlight.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the saga to run its steps'));

    await expect(withWorker(withoutStock(false), () => Promise.resolve())).rejects.toMatchObject({
      name: 'SagaDeclarationError',
      message: expect.stringMatching(new RegExp(`saga ${inFlight.workflowId} is running with "reserveStock" in its plan.*retiredHandlers`)),
    });

    const { old, fresh } = await withWorker(withoutStock(true), async () => {
      const started = await h.client.start('order', order());
      return { old: await h.client.result(inFlight.workflowId), fresh: await h.client.result(started.workflowId) };
    });
    expect(old).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'] });
    expect(fresh).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment'] });
  });

  it('lets a worker start once the sagas that needed a handler have ended', async () => {
    const done = await withWorker(h.types, async () => h.client.result((await h.client.start('order', order())).workflowId));
    expect(done.outcome).toBe('COMPLETED');

    await expect(withWorker(withoutStock(false), () => Promise.resolve('started'))).resolves.toBe('started');
  });

  it('refuses a declaration that plans a step and also retires it', () => {
    const { kind: _kind, ...v1 } = h.types.order as SagaDefinition<unknown>;
    expect(() => defineSaga({ ...v1, retiredHandlers: { reserveStock: v1.handlers.reserveStock! } })).toThrow(/"reserveStock" is a step of the type and a retired handler/);
  });
});

describe('a step renamed while an operation planned with its old name runs', () => {
  it('undoes the step by the compensation its plan pairs it with: the amendment\'s charge is refunded', async () => {
    const skus = await ownSkus(3);
    // Planned by a worker of the current version, which stops while the charge step waits; the stock
    // of 3 cannot take the amended 9, so the amendment is refused after its charge.
    const { created, amend } = await withWorker(h.types, async () => {
      const made = await h.client.start('order', order({ items: [{ sku: skus[0], quantity: 2, priceCents: 1250 }, { sku: skus[1], quantity: 1, priceCents: 4999 }] }));
      const { entityId } = await h.client.result(made.workflowId);
      const started = await h.client.start('order-amend', { order: entityId, items: [{ sku: skus[0], quantity: 9 }], payment: { card: '4242424242424242' }, simulate: { stepDelayMs: 1500 } });
      await eventually(() => h.client.status(started.workflowId), (s) => s.state.stepsDone.includes('priceAmendment'), 'the amendment to reach its charge');
      return { created: made, amend: started };
    });

    // The next version names the step and its compensation otherwise, and keeps the old ones retired.
    const final = await withWorker(amendWithRenamedCharge(), () => h.client.result(amend.workflowId));

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: ['priceAmendment', 'chargeAmendedOrder'] });
    const charges = [...(await h.chargesOf(created.workflowId)), ...(await h.chargesOf(amend.workflowId))];
    expect(charges.filter((c) => c.status === 'succeeded' && !c.refunded)).toMatchObject([{ reference: created.workflowId }]);
    expect(await h.chargesOf(amend.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
  });
});

describe('a schema changed while sagas of it run', () => {
  it('refuses a worker whose schema refuses a running saga\'s recorded input, naming the saga and the field; the saga ends on a worker that accepts it', async () => {
    const inFlight = await h.client.start('order', order({ simulate: { stepDelayMs: 1500 } }));
    await withWorker(h.types, () => eventually(() => h.client.status(inFlight.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the saga to run its steps'));
    const next = withoutSimulate();
    expect(next.order!.schema.safeParse(order({ simulate: {} })).success).toBe(false);

    await expect(withWorker(next, () => Promise.resolve())).rejects.toMatchObject({
      name: 'SagaDeclarationError',
      message: expect.stringMatching(new RegExp(`saga ${inFlight.workflowId} is running with input .*"simulate".*until such sagas end`)),
    });

    const final = await withWorker(h.types, () => h.client.result(inFlight.workflowId));
    expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'] });
  });
});
