/**
 * `make bench` / `npm run bench -- [--quick] [--json FILE] [--only NAMES]`: runs the benchmarks on the
 * local Redis and PostgreSQL and a Temporal dev server of the run's own, then prints a Markdown table
 * per benchmark on stdout and writes the JSON and one SVG chart per benchmark to bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PROJECT_ROOT } from '../src/paths';
import { answerCost } from './answer-cost';
import { cliLatency } from './cli-latency';
import { duplicateRejection } from './duplicate-rejection';
import { earlyAnswer } from './early-answer';
import { gateLimits } from './gate-limits';
import { httpLoad } from './http-load';
import { importTime } from './import-time';
import { installSize } from './install-size';
import { machineInfo, startServices } from './lib/environment';
import { observabilityOverhead } from './observability-overhead';
import { packagedClient } from './packaged-client';
import { parseOptions, type BenchmarkName } from './lib/options';
import { Progress } from './lib/progress';
import { renderReport, type BenchResult, type RunReport } from './lib/report';
import type { BenchContext } from './lib/rounds';
import { barChartSvg } from './lib/svg';
import { WorkerFleet } from './lib/workers';
import { keyGrowth } from './key-growth';
import { redisMemory } from './redis-memory';
import { rmsReserve } from './rms-reserve';
import { sagaThroughput } from './saga-throughput';
import { scaleOut } from './scale-out';
import { traceCost } from './trace-cost';

/** Results folder (git-ignored). */
const RESULTS_DIR = path.join(PROJECT_ROOT, 'bench/results');

const RUNNERS: Record<BenchmarkName, (ctx: BenchContext) => Promise<BenchResult>> = {
  'rms-reserve': rmsReserve,
  'duplicate-rejection': duplicateRejection,
  'answer-cost': answerCost,
  'redis-memory': redisMemory,
  'key-growth': keyGrowth,
  'early-answer': earlyAnswer,
  'gate-limits': gateLimits,
  'saga-throughput': sagaThroughput,
  'cli-latency': cliLatency,
  'http-load': httpLoad,
  'observability-overhead': observabilityOverhead,
  'scale-out': scaleOut,
  'trace-cost': traceCost,
  'packaged-client': packagedClient,
  'install-size': installSize,
  'import-time': importTime,
};

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const progress = new Progress();
  const startedAt = new Date();
  const t0 = performance.now();
  const services = await startServices(progress);
  const workers = new WorkerFleet(services.config, progress);
  // What benchmarks started besides the harness's services (see BenchContext.onCleanup).
  const cleanups: (() => Promise<void>)[] = [];
  const runCleanups = async () => {
    for (const close of cleanups.splice(0).reverse()) await close().catch((err: unknown) => progress.log(`bench: cleanup: ${String(err)}`));
  };
  let interrupted = false;
  // `on`, not `once`: under `npx tsx` a Ctrl-C arrives twice (from the terminal, and relayed by tsx), and
  // a second signal without a listener would end the process in the middle of its cleanup.
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    progress.log(`bench: ${signal}: cleaning up`);
    void runCleanups()
      .then(() => workers.stopAll())
      .finally(() => services.close())
      .finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const benchmarks: BenchResult[] = [];
  let machine;
  try {
    machine = await machineInfo(services.config, services.temporalCli);
    const ctx: BenchContext = { config: services.config, serverMetricsUrl: services.serverMetricsUrl, sizes: options.sizes, progress, workers, onCleanup: (close) => void cleanups.push(close) };
    for (const name of options.only) {
      const start = os.loadavg()[0]!;
      const result = await RUNNERS[name](ctx);
      benchmarks.push({ ...result, load: { start, end: os.loadavg()[0]! } });
    }
  } finally {
    progress.update('cleaning up (worker processes, dev server, database, Redis keys)');
    await runCleanups();
    await workers.stopAll().catch((err: unknown) => progress.log(`bench: stopping workers: ${String(err)}`));
    await services.close();
    progress.done();
  }

  const report: RunReport = {
    startedAt: startedAt.toISOString(),
    durationS: (performance.now() - t0) / 1000,
    mode: options.mode,
    command: ['npm run bench --', ...process.argv.slice(2)].join(' '),
    machine: { ...machine, loadAverage: { ...machine.loadAverage, end: os.loadavg()[0]! } },
    benchmarks,
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const json = `${JSON.stringify(report, null, 2)}\n`;
  writeFileSync(path.join(RESULTS_DIR, 'results.json'), json);
  if (options.jsonPath) {
    mkdirSync(path.dirname(path.resolve(options.jsonPath)), { recursive: true });
    writeFileSync(options.jsonPath, json);
  }
  for (const b of benchmarks) writeFileSync(path.join(RESULTS_DIR, `${b.name}.svg`), barChartSvg(b));
  process.stdout.write(`${renderReport(report)}\n`);
  const missed = benchmarks.flatMap((b) => b.targets.filter((t) => !t.met).map((t) => `${b.name} ${t.case} ${t.contender}: ${t.requirement}`));
  progress.log(
    `bench: wrote ${path.relative(process.cwd(), RESULTS_DIR)}/results.json and ${benchmarks.length} charts; targets not met: ${missed.length === 0 ? 'none' : missed.join('; ')}`,
  );
  // Targets are reported, not enforced: a benchmark run on a busy machine must not fail a build.
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`\nbench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
