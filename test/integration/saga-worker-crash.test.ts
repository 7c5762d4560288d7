import { afterAll, beforeAll, expect, it } from 'vitest';

import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { killWorkerProcesses, startWorkerProcess, workerRunning } from '../helpers/processes';
import { ordersTable } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  // A lease that outlives the heartbeat timeout plus a retry: the surviving worker can take over.
  h = await startHarness('saga worker crash', { worker: false, env: { LEASE_MS: '6000', HEARTBEAT_INTERVAL_MS: '300', HEARTBEAT_TIMEOUT_MS: '1500' } });
});
afterAll(async () => {
  killWorkerProcesses();
  await h?.stop();
});

it('finishes a saga whose worker was killed with SIGKILL mid-write on another worker: one row, no leaked lock', async () => {
  const workers = [await startWorkerProcess(h.config), await startWorkerProcess(h.config)];
  const started = await h.client.start('order', order({ simulate: { writeDelayMs: 4000 } }));
  expect(started.reservation.status).toBe('SUCCESS');
  // The worker running the write is the one whose identity (`<pid>@<host>`) the pending activity names.
  const { running: victim, other: survivor } = await workerRunning(h.client.temporal.workflow.getHandle(started.workflowId), 'writeEntity', workers);

  victim.child.kill('SIGKILL');
  expect(await victim.exited).toBeNull();
  const final = await h.client.result(started.workflowId);
  survivor.child.kill('SIGTERM');
  const exitCode = await survivor.exited;

  expect(final.outcome).toBe('COMPLETED');
  const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM orders WHERE intent_key = $1', [started.intentKey]);
  expect(rows[0]).toEqual({ n: 1 });
  expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'COMPLETED', lastFencingToken: final.fencingToken });
  const rms = await h.rms.inspect(started.intentKey);
  expect(rms.holder).toBeUndefined();
  expect(rms.exists).toBe(true);
  // SIGTERM is a graceful shutdown: the worker drains and exits cleanly.
  expect(exitCode).toBe(0);
  expect(survivor.output()).toContain('worker: stopped');
});
