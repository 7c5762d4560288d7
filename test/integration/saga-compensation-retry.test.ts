/**
 * A compensation's retry policy, recorded in each saga's plan. Under the default one
 * (DEFAULT_COMPENSATION_RETRY), a refund whose provider is away for a minute is retried until the
 * provider is back, and the saga ends COMPENSATED without an operator, refunded once; a refund the
 * card network refuses is asked again only `compensationAttempts` times before the saga waits for an
 * operator. A type that declares a shorter policy gives up sooner (see saga-provider-crash.test.ts).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { defineSaga, type SagaDefinition, type SagaTypes } from '../../src/sagas';
import { DEFAULT_COMPENSATION_RETRY } from '../../src/shared';
import { killProviderProcesses, startProviderProcess } from '../helpers/provider-process';
import { freePort } from '../helpers/redis-servers';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { sagaTypesFor } from '../fixtures/orders';

/** How long the provider stays away: longer than a compensation retried 5 times (about 3 s) rides out. */
const OUTAGE_MS = 60_000;

/** The charge retried up to 20 times, at most 2 s apart. */
const PERSISTENT_CHARGE = { maximumAttempts: 20, maximumIntervalMs: 2_000 };

/** The order types, the order's charge given {@link PERSISTENT_CHARGE}; its refund keeps the default policy. */
function withPersistentCharge(types: SagaTypes): SagaTypes {
  const orderType = types.order as SagaDefinition;
  const persistent = defineSaga({
    ...orderType,
    steps: orderType.steps.map((s) => (s.step === 'chargePayment' ? { ...s, retry: PERSISTENT_CHARGE } : s)),
  });
  return { ...types, order: persistent };
}

/** A protobuf duration in ms (0 when absent). */
function ms(d: { seconds?: number | { toNumber(): number } | null; nanos?: number | null } | null | undefined): number {
  if (!d) return 0;
  const seconds = typeof d.seconds === 'number' ? d.seconds : (d.seconds?.toNumber() ?? 0);
  return seconds * 1000 + Math.round((d.nanos ?? 0) / 1e6);
}

/** The activities saga `workflowId` scheduled as `name`, with the retry options Temporal ran them with, and the attempt each last started. */
async function scheduledAs(workflowId: string, name: string) {
  const events = (await h.client.temporal.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  return events.flatMap((e) => {
    const a = e.activityTaskScheduledEventAttributes;
    if (a?.activityType?.name !== name) return [];
    const started = events.find((s) => s.activityTaskStartedEventAttributes && String(s.activityTaskStartedEventAttributes.scheduledEventId) === String(e.eventId));
    return [
      {
        maximumAttempts: a.retryPolicy?.maximumAttempts,
        initialIntervalMs: ms(a.retryPolicy?.initialInterval),
        maximumIntervalMs: ms(a.retryPolicy?.maximumInterval),
        scheduleToCloseMs: ms(a.scheduleToCloseTimeout),
        attempts: started?.activityTaskStartedEventAttributes?.attempt,
      },
    ];
  });
}

/** DEFAULT_COMPENSATION_RETRY, as Temporal's retry options: for 10 minutes, 200 ms doubling up to 30 s apart. */
const DEFAULT_REFUND = {
  maximumAttempts: 0,
  initialIntervalMs: DEFAULT_COMPENSATION_RETRY.initialIntervalMs,
  maximumIntervalMs: DEFAULT_COMPENSATION_RETRY.maximumIntervalMs,
  scheduleToCloseMs: DEFAULT_COMPENSATION_RETRY.totalMs,
};

let port: number;
let h: SagaHarness;

beforeAll(async () => {
  port = await freePort();
  h = await startHarness('saga compensation retry', { sagaTypes: (config) => withPersistentCharge(sagaTypesFor(config, `http://127.0.0.1:${port}`)) });
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
  // Temporal ran them with the policies the plan recorded: the type's for the charge, the default for the refund.
  expect(await scheduledAs(sagaKey, 'runStep')).toContainEqual(expect.objectContaining({ maximumAttempts: 20, initialIntervalMs: 200, maximumIntervalMs: 2_000, scheduleToCloseMs: 0 }));
  // releaseStock, then refundPayment, which took more attempts than a refusal gets (the harness's client: 2).
  const [release, refund] = await scheduledAs(sagaKey, 'runCompensation');
  expect(release).toEqual({ ...DEFAULT_REFUND, attempts: 1 });
  expect(refund).toMatchObject(DEFAULT_REFUND);
  expect(refund!.attempts).toBeGreaterThan(2);
  back.child.kill('SIGTERM');
  await back.exited;
});

it('asks again a refund the card network refuses only compensationAttempts times under the same policy, then waits for an operator', async () => {
  /** The client's `compensationAttempts`: how often a refusal is asked again. */
  const REFUSALS = 3;
  const key = `refused-${randomUUID()}`;
  const sagaKey = `order-${key}`;
  const provider = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port });
  // Short of stock once the payment was charged; the card network refuses this card's refunds.
  const client = h.newClient({ compensationAttempts: REFUSALS });
  const started = await client.start('order', order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }], payment: { card: '4000000000000259' } }), { idempotencyKey: key });
  const waiting = await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'NEEDS_ATTENTION', 'the saga to wait for an operator');

  expect(waiting.state).toMatchObject({ compensationsRun: ['releaseStock'], attention: { pending: ['refundPayment', 'undoEntity'] } });
  // releaseStock, then the refused refundPayment.
  expect(await scheduledAs(sagaKey, 'runCompensation')).toEqual([
    { ...DEFAULT_REFUND, attempts: 1 },
    { ...DEFAULT_REFUND, attempts: REFUSALS },
  ]);
  await h.client.temporal.workflow.getHandle(sagaKey).terminate('the test is done');
  provider.child.kill('SIGTERM');
  await provider.exited;
});
