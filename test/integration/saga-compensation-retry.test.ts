/**
 * A compensation's retry policy, declared by its saga type and recorded in each saga's plan: a refund
 * whose provider is away for a minute is retried until the provider is back, and the saga ends
 * COMPENSATED without an operator, refunded once. The same outage under the policy a type gets when
 * it declares none (the client's `compensationAttempts`) needs an operator (see
 * saga-provider-crash.test.ts).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { defineSaga, type SagaDefinition, type SagaTypes } from '../../src/sagas';
import { killProviderProcesses, startProviderProcess } from '../helpers/provider-process';
import { freePort } from '../helpers/redis-servers';
import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { sagaTypesFor } from '../fixtures/orders';

/** How long the provider stays away: the outage a compensation's default policy does not ride out. */
const OUTAGE_MS = 60_000;

/** The refund retried for up to 3 minutes, at most 5 s apart. */
const PATIENT_REFUND = { totalMs: 180_000, initialIntervalMs: 500, backoffCoefficient: 2, maximumIntervalMs: 5_000 };

/** The charge retried up to 20 times, at most 2 s apart. */
const PERSISTENT_CHARGE = { maximumAttempts: 20, maximumIntervalMs: 2_000 };

/** The order types, the order's charge given {@link PERSISTENT_CHARGE} and its refund {@link PATIENT_REFUND}. */
function withPatientRefund(types: SagaTypes): SagaTypes {
  const orderType = types.order as SagaDefinition;
  const patient = defineSaga({
    ...orderType,
    steps: orderType.steps.map((s) => (s.step === 'chargePayment' ? { ...s, retry: PERSISTENT_CHARGE, compensationRetry: PATIENT_REFUND } : s)),
  });
  return { ...types, order: patient };
}

/** A protobuf duration in ms (0 when absent). */
function ms(d: { seconds?: number | { toNumber(): number } | null; nanos?: number | null } | null | undefined): number {
  if (!d) return 0;
  const seconds = typeof d.seconds === 'number' ? d.seconds : (d.seconds?.toNumber() ?? 0);
  return seconds * 1000 + Math.round((d.nanos ?? 0) / 1e6);
}

let port: number;
let h: SagaHarness;

beforeAll(async () => {
  port = await freePort();
  h = await startHarness('saga compensation retry', { sagaTypes: (config) => withPatientRefund(sagaTypesFor(config, `http://127.0.0.1:${port}`)) });
});
afterAll(async () => {
  await h?.stop();
  killProviderProcesses();
});

it('rides out a minute-long outage of the provider a compensation calls: COMPENSATED without an operator, refunded once', { timeout: 240_000 }, async () => {
  const key = `outage-${randomUUID()}`;
  const sagaKey = `order-${key}`;
  // The provider commits the refund, then dies before answering; it stays away for a minute.
  const crashing = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port, crashOnKey: `${sagaKey}:refundPayment` });

  // Short of stock once the payment was charged: the saga compensates, refunding the charge.
  const started = await h.client.start('order', order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }), { idempotencyKey: key });
  expect(await crashing.exited).toBe(137);
  const downAt = Date.now();
  await delay(OUTAGE_MS / 2);
  // Half-way through the outage the refund is still being retried: no operator asked for.
  const during = (await h.client.status(sagaKey)).state;
  expect(during.phase).toBe('COMPENSATING');
  expect(during.attention).toBeUndefined();
  await delay(Math.max(0, downAt + OUTAGE_MS - Date.now()));

  const back = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port });
  const final = await h.client.result(sagaKey);

  expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['releaseStock', 'refundPayment', 'undoEntity'] });
  expect(final.attention).toBeUndefined();
  expect(await h.chargesOf(sagaKey)).toMatchObject([{ status: 'succeeded', refunded: true }]);
  // The refund the first process committed was answered, after the outage, from the provider's store.
  expect(crashing.output()).toMatch(new RegExp(`refund ch_\\w+ refunded .*key ${sagaKey}:refundPayment`));
  expect(back.output()).toMatch(new RegExp(`replayed.*${sagaKey}:refundPayment`));
  expect((await h.rms.inspect(started.intentKey)).exists).toBe(false);
  // Temporal ran them with the policies the plan recorded.
  const history = await h.client.temporal.workflow.getHandle(sagaKey).fetchHistory();
  const scheduled = (history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes ?? []);
  const policyOf = (name: string) =>
    scheduled
      .filter((a) => a.activityType?.name === name)
      .map((a) => ({
        maximumAttempts: a.retryPolicy?.maximumAttempts,
        initialIntervalMs: ms(a.retryPolicy?.initialInterval),
        maximumIntervalMs: ms(a.retryPolicy?.maximumInterval),
        scheduleToCloseMs: ms(a.scheduleToCloseTimeout),
      }));
  expect(policyOf('runStep')).toContainEqual({ maximumAttempts: 20, initialIntervalMs: 200, maximumIntervalMs: 2_000, scheduleToCloseMs: 0 });
  expect(policyOf('runCompensation')).toContainEqual({ maximumAttempts: 0, initialIntervalMs: 500, maximumIntervalMs: 5_000, scheduleToCloseMs: 180_000 });
  back.child.kill('SIGTERM');
  await back.exited;
});
