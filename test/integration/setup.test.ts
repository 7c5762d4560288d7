/**
 * `saga setup` against a namespace no one has made yet, on the run's Temporal dev server: the first
 * run makes the namespace (with its retention), the search attributes and the purge schedule; a
 * second run, by the CLI as an operator would run it, changes nothing and says so.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Config } from '../../src/config';
import { purgeScheduleId } from '../../src/schedules';
import { SetupError, setupCluster } from '../../src/setup';
import { SEARCH_ATTRIBUTES } from '../../src/shared';
import { dataConverterOf } from '../../src/temporal';
import { testConfig } from '../helpers/context';
import { envOf } from '../helpers/processes';

const SAGA = path.resolve(__dirname, '../../bin/saga');

let config: Config;
let connection: Connection;
beforeAll(async () => {
  config = testConfig('saga setup', { TEMPORAL_NAMESPACE: `setup-${randomUUID().slice(0, 8)}` });
  connection = await Connection.connect({ address: config.temporal.address });
});
afterAll(async () => {
  await connection?.operatorService.deleteNamespace({ namespace: config.temporal.namespace }).catch(() => undefined);
  await connection?.close();
});

it('refuses a namespace that does not exist unless asked to make it, and says how', async () => {
  await expect(setupCluster(config)).rejects.toThrow(SetupError);
  await expect(setupCluster(config)).rejects.toThrow(/does not exist: run with --create-namespace/);
});

it('makes the namespace, the search attributes and the schedule once; a second run changes nothing', { timeout: 90_000 }, async () => {
  const first = await setupCluster(config, { createNamespace: true, retention: '3d' });

  expect(first.items).toEqual([
    { kind: 'namespace', name: config.temporal.namespace, action: 'created', detail: 'retention 3d' },
    ...SEARCH_ATTRIBUTES.map((k) => ({ kind: 'search attribute', name: k.name, action: 'added', detail: 'Keyword' })),
    expect.objectContaining({ kind: 'schedule', name: purgeScheduleId(config.temporal.taskQueue), action: 'created' }),
  ]);
  expect(first.changes).toBe(6);

  // What the cluster now holds, read back from it.
  const described = await connection.workflowService.describeNamespace({ namespace: config.temporal.namespace });
  expect(Number(described.config?.workflowExecutionRetentionTtl?.seconds)).toBe(3 * 86_400);
  const attributes = await connection.operatorService.listSearchAttributes({ namespace: config.temporal.namespace });
  for (const key of SEARCH_ATTRIBUTES) expect(attributes.customAttributes?.[key.name], key.name).toBe(2 /* KEYWORD */);
  const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter: dataConverterOf(config) });
  const schedule = await client.schedule.getHandle(purgeScheduleId(config.temporal.taskQueue)).describe();
  expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'purgeIdempotencyStore', args: [{ olderThanMs: config.idempotencyRetentionMs }] });

  // Again, by the CLI: nothing to do.
  const { stdout } = await promisify(execFile)(SAGA, ['setup', '--create-namespace', '--retention', '3d', '--json'], { env: envOf(config) });
  const second = JSON.parse(stdout) as { changes: number; items: { action: string }[] };
  expect(second.changes).toBe(0);
  expect(second.items.map((i) => i.action)).toEqual(['present', 'present', 'present', 'present', 'present', 'unchanged']);

  // A new retention asked for is applied to the existing namespace.
  const third = await setupCluster(config, { retention: '4d' });
  expect(third.items[0]).toEqual({ kind: 'namespace', name: config.temporal.namespace, action: 'retention updated', detail: 'retention 3d → 4d' });
  expect(third.changes).toBe(1);
});

it('refuses a retention that is not a duration of at least a day, before reaching the cluster', async () => {
  await expect(setupCluster(config, { retention: 'soon' })).rejects.toThrow(/not a duration/);
  await expect(setupCluster(config, { retention: '2h' })).rejects.toThrow(/at least 1d/);
});
