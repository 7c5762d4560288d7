import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { defineSagaTypes } from '../../src/sagas';
import type { CompensationPolicy } from '../../src/shared';
import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, REFUND_REFUSED_CARD, sagaTypesFor } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga compensation policy', {
    sagaTypes: (config) => {
      /** The order saga (with the harness's payment provider) under another compensation policy: the worker takes the policy from the type, never from the caller. */
      const withPolicy = (type: string, compensation: CompensationPolicy) => ({ ...sagaTypesFor(config).order!, type, compensation });
      return defineSagaTypes(
        withPolicy('order-stop-on-error', { parallel: false, continueOnError: false, freeIntent: true }),
        withPolicy('order-parallel', { parallel: true, continueOnError: true, freeIntent: true }),
        withPolicy('order-keep-intent', { parallel: false, continueOnError: true, freeIntent: false }),
      );
    },
  });
});
afterAll(async () => {
  await h?.stop();
});

/** Runs a short-stock order of `type` (whose refund is refused, unless `refundable`) to its end. */
async function run(type: string, refundable = false) {
  const data = order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }], ...(refundable ? {} : { payment: { card: REFUND_REFUSED_CARD } }) });
  const started = await h.client.start(type, data);
  expect(started.reservation.status).toBe('SUCCESS');
  return { data, workflowId: started.workflowId, intentKey: started.intentKey, final: await h.client.result(started.workflowId) };
}

describe('compensation policy', () => {
  it('stops at the first failed compensation without continue-on-error, and surfaces it', async () => {
    const { intentKey, final } = await run('order-stop-on-error');

    expect(final.outcome).toBe('COMPENSATION_FAILED');
    expect(final.compensationsRun).toEqual(['releaseStock']);
    expect(final.errors.map((e) => e.at)).toContain('refundPayment');
    // The entity was not undone: it stays registered for an operator to resolve.
    expect((await ordersTable.find(h.pool, intentKey))?.status).toBe('REGISTERED');
    expect((await h.rms.inspect(intentKey)).exists).toBe(true);
  });

  it('runs the step compensations concurrently when parallel, recording the one that failed, and then keeps the entity', async () => {
    const { intentKey, final } = await run('order-parallel');

    expect(final.outcome).toBe('COMPENSATION_FAILED');
    expect(final.compensationsRun).toEqual(['releaseStock']);
    expect(final.errors.map((e) => e.at)).toContain('refundPayment');
    expect((await ordersTable.find(h.pool, intentKey))?.status).toBe('REGISTERED');
    expect((await h.rms.inspect(intentKey)).exists).toBe(true);
  });

  it('undoes the entity after the concurrent compensations when every one succeeded', async () => {
    const { intentKey, final } = await run('order-parallel', true);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', compensationsRun: expect.arrayContaining(['releaseStock', 'refundPayment']) });
    expect(final.compensationsRun.at(-1)).toBe('undoEntity');
    expect((await ordersTable.find(h.pool, intentKey))?.status).toBe('COMPENSATED');
  });

  it('keeps the intent taken after compensation when the type does not free it', async () => {
    const { intentKey, final } = await run('order-keep-intent', true);

    expect(final.outcome).toBe('COMPENSATED');
    expect((await ordersTable.find(h.pool, intentKey))?.status).toBe('COMPENSATED');
    const rms = await h.rms.inspect(intentKey);
    expect(rms).toMatchObject({ exists: true, existsToken: final.fencingToken });
    expect(rms.holder).toBeUndefined();
  });

  it('keeps the intent taken when an operator undoes a stuck entity of a type that does not free it', async () => {
    const { data, workflowId, intentKey, final } = await run('order-keep-intent');
    expect(final.outcome).toBe('COMPENSATION_FAILED');

    const settled = await h.client.settle(workflowId, 'undo');

    expect(settled).toEqual({ workflowId, row: 'COMPENSATED', intentFreed: false });
    expect((await ordersTable.find(h.pool, intentKey))?.status).toBe('COMPENSATED');
    expect(await h.rms.inspect(intentKey)).toMatchObject({ exists: true, existsToken: final.fencingToken });
    expect((await h.rms.inspect(intentKey)).holder).toBeUndefined();
    expect((await h.client.start('order-keep-intent', data)).reservation.status).toBe('DUPLICATE');
  });
});
