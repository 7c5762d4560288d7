/**
 * The worker processes of the Temporal benchmarks: saga workers (`src/worker.ts`) on one task queue and
 * bench workers (`bench/bare-worker.ts`) on another, scaled up together and stopped at the end.
 */
import type { Config } from '../../src/config';
import { startWorkerProcess, type WorkerProcess } from './processes';
import type { Progress } from './progress';

/** Saga workers and bench workers, as many of each. */
export class WorkerFleet {
  /** Config of the saga workers (and of the clients starting sagas). */
  readonly sagaConfig: Config;
  /** Config of the bench workers. */
  readonly bareConfig: Config;
  readonly #saga: WorkerProcess[] = [];
  readonly #bare: WorkerProcess[] = [];
  readonly #progress: Progress;
  #stopping: Promise<void> = Promise.resolve();

  constructor(config: Config, progress: Progress) {
    this.#progress = progress;
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
    for (let i = this.#saga.length; i < count; i++) {
      starts.push(startWorkerProcess('src/worker.ts', this.sagaConfig).then((w) => void this.#saga.push(w)));
      starts.push(startWorkerProcess('bench/bare-worker.ts', this.bareConfig).then((w) => void this.#bare.push(w)));
    }
    if (starts.length === 0) return;
    this.#progress.update(`starting worker processes: ${count} saga, ${count} bench (each bundles its workflows first)`);
    // allSettled: a process that starts after another failed must still be recorded, to be stopped.
    const failed = (await Promise.allSettled(starts)).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Stops every process (SIGTERM, then SIGKILL after the grace time). A second call, e.g. from a
   * signal handler while the first runs, waits for the processes the first is stopping too.
   */
  async stopAll(): Promise<void> {
    const all = [...this.#saga.splice(0), ...this.#bare.splice(0)];
    this.#stopping = Promise.all([this.#stopping, ...all.map((w) => w.stop())]).then(() => undefined);
    await this.#stopping;
  }
}
