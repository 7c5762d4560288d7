/**
 * Changing a saga type while sagas of it run, against the real Temporal dev server, Redis,
 * PostgreSQL and the payment provider: a running saga finishes on the steps it was planned with, and
 * a worker that could not finish it refuses to start, naming the saga and the step.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineSaga, defineSagaTypes, type SagaDefinition, type SagaTypes } from '../../src/sagas';
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
