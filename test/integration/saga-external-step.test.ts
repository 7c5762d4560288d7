/**
 * External steps (effects in another service): the order's payment, charged and refunded through
 * the project's payment provider over real HTTP, keyed by the step's idempotency key
 * (`<saga key>:<step>`). The adversaries: a reply lost after the provider charged (the retry must
 * not charge twice), a provider slower than the step's wait, and an attempt that reaches the provider
 * only after the saga was cancelled and compensated (it must charge nothing).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';

import { CompensationRefusedError, StepRejectedError, defineSagaTypes, externalStep, type ExternalStepContext } from '../../src/sagas';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { PaymentDeclinedError, RefundRefusedError, type PaymentProviderClient, orderSagaWithSimulations, type SimulatedOrderInput } from '../fixtures/orders';

/** The harness's provider (in-process, over real HTTP). */
let payments: PaymentProviderClient;

/** What the test makes an attempt of the charge do, by customer: see the tests. */
const behaviour = new Map<string, { loseFirstReply?: boolean; deafUntil?: Promise<void>; lateCallDone?: () => void }>();
const attempts = new Map<string, number>();

const amountOf = (input: SimulatedOrderInput) => input.items.reduce((sum, i) => sum + i.quantity * i.priceCents, 0);

const chargePayment = externalStep<SimulatedOrderInput>(async ({ idempotencyKey, sagaKey, input, signal }: ExternalStepContext<SimulatedOrderInput>) => {
  const how = behaviour.get(input.customer) ?? {};
  const attempt = (attempts.get(input.customer) ?? 0) + 1;
  attempts.set(input.customer, attempt);
  if (how.deafUntil) {
    // A paused attempt: it ignores its AbortSignal and calls the provider after the saga moved on.
    await how.deafUntil;
    try {
      return await payments.charge({ idempotencyKey, amountCents: amountOf(input), card: input.payment.card, reference: sagaKey });
    } finally {
      how.lateCallDone?.();
    }
  }
  try {
    const charge = await payments.charge({ idempotencyKey, amountCents: amountOf(input), card: input.payment.card, reference: sagaKey }, signal);
    // The provider charged, and the reply is lost on its way back (a timeout, a reset connection).
    if (how.loseFirstReply && attempt === 1) throw new Error('connection reset after the provider answered');
    return { chargeId: charge.id, chargedCents: charge.amountCents };
  } catch (err) {
    if (err instanceof PaymentDeclinedError) throw new StepRejectedError('the card was declined', 'PAYMENT_DECLINED');
    throw err;
  }
});

const refundPayment = externalStep<SimulatedOrderInput>(async ({ idempotencyKey, keyOf, signal }) => {
  try {
    return await payments.refund({ idempotencyKey, chargeIdempotencyKey: keyOf('chargePayment') }, signal);
  } catch (err) {
    if (err instanceof RefundRefusedError) throw new CompensationRefusedError('the card network refused the refund');
    throw err;
  }
});

const types = defineSagaTypes({ ...orderSagaWithSimulations, handlers: { ...orderSagaWithSimulations.handlers, chargePayment, refundPayment } });

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga external step', { sagaTypes: types });
  payments = h.payments;
});
afterAll(async () => {
  await h?.stop();
});

const chargesOf = (sagaKey: string) => h.chargesOf(sagaKey);

async function stepRecord(workflowId: string, scope: string, step: string) {
  const { rows } = await h.pool.query<{ status: string; response: unknown }>('SELECT status, response FROM idempotency_store WHERE scope = $1 AND key = $2', [
    scope,
    `${workflowId}:${step}`,
  ]);
  return rows[0];
}

it('charges once through the provider and records the step COMPLETED with the provider’s answer', async () => {
  const started = await h.client.start('order', order());
  const final = await h.client.result(started.workflowId);

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'] });
  expect(await chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: false, amount_cents: 2 * 1250 + 4999 }]);
  expect(await stepRecord(started.workflowId, 'order-step', 'chargePayment')).toMatchObject({ status: 'COMPLETED', response: { chargedCents: 7499 } });
});

it('charges once when the provider’s reply is lost: the retry sends the same key and gets the stored answer', async () => {
  const cart = order();
  behaviour.set(cart.customer, { loseFirstReply: true });

  const started = await h.client.start('order', cart);
  const final = await h.client.result(started.workflowId);

  expect(attempts.get(cart.customer)).toBe(2);
  expect(final).toMatchObject({ outcome: 'COMPLETED' });
  expect(await chargesOf(started.workflowId)).toHaveLength(1);
});

it('refunds the charge when a later step fails, and records a declined card as the step’s refusal', async () => {
  const short = await h.client.start('order', order({ items: [{ sku: 'rare-coin', quantity: 5, priceCents: 100 }] }));
  const declined = await h.client.start('order', order({ payment: { card: '4000000000000002' } }));

  expect(await h.client.result(short.workflowId)).toMatchObject({ outcome: 'COMPENSATED', compensationsRun: ['releaseStock', 'refundPayment', 'undoEntity'] });
  expect(await chargesOf(short.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
  expect(await h.client.result(declined.workflowId)).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
  expect(await stepRecord(declined.workflowId, 'order-step', 'chargePayment')).toMatchObject({ status: 'FAILED', response: { reason: 'PAYMENT_DECLINED' } });
  expect((await chargesOf(declined.workflowId)).filter((c) => c.status === 'succeeded')).toEqual([]);
});

it('never charges after the refund: an attempt that reaches the provider after the saga compensated is refused', { timeout: 120_000 }, async () => {
  const cart = order();
  let wake!: () => void;
  let lateCallDone!: () => void;
  const late = new Promise<void>((resolve) => (lateCallDone = resolve));
  behaviour.set(cart.customer, { deafUntil: new Promise((resolve) => (wake = resolve)), lateCallDone });

  const started = await h.client.start('order', cart);
  await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the charge to start');
  await h.client.cancel(started.workflowId);
  const final = await h.client.result(started.workflowId);
  // The compensation found no charge with the step's key and voided it at the provider.
  expect(final).toMatchObject({ outcome: 'COMPENSATED', compensationsRun: ['refundPayment', 'undoEntity'] });
  expect(await stepRecord(started.workflowId, 'order-compensation', 'refundPayment')).toMatchObject({ status: 'COMPLETED', response: { status: 'voided' } });

  wake();
  await late;

  expect((await chargesOf(started.workflowId)).filter((c) => c.status === 'succeeded')).toEqual([]);
  expect(await stepRecord(started.workflowId, 'order-step', 'chargePayment')).toMatchObject({ status: 'TOMBSTONE' });
});
