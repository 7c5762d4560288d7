import { afterAll, beforeAll, expect, it } from 'vitest';

import { killWorkerProcesses, startWorkerProcess } from '../helpers/processes';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga stale holder', { worker: false });
});
afterAll(async () => {
  killWorkerProcesses();
  await h?.stop();
});

it('never lets a holder paused past its lease change the row or reservation of the newer holder', async () => {
  const cart = order({ simulate: { writeDelayMs: 2000 } });
  const paused = await startWorkerProcess(h.config);
  const first = await h.client.start('order', cart);
  expect(first.reservation.status).toBe('SUCCESS');
  // The write holds its own lease once its first extension replaced the gate's pickup lease (5
  // minutes); the WRITING phase alone is entered before the activity has run that far.
  await eventually(() => h.rms.inspect(first.intentKey), (i) => i.holder !== undefined && i.holder.remainingMs <= h.config.saga.leaseMs, 'the first write to hold its own lease');

  // The first holder stops mid-write (its row written, uncommitted) for longer than its lease.
  paused.child.kill('SIGSTOP');
  await eventually(() => h.rms.inspect(first.intentKey), (i) => i.holder === undefined, 'the lease to expire', 20_000);
  await startWorkerProcess(h.config);
  const second = await h.client.start('order', { ...cart, simulate: undefined });
  expect(second.reservation.status).toBe('SUCCESS');
  expect(BigInt((second.reservation as { fencingToken: string }).fencingToken)).toBeGreaterThan(
    BigInt((first.reservation as { fencingToken: string }).fencingToken),
  );
  // The stale holder wakes up while the newer one is writing.
  paused.child.kill('SIGCONT');
  const [firstFinal, secondFinal] = await Promise.all([h.client.result(first.workflowId), h.client.result(second.workflowId)]);

  expect(firstFinal.outcome).toBe('COMPENSATED');
  expect(secondFinal.outcome).toBe('COMPLETED');
  const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM orders WHERE intent_key = $1', [first.intentKey]);
  expect(rows[0]).toEqual({ n: 1 });
  expect(await ordersTable.find(h.pool, first.intentKey)).toMatchObject({ status: 'COMPLETED', lastFencingToken: secondFinal.fencingToken });
  const rms = await h.rms.inspect(first.intentKey);
  expect(rms).toMatchObject({ exists: true, existsToken: secondFinal.fencingToken });
  expect(rms.holder).toBeUndefined();
});
