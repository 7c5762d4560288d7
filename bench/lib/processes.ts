/**
 * Worker child processes: node with tsx's loader (one process, so a SIGKILL reaches the worker and
 * not a wrapper), ready when they print their polling line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { configEnv, type Config } from '../../src/config';
import { PROJECT_ROOT } from '../../src/paths';

/** A running worker process. */
export interface WorkerProcess {
  child: ChildProcess;
  /** Stops it (SIGTERM, then SIGKILL after `graceMs`) and waits for it to exit. */
  stop: (graceMs?: number) => Promise<void>;
}

/**
 * The last `chars` characters `child` wrote to stdout and stderr, on demand: for the error of a child
 * that failed, without a long-running child growing the bench's memory.
 */
export function outputTail(child: ChildProcess, chars = 8192): () => string {
  let output = '';
  const collect = (d: Buffer) => {
    output = (output + d.toString()).slice(-chars);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return () => output;
}

/** The environment that points a worker process at `config` (every variable src/config.ts reads). */
export function workerEnv(config: Config): NodeJS.ProcessEnv {
  return { ...process.env, ...configEnv(config) };
}

/**
 * Starts `node --import tsx <script>` (a path from the project root) with `config`'s environment (and
 * `env` over it) and resolves once it prints `worker: polling` on stderr; rejects with its output if it exits first or
 * takes longer than `readyTimeoutMs`, or when `signal` aborts (it is stopped first in every case).
 */
export async function startWorkerProcess(
  script: string,
  config: Config,
  options: { readyTimeoutMs?: number; signal?: AbortSignal; env?: NodeJS.ProcessEnv } = {},
): Promise<WorkerProcess> {
  const { readyTimeoutMs = 120_000, signal, env = {} } = options;
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, script)], {
    cwd: PROJECT_ROOT,
    env: { ...workerEnv(config), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = outputTail(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (graceMs = 15_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${script} not polling after ${readyTimeoutMs} ms:\n${output()}`)), readyTimeoutMs);
      child.stderr.on('data', () => {
        if (output().includes('worker: polling')) {
          clearTimeout(timer);
          resolve();
        }
      });
      // Stopped while starting (Ctrl-C while it bundles): it is not anyone's to stop yet, so it stops here.
      signal?.addEventListener('abort', () => reject(new Error(`${script}: stopped while starting`)), { once: true });
      if (signal?.aborted) reject(new Error(`${script}: stopped while starting`));
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`${script} exited (${child.exitCode ?? child.signalCode}) before polling:\n${output()}`));
      });
    });
  } catch (err) {
    await stop(1000);
    throw err;
  }
  return { child, stop };
}
