/** Worker processes of the project's own, for tests that kill or stop them. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { inject } from 'vitest';
import { configEnv, type Config } from '../../src/config';
import { eventually } from './saga-harness';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The environment that points a child process at a test's config: every config variable, so a
 * harness's SAGA_SIMULATIONS reaches its worker processes too.
 */
export function envOf(config: Config): NodeJS.ProcessEnv {
  return { ...process.env, ...configEnv(config) };
}

const spawned = new Set<ChildProcess>();

/** Kills every worker process a test started and did not see exit (for afterAll). */
export function killWorkerProcesses(): void {
  for (const child of spawned) child.kill('SIGKILL');
}

/**
 * A worker process (as `npm run worker` starts it), with `env` added to its config's; resolves once it
 * polls. `prebundled`: on the workflow code the run bundled once (test/helpers/worker-process.ts), which
 * starts in seconds where bundling the sources takes most of a minute on a loaded machine.
 */
export async function startWorkerProcess(
  config: Config,
  env: NodeJS.ProcessEnv = {},
  options: { prebundled?: boolean } = {},
): Promise<{ child: ChildProcess; exited: Promise<number | null>; output: () => string }> {
  const entry = options.prebundled ? path.join(__dirname, 'worker-process.ts') : path.join(ROOT, 'src/worker.ts');
  // One process (node with tsx's loader), so signals reach the worker itself, not a wrapper.
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    env: { ...envOf(config), ...(options.prebundled ? { WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath') } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  spawned.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      spawned.delete(child);
      resolve(code);
    }),
  );
  await new Promise<void>((resolve, reject) => {
    const onData = () => {
      if (output.includes('worker: polling')) resolve();
    };
    child.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`worker exited (${code}) before polling:\n${output}`)));
  });
  return { child, exited, output: () => output };
}

/** A worker process of {@link startWorkerProcess}. */
export type WorkerProcess = Awaited<ReturnType<typeof startWorkerProcess>>;

/**
 * Of `workers`, the one running the saga's pending `activity` (the worker whose identity,
 * `<pid>@<host>`, the pending activity names once one picked it up), and another one.
 */
export async function workerRunning(handle: WorkflowHandle, activity: string, workers: readonly WorkerProcess[]): Promise<{ running: WorkerProcess; other: WorkerProcess }> {
  const identity = await eventually(
    async () => (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === activity)?.lastWorkerIdentity ?? '',
    (id) => id !== '',
    `${activity} to be picked up by a worker`,
  );
  const running = workers.find((w) => identity.startsWith(`${w.child.pid}@`));
  const other = workers.find((w) => w !== running);
  if (!running || !other) throw new Error(`${activity} runs on ${identity}: none of the ${workers.length} workers, or no other one`);
  return { running, other };
}
