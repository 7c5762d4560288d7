import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ordersTable } from '../../src/db';
import { REFUND_REFUSED_CARD } from '../../src/sagas';
import { reservationUpdate, sagaWorkflowId, type CompensationPolicy } from '../../src/shared';
import { reservationSaga } from '../../src/workflows';
import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga compensation policy');
});
afterAll(async () => {
  await h?.stop();
});

/** Runs a short-stock order whose refund is refused, under the given compensation policy. */
async function runWithPolicy(policy: CompensationPolicy) {
  const input = h.client.prepare('order', order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }));
  input.compensation = policy;
  const handle = await h.client.temporal.workflow.start(reservationSaga, {
    workflowId: sagaWorkflowId('order', input.idempotencyKey),
    taskQueue: h.config.temporal.taskQueue,
    args: [input],
  });
  await handle.executeUpdate(reservationUpdate, { args: [{ requestHash: input.requestHash }] });
  return { input, final: await handle.result() };
}

describe('compensation policy', () => {
  it('stops at the first failed compensation without continue-on-error, and surfaces it', async () => {
    const { input, final } = await runWithPolicy({ parallel: false, continueOnError: false, freeIntent: true });

    expect(final.outcome).toBe('COMPENSATION_FAILED');
    expect(final.compensationsRun).toEqual(['releaseStock']);
    expect(final.errors.map((e) => e.at)).toContain('refundPayment');
    // The entity was not undone: it stays registered for an operator to resolve.
    expect((await ordersTable.find(h.pool, input.intentKey))?.status).toBe('REGISTERED');
    expect((await h.rms.inspect(input.intentKey)).exists).toBe(true);
  });

  it('runs every compensation concurrently when parallel, recording the one that failed', async () => {
    const { input, final } = await runWithPolicy({ parallel: true, continueOnError: true, freeIntent: true });

    expect(final.outcome).toBe('COMPENSATION_FAILED');
    expect([...final.compensationsRun].sort()).toEqual(['releaseStock', 'undoEntity']);
    expect(final.errors.map((e) => e.at)).toContain('refundPayment');
    expect((await ordersTable.find(h.pool, input.intentKey))?.status).toBe('COMPENSATED');
  });

  it('keeps the intent taken after compensation when the type does not free it', async () => {
    const input = h.client.prepare('order', order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }));
    input.compensation = { parallel: false, continueOnError: true, freeIntent: false };
    const handle = await h.client.temporal.workflow.start(reservationSaga, {
      workflowId: sagaWorkflowId('order', input.idempotencyKey),
      taskQueue: h.config.temporal.taskQueue,
      args: [input],
    });

    const final = await handle.result();

    expect(final.outcome).toBe('COMPENSATED');
    expect((await ordersTable.find(h.pool, input.intentKey))?.status).toBe('COMPENSATED');
    const rms = await h.rms.inspect(input.intentKey);
    expect(rms).toMatchObject({ exists: true, existsToken: final.fencingToken });
    expect(rms.holder).toBeUndefined();
  });
});
