/**
 * The hand-written baseline's services (saga-throughput): a database of its own on the run's server
 * (`<run's database>_baseline`: the tables of BASELINE_SCHEMA_SQL and the payment provider's schema),
 * a payment provider on it in this process (as the order saga's runs here), and baseline worker
 * processes (bench/baseline-worker.ts) on a task queue of their own. A database of its own, so that
 * pg_stat_database counts the baseline's transactions apart from the saga's, in the same rounds.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import pg from 'pg';
import type { Config } from '../../src/config';
import { ensureDatabase } from '../../src/db/migrate';
import { createProviderServer, DECLINED_CARD, ensureProviderSchema } from '../../test/fixtures/orders';
import { BASELINE_SCHEMA_SQL } from '../baseline-activities';
import type { BaselineOrder, BaselineResult } from '../baseline-shared';
import { baselineOrderWorkflow } from '../baseline-workflow';
import { dropDatabases } from './environment';
import { startWorkerProcess, type WorkerProcess } from './processes';
import type { Progress } from './progress';
import { freshOrder } from './temporal-load';

/** The baseline's database, provider and worker processes. */
export interface Baseline {
  /** The config of the baseline workers: the run's, with the baseline's task queue and database. */
  config: Config;
  /** Process ids of the baseline workers. */
  readonly pids: number[];
  /** Starts worker processes until `count` poll. */
  scaleTo: (count: number) => Promise<void>;
  /** Places `order` under a new order key and waits for its end. */
  order: (client: Client, order?: BaselineOrder) => Promise<{ workflowId: string; result: BaselineResult }>;
  /** Stops the workers and the provider, drops the database. A second call waits for the first. */
  close: () => Promise<void>;
}

/** Sets up the baseline beside the run's services of `config` (no worker process yet: {@link Baseline.scaleTo}). */
export async function startBaseline(config: Config, progress: Progress): Promise<Baseline> {
  const url = new URL(config.db.url);
  const database = `${url.pathname.slice(1)}_baseline`;
  url.pathname = `/${database}`;
  const workerConfig: Config = {
    ...config,
    temporal: { ...config.temporal, taskQueue: `${config.temporal.taskQueue}-baseline` },
    db: { ...config.db, url: url.toString() },
  };
  const workers: WorkerProcess[] = [];
  const pending = new Set<Promise<unknown>>();
  const starts = new AbortController();
  let pool: pg.Pool | undefined;
  let provider: ReturnType<typeof createProviderServer> | undefined;
  let created = false;
  let closing: Promise<void> | undefined;
  const closeOnce = async () => {
    starts.abort();
    await Promise.allSettled([...pending]);
    await Promise.allSettled(workers.splice(0).map((w) => w.stop()));
    await provider?.close().catch((err: unknown) => progress.log(`bench: baseline payment provider: ${String(err)}`));
    await pool?.end().catch(() => undefined);
    if (created) await dropDatabases(config.db.url, [database]).catch((err: unknown) => progress.log(`bench: drop database ${database}: ${String(err)}`));
  };
  const close = () => (closing ??= closeOnce());

  try {
    progress.update(`saga-throughput: creating database ${database} for the hand-written baseline`);
    created = await ensureDatabase(url.toString());
    pool = new pg.Pool({ connectionString: url.toString(), max: 8 });
    pool.on('error', (err) => progress.log(`bench: baseline payment provider pool: ${err.message}`));
    await pool.query(BASELINE_SCHEMA_SQL);
    await ensureProviderSchema(pool);
    provider = createProviderServer({ pool });
    await provider.listen({ host: '127.0.0.1', port: 0 });
  } catch (err) {
    await close();
    throw err;
  }
  const providerUrl = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;

  return {
    config: workerConfig,
    get pids() {
      return workers.flatMap((w) => (w.child.pid === undefined ? [] : [w.child.pid]));
    },
    async scaleTo(count) {
      const started: Promise<void>[] = [];
      for (let i = workers.length; i < count; i++) {
        const start = startWorkerProcess('bench/baseline-worker.ts', workerConfig, { signal: starts.signal, env: { PAYMENT_PROVIDER_URL: providerUrl } }).then(
          (w) => void workers.push(w),
        );
        pending.add(start);
        void start.catch(() => undefined).finally(() => pending.delete(start));
        started.push(start);
      }
      if (started.length === 0) return;
      progress.update(`starting worker processes: ${count} baseline (each bundles its workflow first)`);
      const failed = (await Promise.allSettled(started)).find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
    async order(client, order = freshOrder()) {
      const workflowId = `bench-baseline-${randomUUID()}`;
      const result = await client.workflow.execute(baselineOrderWorkflow, { taskQueue: workerConfig.temporal.taskQueue, workflowId, args: [order] });
      return { workflowId, result };
    },
    close,
  };
}

/**
 * Checks that the baseline gives the answers a team's would, before it is measured: an order
 * completes; the same cart again is a DUPLICATE (the unique index); a declined card fails the order,
 * whose refund finds nothing to refund; a short stock fails it after the charge, which is refunded;
 * a failed order's cart can be ordered again. Throws, naming the case, on any other answer.
 */
export async function checkBaseline(client: Client, baseline: Baseline): Promise<void> {
  const expect = async (what: string, order: BaselineOrder, wanted: BaselineResult) => {
    const { workflowId, result } = await baseline.order(client, order);
    const got = result.outcome === 'FAILED' ? { outcome: result.outcome, failure: result.failure, compensations: result.compensations } : { outcome: result.outcome };
    const want = wanted.outcome === 'FAILED' ? { outcome: wanted.outcome, failure: wanted.failure, compensations: wanted.compensations } : { outcome: wanted.outcome };
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      throw new Error(`saga-throughput: the hand-written baseline's ${what} (${workflowId}) answered ${JSON.stringify(result)}, not ${JSON.stringify(want)}`);
    }
  };
  const completed: BaselineResult = { outcome: 'COMPLETED' };
  const order = freshOrder();
  await expect('first order', order, completed);
  await expect('same cart again', order, { outcome: 'DUPLICATE', reason: '' });
  const declined = { ...freshOrder(), payment: { card: DECLINED_CARD } };
  await expect('declined card', declined, { outcome: 'FAILED', reason: '', failure: 'PAYMENT_DECLINED', compensations: ['refundPayment: nothing_to_refund'] });
  await expect('order of a failed order’s cart', { ...declined, payment: order.payment }, completed);
  const short = { ...freshOrder(), items: [{ sku: 'rare-coin', quantity: 2, priceCents: 500 }] };
  await expect('short stock', short, { outcome: 'FAILED', reason: '', failure: 'OUT_OF_STOCK', compensations: ['releaseStock: 0 line(s)', 'refundPayment: refunded'] });
}
