/**
 * docs/temporal-clients.md's commands, run exactly as written: each line of its first `sh` block is
 * given to bash as it stands. The Temporal CLI takes the server and namespace from the environment
 * (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE: this run's), as it would from a user's; the commands name
 * the rest. So this file's worker serves the task queue they name (`reservation-saga`, in this run's
 * namespace of its own), and its codec server listens where they send payloads (make dev's
 * 127.0.0.1:8234, which must be free while the tests run).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { readableHistory } from '../../scripts/demo/temporal-cli';
import { createCodecServer, EncryptionCodec } from '../../src/codec';
import { requireCodecKeys } from '../../src/config';
import { codeBlocks, shellCommands } from '../helpers/markdown';
import { startHarness, type SagaHarness } from '../helpers/saga-harness';

const ROOT = path.resolve(__dirname, '../..');
const DOC = readFileSync(path.join(ROOT, 'docs/temporal-clients.md'), 'utf8');
const run = promisify(execFile);

let h: SagaHarness;
let codecServer: FastifyInstance | undefined;
beforeAll(async () => {
  h = await startHarness('temporal clients doc', { env: { TEMPORAL_TASK_QUEUE: 'reservation-saga' } });
  codecServer = createCodecServer({ codec: new EncryptionCodec(requireCodecKeys(h.config)), corsOrigins: [], namespaces: [h.config.temporal.namespace] });
  try {
    await codecServer.listen({ host: '127.0.0.1', port: 8234 });
  } catch (err) {
    throw new Error(`docs/temporal-clients.md names the codec server at 127.0.0.1:8234, and it is taken (make dev's? make dev-down frees it): ${(err as Error).message}`);
  }
});
afterAll(async () => {
  await codecServer?.close();
  await h?.stop();
});

/** Runs `line` with bash, the Temporal CLI on the PATH and this run's server in the environment. */
function shell(line: string) {
  const cli = inject('temporalCli');
  if (!cli) throw new Error('this test needs the Temporal CLI that scripts/ensure-temporal finds');
  const env = { ...process.env, PATH: `${path.dirname(cli)}:${process.env.PATH ?? ''}`, TEMPORAL_ADDRESS: h.config.temporal.address, TEMPORAL_NAMESPACE: h.config.temporal.namespace };
  return run('bash', ['-c', line], { env, maxBuffer: 64 * 1024 * 1024 });
}

it('runs as written: the saga reserves, answers, completes, and its stored history holds no card number', async () => {
  const block = codeBlocks(DOC).find((b) => b.lang === 'sh' && b.body.includes('temporal workflow start'));
  expect(block, 'an sh block with temporal workflow start').toBeDefined();
  const lines = shellCommands(block!.body).map((c) => c.line);
  expect(lines.map((l) => l.split(' ').slice(0, 3).join(' '))).toEqual(['temporal workflow start', 'temporal workflow update', 'temporal workflow result', 'temporal workflow show']);

  const outputs: string[] = [];
  for (const line of lines) outputs.push((await shell(line)).stdout);
  const [, answer, result, shown] = outputs;
  const workflowId = /--workflow-id (\S+)/.exec(lines[0]!)![1]!;
  const { stdout: stored } = await shell(`temporal workflow show --workflow-id ${workflowId} --output json`);

  expect(answer).toMatch(/status:SUCCESS/);
  expect(result).toMatch(/"outcome":\s*"COMPLETED"/);
  expect(shown).toContain('WorkflowExecutionCompleted');
  expect(readableHistory(stored)).toContain('workflowExecutionStartedEventAttributes');
  expect(readableHistory(stored)).not.toContain('4242424242424242');
  expect((await h.client.status(workflowId)).state).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'] });
});
