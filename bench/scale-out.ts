/**
 * Benchmark 9: scale-out. Completed `order` sagas per second with 1, 2 and 4 saga worker processes, on
 * the run's dev server and on a real Temporal server the benchmark starts itself (PostgreSQL, 4 history
 * shards: the stack's config), in one run: saga-throughput's closed loop, and CPU by process to say
 * where the time goes (on 2 cores the machine is the ceiling).
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { SagaClient } from '../src/client';
import type { Config } from '../src/config';
import { createRedis } from '../src/rms';
import { CpuMeter, childrenCalled, postgresServing, postmaster, treesOf } from './lib/cpu';
import { postgresDatabaseClient } from './lib/environment';
import { formatNumber, formatRatio, latencyColumns, ratioTarget, roundRatio, type BenchResult, type Figure, type Row } from './lib/report';
import { runRounds, type BenchContext, type RoundFigures } from './lib/rounds';
import { spread } from './lib/stats';
import { closedLoopContender, completeOrderSaga } from './lib/temporal-load';
import { serverBinaries, shardsOf, stackHistoryShards, startRealServer, type RealServer } from './lib/temporal-server';
import { WorkerFleet, workerProcesses } from './lib/workers';
import { sagaTypesFor } from '../test/fixtures/orders';

const DEV = 'dev server';
const REAL = 'real server';
/** The target of the issue: the real server completes at least 0.9× the sagas per second of the dev server. */
const MIN_REAL_RATIO = 0.9;

/** The CPU components of the note, in print order: meter key → what it is. */
const COMPONENTS: [string, string][] = [
  ['dev', 'dev server'],
  ['real', 'real server'],
  ['devWorkers', 'saga workers (dev)'],
  ['realWorkers', 'saga workers (real)'],
  ['pgTemporal', 'PostgreSQL for the real server'],
  ['pgRest', 'PostgreSQL, the rest'],
  ['redis', 'Redis'],
  ['bench', 'client + payment provider'],
];

/** `config` with its own task queue and Redis prefix under the run's, and small PostgreSQL pools. */
function fleetConfig(config: Config, name: string, poolMax: number, temporal: Partial<Config['temporal']> = {}): Config {
  return {
    ...config,
    temporal: { ...config.temporal, ...temporal, taskQueue: `${config.temporal.taskQueue}-${name}` },
    redis: { ...config.redis, keyPrefix: `${config.redis.keyPrefix}${name}:` },
    db: { ...config.db, poolMax },
  };
}

/** Peak PostgreSQL connections: of the whole server, and of each of the run's databases. */
interface ConnectionPeak {
  total: number;
  max: number;
  byDatabase: Record<string, number>;
}

/** The most PostgreSQL connections seen at once (sampled every second): the run's share of max_connections. */
function connectionSampler(config: Config, databasePrefix: string): { stop: () => Promise<ConnectionPeak> } {
  // On the postgres database: the run's own is dropped WITH (FORCE) at the end, which would end this connection.
  const client = postgresDatabaseClient(config.db.url);
  client.on('error', () => undefined);
  const peak: ConnectionPeak = { total: 0, max: 0, byDatabase: {} };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const sample = async () => {
    const { rows } = await client.query<{ datname: string | null; n: number }>(`select datname, count(*)::int as n from pg_stat_activity group by datname`);
    peak.total = Math.max(peak.total, rows.reduce((a, r) => a + r.n, 0));
    for (const r of rows) {
      if (r.datname?.startsWith(databasePrefix)) peak.byDatabase[r.datname] = Math.max(peak.byDatabase[r.datname] ?? 0, r.n);
    }
  };
  const ready = client.connect().then(async () => {
    peak.max = Number((await client.query<{ max_connections: string }>('show max_connections')).rows[0]!.max_connections);
    const tick = () => {
      if (stopped) return;
      void sample()
        .catch(() => undefined)
        .finally(() => {
          if (!stopped) timer = setTimeout(tick, 1000);
        });
    };
    tick();
  });
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await ready.catch(() => undefined);
      await client.end().catch(() => undefined);
      return peak;
    },
  };
}

/** One real server's measurements (its shard count and version in `server`), each count's rounds beside the dev server's of the same rounds. */
interface RealPass {
  server: RealServer;
  /** Its case in the table, e.g. `real server (v1.29.1, PostgreSQL, 4 shards)`. */
  label: string;
  real: Map<number, RoundFigures[]>;
  dev: Map<number, RoundFigures[]>;
  timingMs: number;
}

/** Runs benchmark 9. */
export async function scaleOut({ config, sizes, progress, workers, onCleanup }: BenchContext): Promise<BenchResult> {
  const { rounds, workerCounts, perRound, inFlight, roundMs, workerPoolMax, clientPoolMax, realServer, historyShards } = sizes.scaleOut;
  const load = { inFlight, perRound, roundMs };
  // Earlier benchmarks' worker processes would poll, idle, beside the ones measured: stopped (a later benchmark scales them up again).
  await workers.stopAll();

  const binaries = serverBinaries(realServer === 'build');
  let skipped: string | undefined;
  if ('missing' in binaries) {
    if (realServer === 'build') throw new Error(`scale-out: no Temporal server to measure: ${binaries.missing}`);
    skipped = `the Temporal server's binaries are not built (${binaries.missing}): the real server's rows are left out of this run`;
    progress.log(`scale-out: ${skipped}`);
  }
  // One real server per shard count, one after another; without the binaries, none.
  const shardCounts = 'missing' in binaries ? [] : (historyShards ?? [stackHistoryShards()]);
  const several = shardCounts.length > 1;

  const runDatabase = new URL(config.db.url).pathname.slice(1);
  const devConfig = fleetConfig(config, 'scale-dev', workerPoolMax);
  const devFleet = new WorkerFleet(devConfig, progress, { bare: false, label: 'on the dev server' });
  onCleanup(() => devFleet.stopAll());
  // The real server of the pass under way (one at a time: each holds some 30 PostgreSQL connections).
  let real: RealServer | undefined;
  let realFleet: WorkerFleet | undefined;
  const clients: SagaClient[] = [];
  const redis = createRedis(config.redis) as Redis;
  const connections = connectionSampler(config, runDatabase);
  onCleanup(async () => void (await connections.stop()));
  const isTemporalDatabase = (database: string) => database === `${runDatabase}_temporal` || database === `${runDatabase}_visibility`;
  const meter = new CpuMeter(
    redis,
    {
      dev: childrenCalled('temporal'),
      real: treesOf(() => (real ? [real.pid] : [])),
      devWorkers: treesOf(() => devFleet.sagaPids),
      realWorkers: treesOf(() => realFleet?.sagaPids ?? []),
      pgTemporal: postgresServing(isTemporalDatabase, true),
      pgRest: postgresServing(isTemporalDatabase, false),
    },
    // The real server's pools (maxIdleConns below maxConns) close and open backends all the time: their CPU is only seen once reaped.
    { machine: true, reaped: { pgExited: postmaster() } },
  );
  /** The dev server's rounds of every pass, by count. */
  const devResults = new Map<number, RoundFigures[]>();
  const passes: RealPass[] = [];
  const workerStarts: Record<string, number> = {};
  let peak: ConnectionPeak = { total: 0, max: 0, byDatabase: {} };
  try {
    const devClient = await SagaClient.connect({ sagas: sagaTypesFor(devFleet.sagaConfig), config: { ...devFleet.sagaConfig, db: { ...devFleet.sagaConfig.db, poolMax: clientPoolMax } } });
    clients.push(devClient);
    const devContender = closedLoopContender(DEV, meter, load, () => completeOrderSaga(devClient, `scale-out (${DEV})`));
    // Without a real server, one pass of the dev server alone.
    for (const [i, shards] of (shardCounts.length > 0 ? shardCounts : [undefined]).entries()) {
      const contenders = [devContender];
      let pass: RealPass | undefined;
      let realClient: SagaClient | undefined;
      try {
        if (shards !== undefined && !('missing' in binaries)) {
          const t0 = performance.now();
          // The saga workers' task queue, for the purge schedule setup makes (as the stack's setup does for its workers).
          const queue = `${config.temporal.taskQueue}-scale-real-saga`;
          real = await startRealServer({ config: { ...config, temporal: { ...config.temporal, taskQueue: queue } }, progress, binaries, onCleanup, historyShards: shards });
          const label = `real server (${real.version}, PostgreSQL, ${shardsOf(shards)})`;
          pass = { server: real, label, real: new Map(), dev: new Map(), timingMs: performance.now() - t0 };
          passes.push(pass);
          realFleet = new WorkerFleet(fleetConfig(config, 'scale-real', workerPoolMax, { address: real.address, namespace: real.namespace }), progress, {
            bare: false,
            label: `on the real server (${shardsOf(shards)})`,
          });
          const fleet = realFleet;
          onCleanup(() => fleet.stopAll());
          const sagas = await SagaClient.connect({ sagas: sagaTypesFor(realFleet.sagaConfig), config: { ...realFleet.sagaConfig, db: { ...realFleet.sagaConfig.db, poolMax: clientPoolMax } } });
          realClient = sagas;
          contenders.push(closedLoopContender(REAL, meter, load, () => completeOrderSaga(sagas, `scale-out (${label})`)));
        }
        // Every pass starts the dev server's fleet again from its first count, as the real server's.
        if (i > 0) await devFleet.stopAll();
        const fleets = [devFleet, ...(realFleet ? [realFleet] : [])];
        for (const count of workerCounts) {
          // Both fleets grow together (their processes bundle the workflow code in parallel), then both are measured in every round.
          const t0 = performance.now();
          await Promise.all(fleets.map((fleet) => fleet.scaleTo(count)));
          const which = `${workerProcesses(count)}${several && shards !== undefined ? `, real server with ${shardsOf(shards)}` : ''}`;
          workerStarts[which] = performance.now() - t0;
          const byContender = await runRounds(contenders, rounds, progress, `scale-out ${which}`);
          const dev = byContender.get(DEV)!;
          devResults.set(count, [...(devResults.get(count) ?? []), ...dev]);
          if (pass) {
            pass.dev.set(count, dev);
            pass.real.set(count, byContender.get(REAL)!);
          }
        }
      } finally {
        await realClient?.close().catch(() => undefined);
        await realFleet?.stopAll();
        await real?.close();
        realFleet = undefined;
        real = undefined;
      }
    }
  } finally {
    peak = await connections.stop();
    for (const c of clients) await c.close().catch(() => undefined);
    redis.disconnect();
    await realFleet?.stopAll();
    await devFleet.stopAll();
    await real?.close();
  }

  // Rows: a case per server, a row per worker count; the ratio of each figure is to the 1-worker row of
  // the same server, as a ratio of medians (the counts ran minutes apart, so their rounds do not pair).
  const COLUMNS = ['throughput', 'p50', 'p99'];
  const rows: Row[] = [];
  const servers: { label: string; byCount: Map<number, RoundFigures[]> }[] = [{ label: DEV, byCount: devResults }, ...passes.map((p) => ({ label: p.label, byCount: p.real }))];
  for (const { label, byCount } of servers) {
    const base = byCount.get(workerCounts[0]!);
    for (const [count, figures] of byCount) {
      const metrics = Object.keys(figures[0] ?? {});
      rows.push({
        case: label,
        contender: workerProcesses(count),
        baseline: count === workerCounts[0],
        figures: metrics.map((metric): Figure => {
          const f = spread(figures.map((r) => r[metric]!));
          const b = base && count !== workerCounts[0] && COLUMNS.includes(metric) ? spread(base.map((r) => r[metric]!)) : undefined;
          return b && b.median > 0 ? { metric, ...f, ratio: f.median / b.median } : { metric, ...f };
        }),
      });
    }
  }

  const median = (figures: RoundFigures[] | undefined, metric: string) => (figures ? spread(figures.map((r) => r[metric] ?? Number.NaN)).median : Number.NaN);
  const notes: string[] = [];
  // Real ÷ dev at the same count: both ran in every round of the pass, back to back, so those rounds pair.
  const targets = [];
  for (const pass of passes) {
    const realVsDev = [...pass.real].map(([count, r]) => ({ count, ratio: roundRatio(spread(r.map((x) => x.throughput!)), spread(pass.dev.get(count)!.map((x) => x.throughput!))) }));
    targets.push(
      ...realVsDev.map(({ count, ratio }) => ratioTarget(pass.label, workerProcesses(count), `≥ ${MIN_REAL_RATIO}× dev server (paired rounds)`, ratio, ratio >= MIN_REAL_RATIO)),
    );
    const parts = realVsDev.map(({ count, ratio }) => `${count}: ${formatRatio(ratio)}`);
    notes.push(
      `Real server${several ? ` with ${shardsOf(pass.server.historyShards)}` : ''} ÷ dev server, completed/s at the same number of worker processes ` +
        `(median of the per-round ratios; both ran back to back in every round): ${parts.join(', ')}.`,
    );
  }
  if (several) {
    notes.push(
      `The real servers ran one after another, each with the dev server beside it in the same rounds (the dev server's rows hold every pass's rounds); ` +
        `a shard count's real ÷ dev is its own pass's, so the passes compare through the dev server, not through the clock.`,
    );
  }
  const cores = os.cpus().length;
  const byServer: { server: string; byCount: Map<number, RoundFigures[]> }[] = [
    { server: DEV, byCount: devResults },
    ...passes.map((p) => ({ server: several ? `real server, ${shardsOf(p.server.historyShards)}` : REAL, byCount: p.real })),
  ];
  for (const { server, byCount } of byServer) {
    for (const [count, figures] of byCount) {
      const parts = COMPONENTS.map(([key, label]) => ({ label, ms: median(figures, `cpu:${key}`) })).filter((p) => Number.isFinite(p.ms));
      const ours = parts.reduce((a, p) => a + p.ms, 0);
      const machine = median(figures, 'cpu:machine');
      const top = [...parts].sort((a, b) => b.ms - a.ms)[0];
      const throughput = median(figures, 'throughput');
      notes.push(
        `Where the time goes, ${server}, ${workerProcesses(count)}: CPU ms per completed saga (median of rounds): ` +
          `${parts.map((p) => `${p.label} ${formatNumber(p.ms, 1)}`).join(', ')}; ours ${formatNumber(ours, 1)}; ` +
          `PostgreSQL backends that exited during the round, of any database (not in the figures before) ${formatNumber(median(figures, 'cpu:pgExited'), 1)}; ` +
          `the whole machine ${formatNumber(machine, 1)} (the rest is other work on the machine). The machine was ${formatNumber(median(figures, 'busy'), 0)}% busy on ${cores} cores; ` +
          `${cores} cores ÷ ${formatNumber(ours, 1)} ms = ${formatNumber((cores * 1000) / ours, 1)} sagas/s if nothing else ran, against ${formatNumber(throughput, 1)} measured; ` +
          `the largest share: ${top ? `${top.label} (${formatNumber((top.ms / ours) * 100, 0)}%)` : 'n/a'}.`,
      );
    }
  }
  const seconds = (ms: number | undefined) => (ms === undefined ? 'n/a' : `${formatNumber(ms / 1000, 1)} s`);
  const realStarts = passes.map(
    (p) =>
      `the real server${several ? ` with ${shardsOf(p.server.historyShards)}` : ''} ${seconds(p.timingMs)} ` +
      `(databases by temporal-sql-tool ${seconds(p.server.timings.databases)}, until it answered ${seconds(p.server.timings.server)}, saga setup ${seconds(p.server.timings.setup)}); `,
  );
  notes.push(
    `Start-up, wall time: ${realStarts.join('')}` +
      `worker processes (both servers' fleets at once, each process bundling the workflow code) ${Object.entries(workerStarts)
        .map(([k, v]) => `to ${k} ${seconds(v)}`)
        .join(', ')}. ` +
      `Peak PostgreSQL connections (sampled every second): ${peak.total} of max_connections ${peak.max} on the whole server; ` +
      `${Object.entries(peak.byDatabase)
        .map(([database, n]) => `${database} ${n}`)
        .join(', ')}.`,
  );
  if (skipped) notes.push(`Left out: ${skipped}. The target (real server ≥ ${MIN_REAL_RATIO}× the dev server) is not judged in this run.`);
  const version = passes[0]?.server.version ?? '(left out)';
  const shardsSaid = `history shards: ${shardCounts.length > 0 ? shardCounts.join(', ') : '(left out)'}`;

  return {
    name: 'scale-out',
    title: '9. Scale-out: completed order sagas per second by worker processes, dev server and real server',
    baseline: `1 saga worker process on the same server (each server's ratios: median ÷ median of its 1-process row; the counts run one after the other, minutes apart)`,
    method:
      `saga-throughput's closed loop and saga contender: ${inFlight} order sagas in flight from one SagaClient per server, each started through the gate as soon as one ends, ${perRound} per round, each must end COMPLETED; ` +
      `at each count (${workerCounts.join(', ')}) both servers' fleets of src/worker.ts processes (under tsx, DB_POOL_MAX=${workerPoolMax}; SagaClient pool ${clientPoolMax}) are scaled up together, then every round runs both servers back to back, in alternating order. ` +
      `Dev server: the run's (temporal server start-dev, in-memory SQLite). Real server: go.temporal.io/server ${version} started by the benchmark from scripts/ensure-temporal-server's binaries with stack/temporal/stack.yaml ` +
      `(every service in one process, ${shardsSaid}, small pools; one task-queue partition) on databases of the run's own (made by temporal-sql-tool, dropped WITH (FORCE)), namespace and search attributes by saga setup` +
      `${several ? `; one server per shard count, each started, measured at every count beside the dev server, and stopped before the next (the dev server's fleet starts again from ${workerProcesses(workerCounts[0]!)} each time)` : ''}. ` +
      `Both fleets stay up while the other server is measured (idle pollers; their CPU is in the notes). CPU by process from /proc: the two servers, the fleets' process trees, PostgreSQL backends by database, Redis (INFO cpu), this process (the client and the payment provider), and the whole machine (/proc/stat).`,
    columns: [
      { metric: 'throughput', label: 'completed/s', better: 'higher', digits: 1 },
      ...latencyColumns(0),
    ],
    rows,
    targets,
    chartMetric: 'throughput',
    notes,
    details: {
      settings: sizes.scaleOut,
      timingsMs: { realServers: passes.map((p) => ({ historyShards: p.server.historyShards, total: p.timingMs, ...p.server.timings })), workerStarts },
      realServers: passes.length > 0 ? passes.map((p) => ({ version: p.server.version, historyShards: p.server.historyShards, databases: p.server.databases })) : { skipped },
      peakConnections: peak,
    },
  };
}
