import { afterAll, beforeAll, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createPool } from '../../src/db/pool';

import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { ordersTable } from '../fixtures/orders';

let proxy: TcpProxy;
let h: SagaHarness;
beforeAll(async () => {
  const direct = new URL(inject('databaseUrl'));
  proxy = await startTcpProxy(Number(direct.port || 5432));
  const viaProxy = new URL(direct);
  viaProxy.port = String(proxy.port);
  h = await startHarness('saga postgres outage', { env: { DATABASE_URL: viaProxy.toString() } });
});
afterAll(async () => {
  await h?.stop();
  await proxy?.close();
});

it('survives PostgreSQL going away mid-write: the write is retried under the same token, one row, no leaked lock', async () => {
  const started = await h.client.start('order', order({ simulate: { writeDelayMs: 1500 } }));
  await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'WRITING', 'the write to start');

  proxy.cut();
  await new Promise((r) => setTimeout(r, 1000)); // the outage lasts a second: less than the lease, more than a beat
  proxy.restore();
  const final = await h.client.result(started.workflowId);

  expect(final.outcome).toBe('COMPLETED');
  const direct = createPool({ url: inject('databaseUrl'), poolMax: 1, statementTimeoutMs: 5000, connectTimeoutMs: 5000, idleInTransactionTimeoutMs: 30_000 });
  try {
    const { rows } = await direct.query('SELECT count(*)::int AS n FROM orders WHERE intent_key = $1', [started.intentKey]);
    expect(rows[0]).toEqual({ n: 1 });
    expect(await ordersTable.find(direct, started.intentKey)).toMatchObject({ status: 'COMPLETED', lastFencingToken: final.fencingToken });
  } finally {
    await direct.end();
  }
  const history = await h.client.temporal.workflow.getHandle(started.workflowId).fetchHistory();
  const writeAttempts = (history.events ?? []).find((e) => e.activityTaskStartedEventAttributes && e.activityTaskStartedEventAttributes.attempt! > 1);
  expect(writeAttempts).toBeDefined();
  expect((await h.rms.inspect(started.intentKey)).holder).toBeUndefined();
});
