/**
 * The order saga against the payment provider in a process of its own, killed after it committed
 * the charge and before it answered: the step's attempt sees the connection fail, the record stays
 * STARTED, and the retry (to the provider started again) sends the same key and is answered from the
 * provider's store. One charge, however the reply was lost. And the same crash where the saga cannot
 * wait for the provider: a refund lost so, redriven by an operator once the provider is back; a
 * charge lost so while the saga's deadline passes. Each effect is applied once.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import type { SagaState } from '../../src/shared';
import { killProviderProcesses, startProviderProcess, type ProviderProcess } from '../helpers/provider-process';
import { freePort } from '../helpers/redis-servers';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { defineSaga, type SagaDefinition, type SagaTypes } from '../../src/sagas';
import { sagaTypesFor } from '../fixtures/orders';
import { givingUpSoon } from '../fixtures/outages';

/** The order types, the order's refund giving up on an outage after 5 attempts: the saga cannot wait for the provider. */
function refundGivingUpSoon(types: SagaTypes): SagaTypes {
  const orderType = types.order as SagaDefinition;
  return { ...types, order: defineSaga(givingUpSoon(orderType, 'refundPayment')) };
}

const key = `crash-${randomUUID()}`;
const workflowId = `order-${key}`;
let port: number;
let first: ProviderProcess;
let h: SagaHarness;

beforeAll(async () => {
  port = await freePort();
  first = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port, crashOnKey: `${workflowId}:chargePayment` });
  // The harness's worker charges through the provider process that crashes, not the harness's own.
  h = await startHarness('saga provider crash', { sagaTypes: (config) => refundGivingUpSoon(sagaTypesFor(config, first.url)) });
});
afterAll(async () => {
  await h?.stop();
  killProviderProcesses();
});

it('charges once when the provider dies between its commit and its answer: the retry is replayed', { timeout: 120_000 }, async () => {
  const started = await h.client.start('order', order(), { idempotencyKey: key });
  expect(started.workflowId).toBe(workflowId);

  // The provider commits the charge, then dies before answering.
  expect(await first.exited).toBe(137);
  const record = await h.pool.query<{ status: string }>(`SELECT status FROM idempotency_store WHERE scope = 'order-step' AND key = $1`, [`${workflowId}:chargePayment`]);
  expect(record.rows).toEqual([{ status: 'STARTED' }]);

  // It comes back on the same address; the step's next attempt sends the same key.
  const second = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port });
  const final = await h.client.result(workflowId);

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'] });
  expect(await h.chargesOf(workflowId)).toMatchObject([{ status: 'succeeded', refunded: false }]);
  // The first process logged the charge it committed; the second answered the retry from its store.
  expect(first.output()).toMatch(new RegExp(`charge ch_\\w+ succeeded .*key ${workflowId}:chargePayment`));
  expect(second.output()).toMatch(new RegExp(`replayed.*${workflowId}:chargePayment`));
  second.child.kill('SIGTERM');
  await second.exited;
});

/** An order the stock refuses (short stock) once its payment was charged: it compensates, refunding the charge. */
const shortStock = () => order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] });

it('refunds once when the provider dies between committing a refund and answering it and the saga runs out of retries: redriven, the refund is answered from its store', { timeout: 120_000 }, async () => {
  const refundKey = `refund-crash-${randomUUID()}`;
  const sagaKey = `order-${refundKey}`;
  const crashing = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port, crashOnKey: `${sagaKey}:refundPayment` });

  const started = await h.client.start('order', shortStock(), { idempotencyKey: refundKey });
  expect(await crashing.exited).toBe(137);
  // Every attempt of the refund finds no provider: the saga waits for an operator, its row kept.
  const waiting = await eventually(
    () => h.client.status(sagaKey).then((s) => s.state),
    (s: SagaState) => s.phase === 'NEEDS_ATTENTION',
    'the saga to need attention',
  );
  expect(waiting).toMatchObject({ compensationsRun: ['releaseStock'], attention: { pending: ['refundPayment', 'undoEntity'] } });
  expect(await h.chargesOf(sagaKey)).toMatchObject([{ status: 'succeeded', refunded: true }]);

  const back = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port });
  const final = await h.client.redrive(sagaKey);

  expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['releaseStock', 'refundPayment', 'undoEntity'], attention: { redrives: 1 } });
  expect(await h.chargesOf(sagaKey)).toMatchObject([{ status: 'succeeded', refunded: true }]);
  expect(crashing.output()).toMatch(new RegExp(`refund ch_\\w+ refunded .*key ${sagaKey}:refundPayment`));
  expect(back.output()).toMatch(new RegExp(`replayed.*${sagaKey}:refundPayment`));
  expect((await h.rms.inspect(started.intentKey)).exists).toBe(false);
  back.child.kill('SIGTERM');
  await back.exited;
});

it('charges and refunds once when the provider dies with the charge unanswered while the saga\'s deadline passes: it ends EXPIRED', { timeout: 120_000 }, async () => {
  const chargeKey = `deadline-crash-${randomUUID()}`;
  const sagaKey = `order-${chargeKey}`;
  const crashing = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port, crashOnKey: `${sagaKey}:chargePayment` });

  const startedAt = Date.now();
  const started = await h.client.start('order', order(), { idempotencyKey: chargeKey, deadlineMs: 1000 });
  expect(await crashing.exited).toBe(137);
  // The provider stays away until the deadline has passed; the charge's next attempt then finds it.
  await delay(Math.max(0, startedAt + 1000 - Date.now()));
  const back = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port });
  const final = await h.client.result(sagaKey);

  expect(final).toMatchObject({ outcome: 'EXPIRED', reason: 'DEADLINE_EXCEEDED', stepsDone: ['chargePayment'], compensationsRun: ['refundPayment', 'undoEntity'] });
  expect(await h.chargesOf(sagaKey)).toMatchObject([{ status: 'succeeded', refunded: true }]);
  expect(back.output()).toMatch(new RegExp(`replayed.*${sagaKey}:chargePayment`));
  expect((await h.rms.inspect(started.intentKey)).exists).toBe(false);
  back.child.kill('SIGTERM');
  await back.exited;
});
