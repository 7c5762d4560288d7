/**
 * The moment after a saga's wait for a redrive ended and before it ended: an operation still gives
 * its entity's lock back (one activity, longer while workers are away), its phase still
 * NEEDS_ATTENTION. A redrive sent then must get an answer, and the saga must end. Against the real
 * Temporal dev server, Redis, PostgreSQL and the payment provider over HTTP. The moment is held
 * open by the workers: a worker of workflows only runs the saga up to that activity, and a whole
 * worker runs it on from there once the redrive has been answered.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedriveError } from '../../src/client';
import { defineSagaTypes, type ExternalStep, type SagaTypes } from '../../src/sagas';
import { SAGA_OUTCOME } from '../../src/shared';
import { eventually, order, settledWithin, startHarness, withWorker, type SagaHarness } from '../helpers/saga-harness';
import { sagaTypesFor } from '../fixtures/orders';
import { externalFailingDuring, givingUpSoon } from '../fixtures/outages';

/** The refunds of `order-amend-fragile`: down for the whole file (no redrive here can mend them). */
const refunds = { down: true };

/** The order types, and `order-amend-fragile`: order-amend whose refund of the amended charge fails, waiting 5 s for a redrive. */
function fragileTypes(config: Parameters<typeof sagaTypesFor>[0], providerUrl: string): SagaTypes {
  const types = sagaTypesFor(config, providerUrl);
  const amend = types['order-amend']!;
  const refundAmendedCharge = externalFailingDuring(refunds, 'the payment provider', amend.handlers.refundAmendedCharge as ExternalStep<unknown>);
  return defineSagaTypes(...Object.values(types), {
    ...givingUpSoon(amend, 'refundAmendedCharge'),
    type: 'order-amend-fragile',
    handlers: { ...amend.handlers, refundAmendedCharge },
    compensation: { ...amend.compensation, attentionMs: 5000 },
  });
}

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga redrive window', { worker: false, sagaTypes: fragileTypes });
});
afterAll(async () => {
  await h?.stop();
});

/** The activities the saga has scheduled so far, by name, from its history. */
async function activitiesScheduled(workflowId: string): Promise<string[]> {
  const history = await h.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
}

describe("a redrive sent after an operation's wait ended", () => {
  it('is refused, saying the wait ended, and the saga ends COMPENSATION_FAILED as it would have without it', async () => {
    const sku = `window-${randomUUID().slice(0, 8)}`;
    await h.pool.query('INSERT INTO stock (sku, available) VALUES ($1, 2)', [sku]);
    const workers = { config: h.config, sagas: h.types };
    // Workflows (and their local activities) only: once the whole worker below stops, the saga runs
    // on up to its next activity, and no further.
    await withWorker({ ...workers, workerOptions: { enableNonLocalActivities: false } }, async () => {
      // No cache (no sticky queue): once it stops, every workflow task goes to the worker above at once.
      const amend = await withWorker({ ...workers, workerOptions: { maxCachedWorkflows: 0, shutdownGraceTime: '0s' } }, async () => {
        const created = await h.client.result((await h.client.start('order', order({ items: [{ sku, quantity: 1, priceCents: 100 }] }))).workflowId);
        // More than the stock holds: charged, then refused; its refund cannot be sent.
        const started = await h.client.start('order-amend-fragile', { order: created.entityId, items: [{ sku, quantity: 5 }], payment: { card: '4242424242424242' } });
        await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'NEEDS_ATTENTION', 'the amendment to wait for a redrive');
        return started;
      });
      // The wait ends with no worker of activities: the saga stops where it gives the order's lock back.
      await eventually(() => activitiesScheduled(amend.workflowId), (names) => names.includes('releaseLock'), "the wait to end and the lock's release to be scheduled");
      const late = await h.client.status(amend.workflowId);

      const redrive = await settledWithin(h.client.redrive(amend.workflowId), 15_000);
      const final = await withWorker(workers, () => settledWithin(h.client.result(amend.workflowId), 30_000));
      const workflow = await h.client.temporal.workflow.getHandle(amend.workflowId).describe();

      expect(late).toMatchObject({ status: 'RUNNING', state: { phase: 'NEEDS_ATTENTION', attention: { pending: ['refundAmendedCharge'], redrives: 0 } } });
      const outcome = workflow.typedSearchAttributes.get(SAGA_OUTCOME);
      expect(final, `the saga to end (its workflow is ${workflow.status.name}, its outcome ${outcome})`).toMatchObject({ value: { outcome: 'COMPENSATION_FAILED', reason: 'STEP_REJECTED', compensationsRun: ['revertAmendment'], attention: { redrives: 0 } } });
      expect(redrive, 'the redrive to be answered').toEqual({ error: expect.any(RedriveError) });
      const { error } = redrive as { error: RedriveError };
      expect(error.message).toBe(
        `saga ${amend.workflowId} no longer waits for a redrive: its wait ended at ${late.state.attention!.until}, and it ends COMPENSATION_FAILED`,
      );
      expect(workflow.status.name).toBe('COMPLETED');
    });
  });
});
