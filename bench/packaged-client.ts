/**
 * Benchmark 12: the packaged client. The DUPLICATE answer of SagaClient.start as a team gets it (the
 * packed tarball, installed in a copy of the order app outside the checkout) against the same client
 * from the checkout's sources (baseline). Both run bench/lib/packaged-child.ts in a process of its own
 * per round, under tsx (the app's saga types are TypeScript), with the same configuration and cart.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { SagaClient } from '../src/client';
import { PROJECT_ROOT } from '../src/paths';
import { createRedis, Rms } from '../src/rms';
import { sagaTypesFor } from '../test/fixtures/orders';
import { workerEnv } from './lib/processes';
import { ANSWER_COLUMNS, baselineRatio, figureOf, ratioTarget, withRatios, type BenchResult, type Row } from './lib/report';
import { inFlightCase, rowsOf, runRounds, type BenchContext, type Contender } from './lib/rounds';
import { packedTarball } from './lib/scaffold';
import { freshOrder } from './lib/temporal-load';

const run = promisify(execFile);
const CONTENDERS = { sources: 'SagaClient.start, checkout sources', packed: 'SagaClient.start, packed tarball' } as const;
const IN_FLIGHT = [1, 64];
/** The figure for the DUPLICATE p50 at 1 in flight before the package existed (docs/performance-archive.md, section 3). */
const BEFORE_MS = 0.097;

/** Runs benchmark 12. */
export async function packagedClient(ctx: BenchContext): Promise<BenchResult> {
  const { progress, workers, sizes } = ctx;
  const { rounds, warmupMs, roundMs } = sizes.packaged;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rs-bench-package-'));
  ctx.onCleanup(async () => rmSync(dir, { recursive: true, force: true }));
  const redis = createRedis(workers.sagaConfig.redis);
  try {
    const { tarball } = await packedTarball(ctx);
    const app = path.join(dir, 'orders');
    cpSync(path.join(PROJECT_ROOT, 'examples/orders'), app, { recursive: true, filter: (src) => !src.includes(`${path.sep}node_modules`) });
    cpSync(path.join(PROJECT_ROOT, 'bench/lib/packaged-child.ts'), path.join(app, 'packaged-child.ts'));
    progress.update('packaged-client: installing the tarball in a copy of examples/orders');
    await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', tarball], { cwd: app, maxBuffer: 64 * 1024 * 1024 });

    // A cart whose entity exists: every request for it under a new key is a DUPLICATE.
    const cart = freshOrder();
    const probe = await SagaClient.connect({ sagas: sagaTypesFor(workers.sagaConfig), config: workers.sagaConfig, temporal: 'on first use' });
    const { intentKey } = probe.prepare('order', cart, randomUUID());
    await probe.close();
    await new Rms(redis, { keyPrefix: workers.sagaConfig.redis.keyPrefix }).markExists({ intent: intentKey, fencingToken: '1' });

    const env = {
      ...workerEnv(workers.sagaConfig),
      PACKAGED_CART: JSON.stringify(cart),
      PACKAGED_IN_FLIGHT: IN_FLIGHT.join(','),
      PACKAGED_ROUND_MS: String(roundMs),
    };
    const contender = (name: string, cwd: string, child: string, sagas: string): Contender => ({
      name,
      run: async () => {
        const { stdout } = await run(process.execPath, ['--import', 'tsx', child], {
          cwd,
          env: { ...env, PACKAGED_SAGAS: sagas, PACKAGED_WARMUP_MS: String(warmupMs) },
        });
        const figures = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, { p50: number; p99: number; throughput: number }>;
        return Object.fromEntries(IN_FLIGHT.flatMap((n) => Object.entries(figures[n]!).map(([metric, value]) => [`${metric}@${n}`, value])));
      },
    });
    const results = await runRounds(
      [
        contender(CONTENDERS.sources, PROJECT_ROOT, path.join(PROJECT_ROOT, 'bench/lib/packaged-child.ts'), path.join(PROJECT_ROOT, 'examples/orders/src/sagas.ts')),
        contender(CONTENDERS.packed, app, path.join(app, 'packaged-child.ts'), path.join(app, 'src/sagas.ts')),
      ],
      rounds,
      progress,
      'packaged-client',
    );
    // One row per in-flight count: the child reports both in one process.
    const rows: Row[] = IN_FLIGHT.flatMap((n) =>
      rowsOf(inFlightCase('DUPLICATE', n), CONTENDERS.sources, results).map((row) => ({
        ...row,
        figures: row.figures.filter((f) => f.metric.endsWith(`@${n}`)).map((f) => ({ ...f, metric: f.metric.replace(`@${n}`, '') })),
      })),
    );
    const withRatio = withRatios(rows);
    const targets = IN_FLIGHT.map((n) => {
      const ratio = baselineRatio(withRatio, inFlightCase('DUPLICATE', n), CONTENDERS.packed, 'p50');
      return ratioTarget(inFlightCase('DUPLICATE', n), CONTENDERS.packed, 'p50 ≤ 1.1× the checkout sources', ratio, ratio <= 1.1);
    });
    const packedP50 = figureOf(withRatio, inFlightCase('DUPLICATE', 1), CONTENDERS.packed, 'p50').median;
    return {
      name: 'packaged-client',
      title: '12. The packaged client: DUPLICATE through the packed tarball',
      baseline: 'the same client from the checkout sources (tsconfig paths to src/), in a process of its own',
      method:
        `npm pack (once per run, shared with install-size and import-time), then the tarball installed in a copy of examples/orders outside the checkout. Each round runs bench/lib/packaged-child.ts once per contender in a new process (node --import tsx, ` +
        `the order app's saga types): one SagaClient, a cart whose entity exists, a new idempotency key per request, ${IN_FLIGHT.join(' then ')} in flight, ` +
        `each ${roundMs} ms after a warm-up; every answer must be DUPLICATE.`,
      columns: ANSWER_COLUMNS,
      rows: withRatio,
      targets,
      chartMetric: 'p50',
      notes: [`DUPLICATE p50 at 1 in flight through the packed tarball: ${packedP50.toFixed(3)} ms (${BEFORE_MS} ms in docs/performance-archive.md, section 3, measured from the sources before the package existed, in the early-answer benchmark's process).`],
      details: { tarball: path.basename(tarball), inFlight: IN_FLIGHT },
    };
  } finally {
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
}
