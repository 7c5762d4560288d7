/**
 * What a creation's steps see, a step without a compensation, and a refused step's own compensation.
 * `order-noted` is the order saga with a notice between its charge and its stock (`noteOrder`: no
 * compensation, nothing to undo). Each step and compensation is given the entity's row id and what
 * the earlier steps returned; the notice runs once, and a refusal after it undoes the steps that can
 * be undone, around it. `order-trusting` declares that its stock step, refused, did nothing
 * (`undoRefused: false`). Against the real Temporal dev server, PostgreSQL, Redis and the payment
 * provider over HTTP.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { defineSaga, type EntityContext, type SagaDefinition, type SagaTypes, type StepHandler, type StepImplementation } from '../../src/sagas';
import { order, rowIdOf, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { sagaTypesFor } from '../fixtures/orders';

/** What each saga's steps and compensations saw, by saga key and step name, in the order they ran. */
const seen = new Map<string, { name: string; entity: EntityContext | undefined }[]>();

function watched(name: string, handler: StepImplementation<unknown>): StepImplementation<unknown> {
  const record = (sagaKey: string, entity: EntityContext | undefined) => seen.set(sagaKey, [...(seen.get(sagaKey) ?? []), { name, entity }]);
  if (typeof handler === 'function') {
    return async (tx, ctx) => {
      record(ctx.sagaKey, ctx.entity);
      return handler(tx, ctx);
    };
  }
  return {
    kind: 'external',
    run: async (ctx) => {
      record(ctx.sagaKey, ctx.entity);
      return handler.run(ctx);
    },
  };
}

/** The notice: it tells the customer and returns what it told; nothing could take it back. */
const noteOrder: StepHandler<unknown> = async (_tx, ctx) => ({ noticeOf: ctx.entity?.id });

/** The order types, and `order-noted`: charge, then the notice, then the stock; every handler watched. */
function notedTypes(config: Parameters<typeof sagaTypesFor>[0], providerUrl: string): SagaTypes {
  const types = sagaTypesFor(config, providerUrl);
  const base = types.order as SagaDefinition;
  const handlers = Object.fromEntries(Object.entries({ ...base.handlers, noteOrder }).map(([name, handler]) => [name, watched(name, handler)]));
  const noted = defineSaga({
    ...base,
    type: 'order-noted',
    steps: [{ step: 'chargePayment', compensation: 'refundPayment' }, { step: 'noteOrder' }, { step: 'reserveStock', compensation: 'releaseStock' }],
    handlers,
  });
  // The order saga whose stock step, when refused, reserved nothing: its release is not run then.
  const trusting = defineSaga({
    ...base,
    type: 'order-trusting',
    steps: base.steps.map((step) => (step.step === 'reserveStock' ? { ...step, undoRefused: false } : step)),
    handlers: base.handlers,
  });
  return { ...types, 'order-noted': noted, 'order-trusting': trusting };
}

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga step context', { sagaTypes: notedTypes });
});
afterAll(async () => {
  await h?.stop();
});

it("gives each step the entity's row id and what the steps before it returned; the notice runs once", async () => {
  const started = await h.client.start('order-noted', order(), { idempotencyKey: `noted-${randomUUID()}` });
  const final = await h.client.result(started.workflowId);

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'noteOrder', 'reserveStock'] });
  const id = rowIdOf(final.entityId!);
  const ran = seen.get(started.workflowId)!;
  expect(ran.map((r) => r.name)).toEqual(['chargePayment', 'noteOrder', 'reserveStock']);
  expect(ran.map((r) => r.entity?.id)).toEqual([id, id, id]);
  expect(ran.map((r) => Object.keys(r.entity!.results))).toEqual([[], ['chargePayment'], ['chargePayment', 'noteOrder']]);
  // What the charge returned (the provider's charge id) and what the notice returned, as they returned them.
  expect(ran[2]!.entity!.results).toEqual({ chargePayment: { chargeId: expect.any(String), chargedCents: expect.any(Number) }, noteOrder: { noticeOf: id } });
});

it('undoes the steps around a notice when a later step is refused, and the compensations see what the steps returned', async () => {
  // Short of stock once the payment was charged and the notice sent.
  const started = await h.client.start('order-noted', order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }), { idempotencyKey: `noted-${randomUUID()}` });
  const final = await h.client.result(started.workflowId);

  expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: ['chargePayment', 'noteOrder'], compensationsRun: ['releaseStock', 'refundPayment', 'undoEntity'] });
  const ran = seen.get(started.workflowId)!;
  expect(ran.map((r) => r.name)).toEqual(['chargePayment', 'noteOrder', 'reserveStock', 'releaseStock', 'refundPayment']);
  expect(ran.at(-1)!.entity!.results).toEqual({ chargePayment: { chargeId: expect.any(String), chargedCents: expect.any(Number) }, noteOrder: { noticeOf: ran[0]!.entity!.id } });
  expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
});

it("runs a refused step's own compensation unless its type declares that a refusal did nothing", async () => {
  const shortStock = () => order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] });
  const [plain, trusting] = await Promise.all(
    (['order-noted', 'order-trusting'] as const).map(async (type) => {
      const started = await h.client.start(type, shortStock(), { idempotencyKey: `refused-${randomUUID()}` });
      return h.client.result(started.workflowId);
    }),
  );

  // By default the refused reserveStock is released too (a refusal may come after part of its effect).
  expect(plain).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['releaseStock', 'refundPayment', 'undoEntity'] });
  expect(trusting).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: ['chargePayment'], compensationsRun: ['refundPayment', 'undoEntity'] });
});
