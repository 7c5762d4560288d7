/**
 * Benchmark 11: where tracing's cost on the DUPLICATE answer goes, counted in instructions. Benchmark 10
 * times the answer with tracing off and on, in CPU seconds that this shared machine blurs by ±15% from
 * run to run; here each set-up runs under callgrind, which counts the instructions the process executes
 * (the same for the same code and inputs, whatever else the machine does), so the parts of the cost
 * separate: OpenTelemetry's context manager alone, then the SDK and the instrumentations with nothing
 * sampled, then every trace recorded and exported. Kernel time (the socket writes and reads) is not
 * counted: it is the same in every set-up.
 *
 * The project runs on Node 20. With `TRACE_COST_NODE` naming another Node binary (e.g. Node 24, whose
 * AsyncLocalStorage no longer rides on async hooks), the same set-ups also run on it, as a case of
 * their own in the same run.
 */
import { execFile } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../src/paths';
import { workerEnv } from './lib/processes';
import { withRatios, type BenchResult } from './lib/report';
import { inFlightCase, rowsOf, type BenchContext, type RoundFigures } from './lib/rounds';

const SETUPS = {
  off: 'tracing off',
  context: 'context manager only (AsyncLocalStorage)',
  unsampled: 'tracing on, none sampled',
  sampled: 'tracing on, all sampled',
} as const;
type Setup = keyof typeof SETUPS;

/** What benchmark 10 runs the same answer at: a client process saturated by 32 requests in flight. */
const IN_FLIGHT = 32;

/** The instruction total of a callgrind dump (its `totals:` or `summary:` line). */
async function instructionsOf(dumpFile: string): Promise<number> {
  const text = await readFile(dumpFile, 'utf8');
  const line = /^(?:totals|summary): (\d+)/m.exec(text);
  if (!line) throw new Error(`trace-cost: no instruction total in ${dumpFile}`);
  return Number(line[1]);
}

/** A Node binary the set-ups run on, and the case its rows make. */
interface NodeBinary {
  path: string;
  caseName: string;
}

/** Runs one set-up under callgrind on `node` and returns the instructions per DUPLICATE answer it counted. */
async function countOne(ctx: BenchContext, node: NodeBinary, nodeIndex: number, setup: Setup, round: number, signal: AbortSignal): Promise<RoundFigures> {
  const { warmup, answers } = ctx.sizes.traceCost;
  const out = path.join(tmpdir(), `trace-cost-${process.pid}-${nodeIndex}-${setup}-${round}`);
  const env = {
    ...workerEnv({ ...ctx.config, redis: { ...ctx.config.redis, keyPrefix: `${ctx.config.redis.keyPrefix}tc${nodeIndex}${setup}${round}:` } }),
    // Callgrind runs the child some 50 times slower: a command deadline of wall-clock seconds would
    // fail it on a busy machine, and this benchmark counts instructions, not time.
    REDIS_COMMAND_TIMEOUT_MS: '60000',
    TRACE_COST_SETUP: setup,
    TRACE_COST_WARMUP: String(warmup),
    TRACE_COST_ANSWERS: String(answers),
    TRACE_COST_IN_FLIGHT: String(IN_FLIGHT),
    ...(setup === 'unsampled' ? { OTEL_TRACES_SAMPLER: 'always_off' } : setup === 'sampled' ? { OTEL_TRACES_SAMPLER: 'always_on' } : {}),
  };
  // JIT code is written at run time: callgrind must look for code it changed (--smc-check).
  const args = ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, node.path, '--import', 'tsx', path.join(PROJECT_ROOT, 'bench/lib/trace-cost-child.ts')];
  try {
    const { stdout } = await promisify(execFile)('valgrind', args, { cwd: PROJECT_ROOT, env, maxBuffer: 16 * 1024 * 1024, signal }).catch((err: NodeJS.ErrnoException & { stderr?: string }) => {
      if (err.code === 'ENOENT') throw new Error('trace-cost: valgrind is not installed (Debian package valgrind)');
      throw new Error(`trace-cost: the ${setup} set-up failed:\n${(err.stderr ?? err.message).split('\n').filter((l) => !l.startsWith('==')).slice(-20).join('\n')}`);
    });
    const reported = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { answers?: number };
    if (reported.answers !== answers) throw new Error(`trace-cost: the ${setup} set-up answered ${reported.answers} of ${answers}`);
    // The child's `callgrind_control -d` wrote the answers' counts to `<out>.1`; `<out>` is the rest.
    return { instructions: (await instructionsOf(`${out}.1`)) / answers };
  } finally {
    await Promise.all([rm(out, { force: true }), rm(`${out}.1`, { force: true })]);
  }
}

/** `node --version` of a binary. */
async function versionOf(node: string): Promise<string> {
  const { stdout } = await promisify(execFile)(node, ['--version']).catch((err: Error) => {
    throw new Error(`trace-cost: TRACE_COST_NODE=${node} does not run: ${err.message}`);
  });
  return stdout.trim();
}

/** Runs benchmark 11. */
export async function traceCost(ctx: BenchContext): Promise<BenchResult> {
  const { rounds, warmup, answers } = ctx.sizes.traceCost;
  const nodes: NodeBinary[] = [{ path: process.execPath, caseName: `${inFlightCase('DUPLICATE', IN_FLIGHT)}, Node ${process.version}` }];
  const other = process.env.TRACE_COST_NODE?.trim();
  if (other) nodes.push({ path: other, caseName: `${inFlightCase('DUPLICATE', IN_FLIGHT)}, Node ${await versionOf(other)}` });
  const setups = Object.keys(SETUPS) as Setup[];
  // Ctrl-C: the set-ups under way stop too.
  const stop = new AbortController();
  ctx.onCleanup(async () => stop.abort());
  const rows = [];
  for (const [nodeIndex, node] of nodes.entries()) {
    const results = new Map<string, RoundFigures[]>(Object.values(SETUPS).map((name) => [name, []]));
    for (let round = 0; round < rounds; round++) {
      // Two at a time (one per core): an instruction count does not depend on what runs beside it.
      for (let i = 0; i < setups.length; i += 2) {
        const pair = setups.slice(i, i + 2);
        ctx.progress.update(`trace-cost: ${node.caseName}, round ${round + 1}/${rounds}, ${pair.join(' and ')} under callgrind`);
        const counted = await Promise.all(pair.map((setup) => countOne(ctx, node, nodeIndex, setup, round, stop.signal)));
        pair.forEach((setup, k) => results.get(SETUPS[setup])!.push(counted[k]!));
      }
    }
    rows.push(...rowsOf(node.caseName, SETUPS.off, results));
  }
  return {
    name: 'trace-cost',
    title: '11. Where tracing costs the DUPLICATE answer: instructions per answer under callgrind',
    baseline: 'tracing off (no OpenTelemetry loaded)',
    method:
      `Each set-up is a process of its own (bench/lib/trace-cost-child.ts) with one SagaClient answering DUPLICATE (a cart whose entity marker exists, a new idempotency key each time), ${IN_FLIGHT} requests in flight, run under valgrind --tool=callgrind. ` +
      `After ${warmup} answers it zeroes the counters, answers ${answers} more and dumps them: start-up, module loading and warm-up are not counted, nor is kernel time. ` +
      `"context manager only": OpenTelemetry's AsyncLocalStorage context manager installed, no SDK. "tracing on": startTracing as the entry points call it (the SDK; the HTTP, fetch, ioredis and pg instrumentations), with OTEL_TRACES_SAMPLER=always_off or always_on and a span processor that drops what it is given. ${rounds} round(s)${other ? `; the same set-ups also on ${other} (TRACE_COST_NODE)` : ''}.`,
    columns: [{ metric: 'instructions', label: 'instructions per answer', better: 'lower', digits: 0 }],
    rows: withRatios(rows),
    targets: [],
    chartMetric: 'instructions',
  };
}
