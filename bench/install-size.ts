/**
 * Benchmark 13: what a new app installs. The scaffold `reservation-saga init` writes, depending on
 * the packed tarball and installed with npm outside the checkout, weighed on disk (as `du` counts),
 * against the part no app of ours can shed: `@temporalio/worker` and what it pulls in (its native
 * core bridge ships every platform's binary). The tracing packages are optional peer dependencies,
 * so the scaffold installs none of them.
 */
import { performance } from 'node:perf_hooks';
import { formatNumber, withRatios, type BenchResult, type Row } from './lib/report';
import type { BenchContext } from './lib/rounds';
import { installedScaffold, InstalledTree, megabytes } from './lib/scaffold';
import { spread } from './lib/stats';

const CASE = "a new app's node_modules";
const CONTENDERS = {
  floor: '@temporalio/worker and what it pulls in',
  production: 'the scaffold without its dev tools (--omit=dev)',
  scaffold: 'the scaffold (reservation-saga init, npm install)',
} as const;
/** The target for the scaffold's node_modules. */
const TARGET_MB = 260;

/** Runs benchmark 13. */
export async function installSize(ctx: BenchContext): Promise<BenchResult> {
  const app = await installedScaffold(ctx);
  ctx.progress.update('install-size: weighing the scaffold\'s node_modules');
  const t0 = performance.now();
  const tree = new InstalledTree(app.dir);
  const weighMs = performance.now() - t0;

  const row = (contender: string, bytes: number, packages: number): Row => ({
    case: CASE,
    contender,
    baseline: contender === CONTENDERS.floor,
    figures: [
      { metric: 'mb', ...spread([megabytes(bytes)]) },
      { metric: 'packages', ...spread([packages]) },
    ],
  });
  const floor = tree.closure(['@temporalio/worker']);
  const production = tree.closure(tree.appDependencies('dependencies'));
  const devTools = tree.closure(tree.appDependencies('devDependencies'));
  const rows = withRatios([
    row(CONTENDERS.floor, floor.bytes, floor.packages),
    row(CONTENDERS.production, production.bytes, production.packages),
    row(CONTENDERS.scaffold, tree.totalBytes, tree.packageCount),
  ]);
  const mb = megabytes(tree.totalBytes);
  const size = (bytes: number) => `${formatNumber(megabytes(bytes), 1)} MB`;
  const seconds = (ms: number) => `${formatNumber(ms / 1000, 1)} s`;
  return {
    name: 'install-size',
    title: "13. A new app's install: the scaffold's node_modules",
    baseline: "@temporalio/worker's own closure in the same tree (the native core bridge, webpack, swc and the rest the Temporal worker needs): the floor of any app that runs a worker",
    method:
      'npm pack (once per run), then the app `reservation-saga init` writes (templates/app) depending on the tarball, in a temp dir outside the checkout, installed with ' +
      '`npm install --prefer-offline` (from npm\'s cache where it holds the packages). MB: bytes on disk as `du` counts them (allocated blocks, directories included), ' +
      "in MiB as `du -h` prints them. The rows below the scaffold's own total are computed from its tree (package-lock.json): a package's closure is it, its dependencies, " +
      "theirs and so on, resolved as Node resolves them; --omit=dev is the closure of the app's dependencies (what a deployment installs). One measurement, no rounds.",
    columns: [
      { metric: 'mb', label: 'MB', better: 'lower', digits: 1 },
      { metric: 'packages', label: 'packages', better: 'lower', digits: 0 },
    ],
    rows,
    targets: [{ case: CASE, contender: CONTENDERS.scaffold, requirement: `≤ ${TARGET_MB} MB`, measured: `${formatNumber(mb, 0)} MB`, met: mb <= TARGET_MB }],
    chartMetric: 'mb',
    notes: [
      `In the scaffold: ${tree.topLevelEntries} entries in node_modules (a scope counts once, as \`ls node_modules\` shows them); @temporalio/* ${size(tree.bytesNamed('@temporalio/'))}, ` +
        `@opentelemetry/* ${size(tree.bytesNamed('@opentelemetry/'))} (the API only: tracing's packages are optional peer dependencies), reservation-saga itself ${size(tree.bytesNamed('reservation-saga'))}, ` +
        `the app's dev tools (${tree.appDependencies('devDependencies').join(', ')}) ${size(devTools.bytes)} with what they pull in.`,
      `Time: npm pack ${seconds(app.packMs)} (shared with the other benchmarks of the package), npm install ${seconds(app.installMs)}, weighing ${seconds(weighMs)}.`,
    ],
    details: { topLevelEntries: tree.topLevelEntries, packMs: app.packMs, installMs: app.installMs, weighMs, devToolsBytes: devTools.bytes, totalBytes: tree.totalBytes },
  };
}
