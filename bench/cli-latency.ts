/**
 * Benchmark 7: the `saga` CLI's wall time, call to exit, as a person or a script sees it: `saga
 * --help`, and a DUPLICATE answered by `saga start` (a saga of the cart ran to completion first; every
 * call repeats the cart under a new idempotency key). Each against starting Node and doing nothing
 * (`node -e ''`, the floor of any Node CLI), through bin/saga on the compiled build (.build/, what it
 * runs when the build is current) and through tsx on the sources (what it runs when the build is
 * stale or missing, and what every call ran before the build existed).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PROJECT_ROOT } from '../src/paths';
import { workerEnv } from './lib/processes';
import { figureOf, formatNumber, formatRatio, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { caseRows, type BenchContext, type Contender } from './lib/rounds';
import { spread } from './lib/stats';
import { completeOrderSaga, connectClients, freshOrder } from './lib/temporal-load';

const CONTENDERS = {
  node: "node -e ''",
  compiled: 'bin/saga (compiled .build/)',
  sources: 'tsx src/cli.ts (sources)',
} as const;

const CASES = { help: 'saga --help', duplicate: 'saga start → DUPLICATE' } as const;

/** The targets, on the compiled CLI's median wall time. */
const TARGET_MS: Record<keyof typeof CASES, number> = { help: 300, duplicate: 600 };

/** What a call must answer; anything else ends the run (a wrong answer is no measurement). */
interface Expected {
  code: number;
  check: (stdout: string) => string | undefined;
}

/** A finished call: its exit code, its output and its wall time (spawn to exit, streams closed). */
interface Call {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `command args` with `env`; resolves when it has exited and closed its output. */
function call(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<Call> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - t0 }));
  });
}

/** Runs benchmark 7. */
export async function cliLatency(ctx: BenchContext): Promise<BenchResult> {
  const { sizes, progress, workers } = ctx;
  const { rounds, callsPerRound } = sizes.cli;
  const bin = path.join(PROJECT_ROOT, 'bin/saga');
  const tsx = path.join(PROJECT_ROOT, 'node_modules/.bin/tsx');
  const cliSource = path.join(PROJECT_ROOT, 'src/cli.ts');
  const buildCli = path.join(PROJECT_ROOT, 'scripts/build-cli');
  // The saga workers' environment, as a user's shell would hold it; NODE_OPTIONS dropped so that
  // every contender starts the same bare Node.
  const env: NodeJS.ProcessEnv = { ...workerEnv(workers.sagaConfig), NODE_OPTIONS: '' };

  progress.update('cli-latency: building the CLI if its sources changed (scripts/build-cli)');
  execFileSync(buildCli, { stdio: ['ignore', 'inherit', 'inherit'] });

  await workers.scaleTo(1);
  const { sagas, close } = await connectClients(workers);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-cli-'));
  const rows: Row[] = [];
  let builds = 0;
  try {
    progress.update('cli-latency: running the saga whose cart the DUPLICATE calls repeat');
    const cart = freshOrder();
    await completeOrderSaga(sagas, 'cli-latency', cart);
    // The cart from a file, as docs/cli.md shows it (a card number stays out of the command line).
    const dataFile = path.join(dir, 'order.json');
    writeFileSync(dataFile, JSON.stringify(cart));

    /** A contender running `command args()` `callsPerRound` times per round; its figure is their median. */
    const contender = (name: string, command: string, args: () => string[], expected: Expected, before?: () => void): Contender => ({
      name,
      run: async ({ warmup }) => {
        const times: number[] = [];
        for (let i = 0; i < (warmup ? 1 : callsPerRound); i++) {
          before?.();
          const argv = args();
          const r = await call(command, argv, env);
          const wrong = r.code === expected.code ? expected.check(r.stdout) : `exit ${r.code}`;
          if (wrong !== undefined) throw new Error(`cli-latency: ${name} ${argv.join(' ')}: ${wrong}\n${r.stdout}${r.stderr}`);
          times.push(r.ms);
        }
        return { wall: spread(times).median };
      },
    });
    // bin/saga runs the build only while it is current: a source saved during the run is built
    // again before the next call (not timed), so every call of this contender runs the build.
    const current = () => {
      try {
        execFileSync(buildCli, ['--check']);
      } catch {
        progress.log('cli-latency: a source changed during the run; building the CLI again');
        execFileSync(buildCli, { stdio: ['ignore', 'inherit', 'inherit'] });
        builds++;
      }
    };
    const node = (expected: Expected) => contender(CONTENDERS.node, process.execPath, () => ['-e', ''], expected);

    const help: Expected = { code: 0, check: (out) => (out.startsWith('Usage: saga') ? undefined : 'no usage text') };
    const nothing: Expected = { code: 0, check: (out) => (out === '' ? undefined : 'output from node -e') };
    const helps = [node(nothing), contender(CONTENDERS.compiled, bin, () => ['--help'], help, current), contender(CONTENDERS.sources, tsx, () => [cliSource, '--help'], help)];
    rows.push(...(await caseRows('cli-latency', CASES.help, CONTENDERS.node, helps, rounds, progress)));

    const duplicate: Expected = {
      code: 3,
      check: (out) => {
        const answer = JSON.parse(out) as { reservation?: { status?: string }; started?: boolean };
        return answer.reservation?.status === 'DUPLICATE' && answer.started === false ? undefined : `answered ${JSON.stringify(answer.reservation)} (started: ${answer.started})`;
      },
    };
    const start = () => ['start', '--type', 'order', '--data', `@${dataFile}`, '--idempotency-key', randomUUID(), '--json'];
    const starts = [node(nothing), contender(CONTENDERS.compiled, bin, start, duplicate, current), contender(CONTENDERS.sources, tsx, () => [cliSource, ...start()], duplicate)];
    rows.push(...(await caseRows('cli-latency', CASES.duplicate, CONTENDERS.node, starts, rounds, progress)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await close();
  }

  const withRatio = withRatios(rows);
  const wall = (caseName: string, contender: string) => figureOf(withRatio, caseName, contender, 'wall').median;
  const targets: TargetCheck[] = (Object.keys(CASES) as (keyof typeof CASES)[]).map((key) => {
    const ms = wall(CASES[key], CONTENDERS.compiled);
    return { case: CASES[key], contender: CONTENDERS.compiled, requirement: `wall ≤ ${TARGET_MS[key]} ms`, measured: `${formatNumber(ms, 0)} ms`, met: ms <= TARGET_MS[key] };
  });
  const over = (caseName: string, contender: string) => formatNumber(wall(caseName, contender) - wall(caseName, CONTENDERS.node), 0);
  const faster = (caseName: string) => formatRatio(wall(caseName, CONTENDERS.sources) / wall(caseName, CONTENDERS.compiled));
  return {
    name: 'cli-latency',
    title: '7. CLI: wall time of a saga call',
    baseline: "node -e '' (Node starting and exiting: the floor of any Node command line)",
    method:
      `Wall time from spawn to exit with output read, one call at a time, in the saga workers' environment (NODE_OPTIONS cleared). ` +
      `${CASES.help}: the usage text. ${CASES.duplicate}: one order saga of a cart ran to completion first; every call sends that cart (--data @file) under a new ` +
      `idempotency key with --json and must exit 3 with DUPLICATE and started: false; it loads the config, the saga types and the client, connects to Redis and ` +
      `PostgreSQL (never to Temporal: the gate answers), asks the gate (one Redis call) and closes. bin/saga (compiled): the wrapper, its staleness check, then node .build/cli.js; ` +
      `tsx (sources): node_modules/.bin/tsx src/cli.ts, what bin/saga runs when the build is stale or missing. ` +
      `Each round runs ${callsPerRound} call${callsPerRound === 1 ? '' : 's'} of each contender (its figure: their median), after one warm-up call of each.`,
    columns: [{ metric: 'wall', label: 'wall ms', better: 'lower', digits: 0 }],
    rows: withRatio,
    targets,
    chartMetric: 'wall',
    notes: [
      `Over starting Node (medians): ${CASES.help} ${over(CASES.help, CONTENDERS.compiled)} ms compiled, ${over(CASES.help, CONTENDERS.sources)} ms through tsx; ` +
        `${CASES.duplicate} ${over(CASES.duplicate, CONTENDERS.compiled)} ms compiled, ${over(CASES.duplicate, CONTENDERS.sources)} ms through tsx. ` +
        `The compiled CLI is ${faster(CASES.help)} faster for --help and ${faster(CASES.duplicate)} for a DUPLICATE.` +
        (builds > 0 ? ` The CLI was built again ${builds} time${builds === 1 ? '' : 's'} during the run (sources changed).` : ''),
    ],
    details: { callsPerRound, rebuildsDuringRun: builds },
  };
}
