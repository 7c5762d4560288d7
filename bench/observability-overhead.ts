/**
 * Benchmark 10: what metrics and traces cost. The early answer (DUPLICATE, the gate's common case) and
 * saga throughput, measured in the same run with observability off (the baseline), with Prometheus
 * metrics on the client (a SagaMetrics, as `saga serve` has) and on the worker (METRICS_ADDRESS,
 * TEMPORAL_METRICS_ADDRESS), and with traces too, exported over OTLP/HTTP by the client and the worker
 * to a collector this process serves: none, 1 in 10 or every trace sampled. Each set-up has its own client process
 * (bench/lib/driver.ts) and worker process on a task queue of its own: the instrumentations patch
 * modules when they load, so one process cannot be measured both ways.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from '../src/config';
import { PROJECT_ROOT } from '../src/paths';
import { createRedis } from '../src/rms';
import { freePort } from '../scripts/demo/stack';
import { devServerMeter, type CpuMeter } from './lib/cpu';
import type { DriverLoad, DriverReply } from './lib/driver';
import { outputTail, startWorkerProcess, workerEnv, type WorkerProcess } from './lib/processes';
import { baselineRatio, cpuNote, latencyColumns, ratioTarget, withCpu, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { caseRows, inFlightCase, type BenchContext, type Contender } from './lib/rounds';
import { freshOrder } from './lib/temporal-load';

const CONTENDERS = {
  off: 'observability off',
  metrics: 'metrics',
  unsampled: 'metrics + traces, none sampled',
  sampled: 'metrics + traces, 1 in 10 sampled',
  traces: 'metrics + traces, all sampled',
} as const;
/** The trace ratio of the sampled set-up (OTEL_TRACES_SAMPLER_ARG): a common choice for a high-volume path. */
const SAMPLE_RATIO = 0.1;
/** The target of the issue: at most 5% fewer answers or sagas per second with everything on. */
const MAX_OVERHEAD = 0.05;
/**
 * The target of the issue for traces on with none sampled, on the DUPLICATE answer: at most 10% fewer
 * answers per second. Looser than the others': the context manager and the unsampled spans cost the
 * answer itself (docs/performance-archive.md, sections 10 and 11).
 */
const MAX_UNSAMPLED_DUPLICATE_OVERHEAD = 0.1;

/** A collector that takes OTLP/HTTP exports and drops them, counting what it got. */
async function startSink(): Promise<{ url: string; requests: () => number; bytes: () => number; close: () => Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (d: Buffer) => (bytes += d.length));
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    bytes: () => bytes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A driver process and the requests it answers. */
interface Driver {
  child: ChildProcess;
  ask: (req: DriverLoad) => Promise<Extract<DriverReply, { ok: true }>>;
  stop: () => Promise<void>;
}

async function startDriver(env: NodeJS.ProcessEnv): Promise<Driver> {
  const child = fork(path.join(PROJECT_ROOT, 'bench/lib/driver.ts'), [], { cwd: PROJECT_ROOT, env, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  const stderr = outputTail(child, 4096);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pending = new Map<number, { resolve: (r: Extract<DriverReply, { ok: true }>) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  child.on('message', (m: DriverReply | { ready: true }) => {
    if ('ready' in m) return;
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.ok) p?.resolve(m);
    else p?.reject(new Error(`driver: ${m.error}`));
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    void exited.then(() => reject(new Error(`driver exited before it was ready:\n${stderr()}`)));
  });
  void exited.then(() => {
    for (const p of pending.values()) p.reject(new Error(`driver exited:\n${stderr()}`));
  });
  return {
    child,
    ask: (req) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve, reject });
        child.send({ ...req, id });
      }),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** One set-up: its config and environment, and once started its worker process, driver process and CPU meter. */
interface Setup {
  name: string;
  config: Config;
  env: NodeJS.ProcessEnv;
  worker?: WorkerProcess;
  driver?: Driver;
  meter?: CpuMeter;
}

/** Runs benchmark 10. */
export async function observabilityOverhead({ config, sizes, progress, onCleanup }: BenchContext): Promise<BenchResult> {
  const { rounds, duplicateConcurrencies, duplicateRoundMs, sagaInFlight, sagasPerRound, sagaRoundMs } = sizes.overhead;
  const sink = await startSink();
  const redis = createRedis(config.redis) as Redis;
  const queue = (suffix: string): Config => ({
    ...config,
    temporal: { ...config.temporal, taskQueue: `${config.temporal.taskQueue}-obs-${suffix}` },
    redis: { ...config.redis, keyPrefix: `${config.redis.keyPrefix}obs${suffix}:` },
    db: { ...config.db, poolMax: 10 },
  });
  const withMetrics = async (suffix: string): Promise<Config> => ({
    ...queue(suffix),
    // The Temporal SDK's endpoint needs a real port (it does not say which one port 0 gave it).
    observability: { ...config.observability, metrics: { host: '127.0.0.1', port: 0 }, temporalMetricsAddress: `127.0.0.1:${await freePort()}` },
  });
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', DRIVER_METRICS: 'true' };
  const setups: Setup[] = [
    { name: CONTENDERS.off, config: queue('off'), env: {} },
    { name: CONTENDERS.metrics, config: await withMetrics('metrics'), env: { DRIVER_METRICS: 'true' } },
    // Instrumented and propagating, recording nothing: what tracing costs before a span is kept.
    { name: CONTENDERS.unsampled, config: await withMetrics('unsampled'), env: { ...otel, OTEL_TRACES_SAMPLER: 'always_off' } },
    { name: CONTENDERS.sampled, config: await withMetrics('sampled'), env: { ...otel, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(SAMPLE_RATIO) } },
    { name: CONTENDERS.traces, config: await withMetrics('traces'), env: otel },
  ];
  const rows: Row[] = [];
  // Also on Ctrl-C: the processes of every set-up, and the collector.
  const stopAll = async () => {
    await Promise.allSettled(setups.flatMap((s) => [s.driver?.stop() ?? Promise.resolve(), s.worker?.stop() ?? Promise.resolve()]));
    redis.disconnect();
    await sink.close().catch(() => undefined);
  };
  onCleanup(stopAll);
  try {
    progress.update('observability-overhead: starting a worker and a driver process per set-up');
    await Promise.all(
      setups.map(async (s) => {
        s.worker = await startWorkerProcess('src/worker.ts', s.config, { env: s.env });
        s.driver = await startDriver({ ...workerEnv(s.config), ...s.env });
        s.meter = devServerMeter(redis, { client: () => [s.driver!.child.pid!], worker: () => [s.worker!.child.pid!] });
      }),
    );
    // Each set-up's DUPLICATE cart: one order of its own completed first.
    const carts = new Map(setups.map((s) => [s.name, freshOrder()]));
    for (const s of setups) await s.driver!.ask({ kind: 'complete', cart: carts.get(s.name) });

    const contender = (s: Setup, load: (warmup: boolean) => DriverLoad, unit: 'µs' | 'ms'): Contender => ({
      name: s.name,
      run: async ({ warmup }) => {
        const stop = await s.meter!.start();
        const r = await s.driver!.ask(load(warmup));
        const usage = await stop();
        return withCpu({ throughput: r.throughput, p50: r.p50, p99: r.p99 }, usage, r.ops, unit);
      },
    });
    for (const concurrency of duplicateConcurrencies) {
      const caseName = inFlightCase('DUPLICATE', concurrency);
      const contenders = setups.map((s) =>
        contender(s, (warmup) => ({ kind: 'duplicates', cart: carts.get(s.name), concurrency, durationMs: warmup ? duplicateRoundMs / 4 : duplicateRoundMs, maxOps: 1_000_000 }), 'µs'),
      );
      rows.push(...(await caseRows('observability-overhead', caseName, CONTENDERS.off, contenders, rounds, progress)));
    }
    const sagaCase = `order sagas, ${sagaInFlight} in flight, 1 worker process`;
    const sagaContenders = setups.map((s) =>
      contender(s, (warmup) => ({ kind: 'sagas', concurrency: sagaInFlight, durationMs: sagaRoundMs, maxOps: warmup ? sagaInFlight : sagasPerRound }), 'ms'),
    );
    rows.push(...(await caseRows('observability-overhead', sagaCase, CONTENDERS.off, sagaContenders, rounds, progress)));
  } finally {
    await stopAll();
  }
  // Traces really went out: the set-ups that sample exported to the sink.
  if (sink.requests() === 0) throw new Error('observability-overhead: no trace export reached the collector; tracing was not on');

  const withRatio = withRatios(rows);
  const cases = [...new Set(withRatio.map((r) => r.case))];
  const target = (caseName: string, contender: string, maxOverhead: number): TargetCheck => {
    const ratio = baselineRatio(withRatio, caseName, contender, 'throughput');
    return ratioTarget(caseName, contender, `≥ ${1 - maxOverhead}× off (overhead ≤ ${maxOverhead * 100}%)`, ratio, ratio >= 1 - maxOverhead);
  };
  const targets: TargetCheck[] = cases.flatMap((caseName) => [
    ...[CONTENDERS.metrics, CONTENDERS.sampled, CONTENDERS.traces].map((contender) => target(caseName, contender, MAX_OVERHEAD)),
    ...(caseName.startsWith('DUPLICATE') ? [target(caseName, CONTENDERS.unsampled, MAX_UNSAMPLED_DUPLICATE_OVERHEAD)] : []),
  ]);
  return {
    name: 'observability-overhead',
    title: '10. Observability overhead: metrics and traces on, against off',
    baseline: 'observability off: no metrics, no traces, in the client and the worker',
    method:
      `Five set-ups side by side, each with its own client process (bench/lib/driver.ts: one SagaClient) and worker process (src/worker.ts) on a task queue and Redis prefix of its own; each round runs every set-up once, in a rotating order. ` +
      `"metrics": the client counts its answers (SagaMetrics, as saga serve does), the worker serves METRICS_ADDRESS and TEMPORAL_METRICS_ADDRESS. "+ traces": both processes also export traces (OTEL_EXPORTER_OTLP_ENDPOINT, http/protobuf, the SDK's default batching) to a collector in this process that drops them (it got ${sink.requests()} exports, ${Math.round(sink.bytes() / 1024)} KiB), none (OTEL_TRACES_SAMPLER=always_off: instrumented, context carried, nothing recorded), 1 in ${Math.round(1 / SAMPLE_RATIO)} (parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=${SAMPLE_RATIO}) or every trace. ` +
      `DUPLICATE: SagaClient.start of a cart whose saga completed, a new idempotency key each time, for ${duplicateRoundMs} ms a round. Sagas: order sagas started and awaited to COMPLETED, ${sagasPerRound} a round. Nobody scrapes the metrics endpoints during the rounds.`,
    columns: [
      { metric: 'throughput', label: 'per s', better: 'higher', digits: 1 },
      ...latencyColumns(2),
    ],
    rows: withRatio,
    targets,
    chartMetric: 'throughput',
    notes: cases.map((c) => cpuNote(withRatio, c, c.startsWith('DUPLICATE') ? 'µs' : 'ms', c.startsWith('DUPLICATE') ? 'answer' : 'saga')),
    details: { traceExports: sink.requests(), traceBytes: sink.bytes() },
  };
}
