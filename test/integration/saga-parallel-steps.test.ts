/**
 * Step groups (steps next to each other with the same `group`, run at once) against the real
 * Temporal dev server, Redis, PostgreSQL and the payment provider. Concurrency is shown by a
 * rendezvous: each step of the group waits until every other one has started, which steps run one
 * at a time never do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineOperation, defineSaga, defineSagaTypes, externalStep, StepRejectedError, type EntityOperation, type SagaDefinition, type SagaTypes } from '../../src/sagas';
import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, sagaTypesFor } from '../fixtures/orders';

/** What each saga's group did, by saga key: who started, who was undone. */
const started = new Map<string, Set<string>>();
const undone = new Map<string, string[]>();

/** A step of the group: it starts, waits (up to 10 s) until `others` have started too, then ends or is refused. */
function meeting(name: string, others: string[], refuse = false) {
  return externalStep<unknown>(async ({ sagaKey, signal }) => {
    const here = started.get(sagaKey) ?? new Set<string>();
    started.set(sagaKey, here.add(name));
    for (let waited = 0; !others.every((o) => here.has(o)); waited += 10) {
      if (waited > 10_000) throw new StepRejectedError(`${name} ran alone: ${others.join(', ')} never started beside it`, 'NOT_TOGETHER');
      await new Promise((resolve) => setTimeout(resolve, 10));
      signal.throwIfAborted();
    }
    if (refuse) throw new StepRejectedError(`${name} refused`, 'REFUSED');
    return { met: others };
  });
}

function undo(name: string) {
  return externalStep<unknown>(async ({ sagaKey }) => {
    undone.set(sagaKey, [...(undone.get(sagaKey) ?? []), name]);
    return { undone: name };
  });
}

/** The order type, then a group of three steps; `refusing` names the one that is refused, if any. */
function groupedTypes(config: Parameters<typeof sagaTypesFor>[0], providerUrl: string): SagaTypes {
  const { kind: _kind, ...order } = sagaTypesFor(config, providerUrl).order as SagaDefinition<unknown>;
  const grouped = (type: string, refusing?: string) =>
    defineSaga<unknown>({
      ...order,
      type,
      steps: [
        { step: 'chargePayment', compensation: 'refundPayment' },
        { step: 'holdA', compensation: 'releaseA', group: 'holds' },
        { step: 'holdB', compensation: 'releaseB', group: 'holds' },
        { step: 'holdC', compensation: 'releaseC', group: 'holds' },
      ],
      handlers: {
        chargePayment: order.handlers.chargePayment!,
        refundPayment: order.handlers.refundPayment!,
        holdA: meeting('holdA', ['holdB', 'holdC']),
        holdB: meeting('holdB', ['holdA', 'holdC'], refusing === 'holdB'),
        holdC: meeting('holdC', ['holdA', 'holdB']),
        releaseA: undo('releaseA'),
        releaseB: undo('releaseB'),
        releaseC: undo('releaseC'),
      },
      compensation: { parallel: false, continueOnError: true, freeIntent: true },
    });
  return defineSagaTypes(grouped('order-grouped'), grouped('order-grouped-refused', 'holdB'));
}

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga parallel steps', { sagaTypes: groupedTypes });
});
afterAll(async () => {
  await h?.stop();
});

describe('a group of steps', () => {
  it('runs its steps at once, after the steps before it, and completes', async () => {
    const saga = await h.client.start('order-grouped', order());

    const final = await h.client.result(saga.workflowId);

    expect(final.outcome, JSON.stringify(final.errors)).toBe('COMPLETED');
    expect(final.stepsDone[0]).toBe('chargePayment');
    expect([...final.stepsDone.slice(1)].sort()).toEqual(['holdA', 'holdB', 'holdC']);
    expect(undone.get(saga.workflowId)).toBeUndefined();
  });

  it('lets the others finish when one is refused, then undoes the group and the steps before it', async () => {
    const saga = await h.client.start('order-grouped-refused', order());

    const final = await h.client.result(saga.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
    expect([...final.stepsDone].sort()).toEqual(['chargePayment', 'holdA', 'holdC']);
    // Every member's compensation (each was registered before the group started), in reverse, then the charge's.
    expect(undone.get(saga.workflowId)).toEqual(['releaseC', 'releaseB', 'releaseA']);
    expect(final.compensationsRun).toEqual(['releaseC', 'releaseB', 'releaseA', 'refundPayment', 'undoEntity']);
    expect((await ordersTable.find(h.pool, saga.intentKey))?.status).toBe('COMPENSATED');
    expect((await h.chargesOf(saga.workflowId)).filter((c) => c.status === 'succeeded' && !c.refunded)).toEqual([]);
  });

  it('is refused in a declaration when its steps do not stand next to each other, or in an operation', () => {
    const { kind: _kind, ...order } = h.types['order-grouped'] as SagaDefinition<unknown>;
    const apart = [
      { step: 'holdA', compensation: 'releaseA', group: 'holds' },
      { step: 'chargePayment', compensation: 'refundPayment' },
      { step: 'holdB', compensation: 'releaseB', group: 'holds' },
      { step: 'holdC', compensation: 'releaseC' },
    ];
    expect(() => defineSaga({ ...order, steps: apart })).toThrow(/the steps of group "holds" must stand next to each other/);
    const { kind: _op, ...cancel } = sagaTypesFor(h.config, h.providerUrl)['order-cancel'] as EntityOperation<unknown>;
    expect(() => defineOperation({ ...cancel, steps: cancel.steps.map((s) => ({ ...s, group: 'all' })) })).toThrow(/an operation runs its steps one at a time/);
  });
});
