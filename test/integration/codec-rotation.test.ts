/**
 * Rotating the payload codec's keys: a saga started while every process knew only key A finishes on a
 * worker that knows B and A (B newest): B encrypts what it writes from then on, A still opens what was
 * written before. A worker without A cannot read that saga, and says which key it lacks.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { configEnv, loadConfig, type Config } from '../../src/config';
import { dataConverterOf } from '../../src/temporal';
import { createWorker } from '../../src/worker';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';

const keyA = `a:${randomBytes(32).toString('base64')}`;
const keyB = `b:${randomBytes(32).toString('base64')}`;

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('codec rotation', { worker: false, env: { SAGA_CODEC_KEYS: keyA } });
});
afterAll(async () => {
  await h?.stop();
});

/** The harness's config with other codec keys. */
const withKeys = (keys: string): Config => loadConfig({ ...configEnv(h.config), SAGA_CODEC_KEYS: keys });

async function runWorker<T>(config: Config, fn: () => Promise<T>): Promise<T> {
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  const app = await createWorker({ sagas: h.types, config, connection, workflowBundle: { codePath: inject('workflowBundlePath') } });
  try {
    return await app.worker.runUntil(fn);
  } finally {
    await app.close();
    await connection.close();
  }
}

/** The key ids of every encrypted payload in the saga's stored history. */
async function keyIds(workflowId: string): Promise<Set<string>> {
  const history = await h.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  const ids = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === 'object') {
      const id = (value as { metadata?: Record<string, Uint8Array> }).metadata?.['encryption-key-id'];
      if (id) ids.add(Buffer.from(id).toString());
      Object.values(value).forEach(visit);
    }
  };
  visit(history);
  return ids;
}

it('finishes a saga started under key A on a worker that encrypts with B and still decrypts A', async () => {
  // Started, written and finalised while A is the only key; each step then takes 3 s.
  const started = await h.client.start('order', order({ simulate: { stepDelayMs: 3000 } }));
  await runWorker(h.config, () => eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the steps to begin'));
  expect([...(await keyIds(started.workflowId))]).toEqual(['a']);

  // Rotation: every process now knows B (newest, encrypts) and A.
  const rotated = withKeys(`${keyB},${keyA}`);
  const client = new Client({ connection: h.client.temporal.connection, namespace: rotated.temporal.namespace, dataConverter: dataConverterOf(rotated) });
  const final = await runWorker(rotated, () => client.workflow.getHandle(started.workflowId).result());

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'] });
  expect([...(await keyIds(started.workflowId))].sort()).toEqual(['a', 'b']);
});

it('names the key it lacks when a payload was encrypted under a key it does not hold', async () => {
  const started = await h.client.start('order', order());
  await runWorker(h.config, () => h.client.result(started.workflowId));

  const onlyB = withKeys(keyB);
  const client = new Client({ connection: h.client.temporal.connection, namespace: onlyB.temporal.namespace, dataConverter: dataConverterOf(onlyB) });

  await expect(client.workflow.getHandle(started.workflowId).result()).rejects.toThrow('payload encrypted with unknown codec key "a"');
});
