/**
 * The worker processes of the Temporal benchmarks: saga workers (`src/worker.ts`) on one task queue and
 * bench workers (`bench/bare-worker.ts`) on another, scaled up together and stopped at the end.
 */
import type { Config } from '../../src/config';
import { startWorkerProcess, type WorkerProcess } from './processes';
import type { Progress } from './progress';

/** Saga workers and bench workers, as many of each (or saga workers only, see the constructor). */
export class WorkerFleet {
  /** Config of the saga workers (and of the clients starting sagas). */
  readonly sagaConfig: Config;
  /** Config of the bench workers. */
  readonly bareConfig: Config;
  readonly #saga: WorkerProcess[] = [];
  readonly #bare: WorkerProcess[] = [];
  readonly #progress: Progress;
  readonly #withBare: boolean;
  readonly #label: string;
  #stopping: Promise<void> = Promise.resolve();
  /** Aborted by stopAll: processes still starting stop themselves (see startWorkerProcess). */
  #starts = new AbortController();
  readonly #pending = new Set<Promise<unknown>>();

  /**
   * `bare: false`: saga workers only (benchmarks that never start a bare workflow); `label` names the
   * fleet in the progress line.
   */
  constructor(config: Config, progress: Progress, { bare = true, label = '' }: { bare?: boolean; label?: string } = {}) {
    this.#progress = progress;
    this.#withBare = bare;
    this.#label = label;
    this.sagaConfig = {
      ...config,
      temporal: { ...config.temporal, taskQueue: `${config.temporal.taskQueue}-saga` },
      redis: { ...config.redis, keyPrefix: `${config.redis.keyPrefix}saga:` },
    };
    this.bareConfig = { ...config, temporal: { ...config.temporal, taskQueue: `${config.temporal.taskQueue}-bare` } };
  }

  /** Process ids of the saga workers (tsx wrappers; their node processes are their children). */
  get sagaPids(): number[] {
    return this.#saga.flatMap((w) => (w.child.pid === undefined ? [] : [w.child.pid]));
  }

  /** Process ids of the bench workers. */
  get barePids(): number[] {
    return this.#bare.flatMap((w) => (w.child.pid === undefined ? [] : [w.child.pid]));
  }

  /** Starts processes until `count` of each kind poll (they start in parallel; each bundles its workflows). */
  async scaleTo(count: number): Promise<void> {
    const starts: Promise<void>[] = [];
    const { signal } = this.#starts;
    const start = (script: string, config: Config, into: WorkerProcess[]) => {
      const started = startWorkerProcess(script, config, { signal }).then((w) => void into.push(w));
      this.#pending.add(started);
      void started.catch(() => undefined).finally(() => this.#pending.delete(started));
      starts.push(started);
    };
    for (let i = this.#saga.length; i < count; i++) {
      start('src/worker.ts', this.sagaConfig, this.#saga);
      if (this.#withBare) start('bench/bare-worker.ts', this.bareConfig, this.#bare);
    }
    if (starts.length === 0) return;
    const what = this.#withBare ? `${count} saga, ${count} bench` : `${count} saga`;
    this.#progress.update(`starting worker processes${this.#label ? ` ${this.#label}` : ''}: ${what} (each bundles its workflows first)`);
    // allSettled: a process that starts after another failed must still be recorded, to be stopped.
    const failed = (await Promise.allSettled(starts)).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Stops every process (SIGTERM, then SIGKILL after the grace time). A second call, e.g. from a
   * signal handler while the first runs, waits for the processes the first is stopping too.
   */
  async stopAll(): Promise<void> {
    // Processes still starting stop themselves; wait for that before the ones that poll.
    this.#starts.abort();
    this.#starts = new AbortController();
    await Promise.allSettled([...this.#pending]);
    const all = [...this.#saga.splice(0), ...this.#bare.splice(0)];
    this.#stopping = Promise.all([this.#stopping, ...all.map((w) => w.stop())]).then(() => undefined);
    await this.#stopping;
  }
}

/** The name of a case by its worker processes of each kind, e.g. `2 worker processes`. */
export function workerProcesses(count: number): string {
  return `${count} worker process${count === 1 ? '' : 'es'}`;
}
