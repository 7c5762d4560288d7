import { afterAll, beforeAll, expect, it } from 'vitest';
import { ordersTable } from '../../src/db';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { startWorkerProcess } from '../helpers/processes';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga worker crash', { worker: false });
});
afterAll(async () => {
  await h?.stop();
});

it('finishes a saga whose worker was killed with SIGKILL mid-write on a second worker: one row, no leaked lock', async () => {
  const first = await startWorkerProcess(h.config);
  const started = await h.client.start('order', order({ simulate: { writeDelayMs: 4000 } }));
  expect(started.reservation.status).toBe('SUCCESS');
  await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'WRITING', 'the write to start');

  first.child.kill('SIGKILL');
  expect(await first.exited).toBeNull();
  const second = await startWorkerProcess(h.config);
  const final = await h.client.result(started.workflowId);
  second.child.kill('SIGTERM');
  const exitCode = await second.exited;

  expect(final.outcome).toBe('COMPLETED');
  const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM orders WHERE intent_key = $1', [started.intentKey]);
  expect(rows[0]).toEqual({ n: 1 });
  expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'COMPLETED', lastFencingToken: final.fencingToken });
  const rms = await h.rms.inspect(started.intentKey);
  expect(rms.holder).toBeUndefined();
  expect(rms.exists).toBe(true);
  // SIGTERM is a graceful shutdown: the worker drains and exits cleanly.
  expect(exitCode).toBe(0);
  expect(second.output()).toContain('worker: stopped');
});
