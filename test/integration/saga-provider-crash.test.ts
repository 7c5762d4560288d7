/**
 * The order saga against the payment provider in a process of its own, killed after it committed
 * the charge and before it answered: the step's attempt sees the connection fail, the record stays
 * STARTED, and the retry (to the provider started again) sends the same key and is answered from the
 * provider's store. One charge, however the reply was lost.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { killProviderProcesses, startProviderProcess, type ProviderProcess } from '../helpers/provider-process';
import { freePort } from '../helpers/redis-servers';
import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { sagaTypesFor } from '../fixtures/orders';

const key = `crash-${randomUUID()}`;
const workflowId = `order-${key}`;
let port: number;
let first: ProviderProcess;
let h: SagaHarness;

beforeAll(async () => {
  port = await freePort();
  first = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port, crashOnKey: `${workflowId}:chargePayment` });
  // The harness's worker charges through the provider process that crashes, not the harness's own.
  h = await startHarness('saga provider crash', { sagaTypes: (config) => sagaTypesFor(config, first.url) });
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
