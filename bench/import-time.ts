/**
 * Benchmark 14: the cold import of the client entry, `reservation-saga` (declarations and
 * SagaClient), as a new app loads it: a fresh Node process in the scaffold that install-size
 * installs from the packed tarball, requiring it (CommonJS) or importing it (an ES module app, as the
 * scaffold is), timed inside the process around that one call, and as the whole process's wall time
 * against Node starting and doing nothing.
 */
import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { figureOf, formatNumber, withRatios, type BenchResult, type TargetCheck } from './lib/report';
import { caseRows, type BenchContext, type Contender } from './lib/rounds';
import { installedScaffold } from './lib/scaffold';
import { spread } from './lib/stats';

const run = promisify(execFile);
const CASE = 'a fresh process, the scaffold\'s node_modules';
const CONTENDERS = {
  node: "node -e ''",
  require: "require('reservation-saga')",
  import: "import('reservation-saga')",
} as const;
/** The issue's target for the import of the client entry, timed in the process. */
const TARGET_MS = 150;

/** Prints how long `call` took, in ms: wall time and CPU time (user + system) of the process meanwhile. */
const timed = (call: string) =>
  `const c = process.cpuUsage(); const t = performance.now(); ${call}; const ms = performance.now() - t; const u = process.cpuUsage(c); ` +
  'process.stdout.write(JSON.stringify({ import: ms, cpu: (u.user + u.system) / 1000 }));';

/** Node's arguments for each contender. */
const SCRIPTS: Record<keyof typeof CONTENDERS, string[]> = {
  node: ['-e', ''],
  require: ['-e', timed("require('reservation-saga')")],
  import: ['--input-type=module', '-e', timed("await import('reservation-saga')")],
};

/** Runs benchmark 14. */
export async function importTime(ctx: BenchContext): Promise<BenchResult> {
  const { rounds, callsPerRound } = ctx.sizes.importTime;
  const app = await installedScaffold(ctx);
  // NODE_OPTIONS cleared: every contender starts the same bare Node.
  const env = { ...process.env, NODE_OPTIONS: '' };
  const t0 = performance.now();
  const contender = (key: keyof typeof CONTENDERS): Contender => ({
    name: CONTENDERS[key],
    run: async ({ warmup }) => {
      const walls: number[] = [];
      const imports: number[] = [];
      const cpus: number[] = [];
      for (let i = 0; i < (warmup ? 1 : callsPerRound); i++) {
        const start = performance.now();
        const { stdout } = await run(process.execPath, SCRIPTS[key], { cwd: app.dir, env });
        walls.push(performance.now() - start);
        if (key === 'node') continue;
        const timing = JSON.parse(stdout) as { import: number; cpu: number };
        imports.push(timing.import);
        cpus.push(timing.cpu);
      }
      const median = (values: number[]) => spread(values).median;
      return { wall: median(walls), ...(key === 'node' ? {} : { import: median(imports), cpu: median(cpus) }) };
    },
  });
  const rows = withRatios(await caseRows('import-time', CASE, CONTENDERS.node, [contender('node'), contender('require'), contender('import')], rounds, ctx.progress));
  const measureMs = performance.now() - t0;

  // What the entry loads, by package (one more process): where its import time goes.
  const { stdout } = await run(
    process.execPath,
    ['-e', "require('reservation-saga'); const n = {}; for (const f of Object.keys(require.cache)) { const m = /.*node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(f); if (m) n[m[1]] = (n[m[1]] ?? 0) + 1; } process.stdout.write(JSON.stringify(n));"],
    { cwd: app.dir, env },
  );
  const loaded = Object.entries(JSON.parse(stdout) as Record<string, number>).sort((a, b) => b[1] - a[1]);

  const targets: TargetCheck[] = (['require', 'import'] as const).map((key) => {
    const ms = figureOf(rows, CASE, CONTENDERS[key], 'import').median;
    return { case: CASE, contender: CONTENDERS[key], requirement: `import ≤ ${TARGET_MS} ms`, measured: `${formatNumber(ms, 0)} ms`, met: ms <= TARGET_MS };
  });
  const over = (key: 'require' | 'import') => formatNumber(figureOf(rows, CASE, CONTENDERS[key], 'wall').median - figureOf(rows, CASE, CONTENDERS.node, 'wall').median, 0);
  return {
    name: 'import-time',
    title: '14. Cold import of the client entry (reservation-saga)',
    baseline: "node -e '' (Node starting and exiting: the floor of any Node process)",
    method:
      'In the scaffold install-size installed from the packed tarball: a new Node process per call (NODE_OPTIONS cleared), so nothing is in its module cache. ' +
      "import ms: performance.now() around the one require('reservation-saga') (CommonJS) or await import('reservation-saga') (ES module, as the scaffold's own code loads it), " +
      'printed by the process (the target is judged on it); import CPU ms: the process\'s user + system CPU time meanwhile (process.cpuUsage: less swayed by other work on a busy machine ' +
      'than the wall time, which includes waiting for a core); wall ms: spawn to exit. ' +
      `Each round runs ${callsPerRound} call${callsPerRound === 1 ? '' : 's'} of each contender (its figure: their median), after one warm-up call of each; the files are in the OS's page cache after the warm-up.`,
    columns: [
      { metric: 'import', label: 'import ms', better: 'lower', digits: 0 },
      { metric: 'cpu', label: 'import CPU ms', better: 'lower', digits: 0 },
      { metric: 'wall', label: 'wall ms', better: 'lower', digits: 0 },
    ],
    rows,
    targets,
    chartMetric: 'wall',
    notes: [
      `Over starting Node (wall, medians): require ${over('require')} ms, import ${over('import')} ms.`,
      `What require('reservation-saga') loads, files by package: ${loaded.map(([name, files]) => `${name} ${files}`).join(', ')}.`,
      `Time: ${formatNumber(measureMs / 1000, 1)} s of calls (the scaffold's install is install-size's, once per run).`,
    ],
    details: { callsPerRound, loaded: Object.fromEntries(loaded), measureMs },
  };
}
