/** Command-line options of `bench/run.ts` and the sizes of a full and a quick run. */
import { parseArgs } from 'node:util';

/** Every benchmark, in the order they run. */
export const BENCHMARKS = ['rms-reserve', 'duplicate-rejection', 'answer-cost', 'redis-memory', 'key-growth', 'early-answer', 'gate-limits', 'saga-throughput', 'cli-latency', 'http-load', 'scale-out', 'observability-overhead', 'trace-cost', 'packaged-client', 'install-size', 'import-time'] as const;

/** A benchmark's name. */
export type BenchmarkName = (typeof BENCHMARKS)[number];

/** How big a run is. Every loop is bounded by a count and a duration taken from here. */
export interface Sizes {
  /** Measured rounds per contender and case (after one warm-up) of the Redis and PostgreSQL benchmarks. */
  rounds: number;
  /** RMS reserve: in-flight requests per case, duration of a round and of the warm-up, intents in the keyspace. */
  rms: { concurrencies: number[]; roundMs: number; warmupMs: number; keyspace: number };
  /** Duplicate rejection: callers, and the intents each of them submits per round. */
  duplicates: { clients: number; intentsPerRound: number; roundMs: number };
  /**
   * Answer cost: requests in flight per case (DUPLICATE answers of SagaClient.start and of Rms.reserve
   * alone at each), the length of a round and of the warm-up, and of the one profiled pass of each at
   * the largest count.
   */
  answerCost: { concurrencies: number[]; roundMs: number; warmupMs: number; profileMs: number };
  /** Redis memory: keys created per round, and rounds. */
  memory: { keys: number; rounds: number };
  /** Key growth: intents reserved and finalised (a tenth of them undone), and the marker retention (longer than the run takes). */
  keyGrowth: { intents: number; retentionMs: number };
  /**
   * Early answer: requests in flight per case (every answer is measured at each); DUPLICATE and
   * CONFLICT rounds (`rounds` of them) last `rejectedRoundMs`, their warm-up `rejectedWarmupMs`;
   * SUCCESS runs `successRounds` rounds of `startsPerRound(concurrency)` starts, each within `successRoundMs`.
   */
  earlyAnswer: {
    concurrencies: number[];
    rejectedRoundMs: number;
    rejectedWarmupMs: number;
    successRounds: number;
    startsPerRound: (concurrency: number) => number;
    successRoundMs: number;
  };
  /**
   * Gate limits: requests in flight per case (DUPLICATE and SUCCESS at each), the length of a DUPLICATE
   * round, of a SUCCESS round (a start takes milliseconds: longer, for enough of them) and of a
   * warm-up, and the most starts of each type in a SUCCESS round (each leaves a workflow no worker runs).
   */
  gateLimits: { concurrencies: number[]; roundMs: number; successRoundMs: number; warmupMs: number; maxStarts: number };
  /** Saga throughput: rounds, worker processes per case, workflows per round, and how many are in flight. */
  sagas: { rounds: number; workerCounts: number[]; perRound: number; inFlight: number; roundMs: number };
  /** CLI latency: rounds per case, and calls of each contender per round (their median is the round's figure). */
  cli: { rounds: number; callsPerRound: number };
  /** HTTP load: requests in flight per case, and the length of a round (`rounds` of them per contender). */
  http: { concurrencies: number[]; roundMs: number };
  /**
   * Scale-out: saga throughput's loop (`rounds`, `perRound`, `inFlight`, `roundMs`) at each count of
   * saga worker processes, on the dev server and on a real Temporal server; `workerPoolMax`: the
   * PostgreSQL pool of each worker process (DB_POOL_MAX), `clientPoolMax` that of each SagaClient;
   * `realServer`: `build` builds the server's binaries when missing (scripts/ensure-temporal-server,
   * minutes once), `if-built` leaves the real server out, saying so, when they are missing;
   * `historyShards`: the real server's shard counts, one server after another when there are several
   * (`--shards`; unset, the stack's count, stack/temporal/stack.yaml).
   */
  scaleOut: {
    rounds: number;
    workerCounts: number[];
    perRound: number;
    inFlight: number;
    roundMs: number;
    workerPoolMax: number;
    clientPoolMax: number;
    realServer: 'build' | 'if-built';
    historyShards?: number[];
  };
  /** Observability overhead: rounds, DUPLICATE requests in flight per case and a round's length, sagas in flight, per round and a round's bound. */
  overhead: { rounds: number; duplicateConcurrencies: number[]; duplicateRoundMs: number; sagaInFlight: number; sagasPerRound: number; sagaRoundMs: number };
  /** Trace cost: rounds (each runs every set-up once under callgrind), DUPLICATE answers before the count starts, and counted. */
  traceCost: { rounds: number; warmup: number; answers: number };
  /** The packaged client: rounds (a new process per contender each), the warm-up and the measured time per in-flight count. */
  packaged: { rounds: number; warmupMs: number; roundMs: number };
  /** Import time: rounds, and fresh processes of each contender per round (their median is the round's figure). */
  importTime: { rounds: number; callsPerRound: number };
}

const FULL: Sizes = {
  rounds: 5,
  rms: { concurrencies: [1, 16, 64, 256], roundMs: 1000, warmupMs: 400, keyspace: 1_000_000 },
  duplicates: { clients: 64, intentsPerRound: 150, roundMs: 5000 },
  answerCost: { concurrencies: [1, 64], roundMs: 5000, warmupMs: 1000, profileMs: 3000 },
  memory: { keys: 100_000, rounds: 3 },
  keyGrowth: { intents: 100_000, retentionMs: 60_000 },
  // Temporal rounds are long (seconds per workflow in flight): fewer of them keep a run near 10 minutes.
  earlyAnswer: {
    concurrencies: [1, 32, 64],
    rejectedRoundMs: 1000,
    rejectedWarmupMs: 300,
    successRounds: 3,
    startsPerRound: (c) => (c === 1 ? 30 : 128),
    successRoundMs: 15_000,
  },
  gateLimits: { concurrencies: [1, 32], roundMs: 1000, successRoundMs: 3000, warmupMs: 300, maxStarts: 300 },
  sagas: { rounds: 3, workerCounts: [1, 2], perRound: 150, inFlight: 30, roundMs: 30_000 },
  cli: { rounds: 5, callsPerRound: 3 },
  http: { concurrencies: [1, 64], roundMs: 3000 },
  // Two servers × three counts × (warm-up + 3 rounds): 100 sagas a round (about 5 s on an idle machine), at most 20 s.
  scaleOut: { rounds: 3, workerCounts: [1, 2, 4], perRound: 100, inFlight: 30, roundMs: 20_000, workerPoolMax: 3, clientPoolMax: 5, realServer: 'build' },
  overhead: { rounds: 5, duplicateConcurrencies: [1, 32], duplicateRoundMs: 2000, sagaInFlight: 16, sagasPerRound: 32, sagaRoundMs: 30_000 },
  // Under callgrind a process runs some 40× slower: two set-ups take about 100 s side by side.
  traceCost: { rounds: 2, warmup: 4000, answers: 8000 },
  packaged: { rounds: 5, warmupMs: 1000, roundMs: 3000 },
  importTime: { rounds: 5, callsPerRound: 5 },
};

const QUICK: Sizes = {
  rounds: 2,
  rms: { concurrencies: [1, 16, 64, 256], roundMs: 250, warmupMs: 150, keyspace: 1_000_000 },
  duplicates: { clients: 64, intentsPerRound: 30, roundMs: 3000 },
  answerCost: { concurrencies: [1, 64], roundMs: 600, warmupMs: 300, profileMs: 600 },
  memory: { keys: 100_000, rounds: 1 },
  keyGrowth: { intents: 20_000, retentionMs: 15_000 },
  // SUCCESS at 64 in flight: one start per lane, so every lane is busy once.
  earlyAnswer: {
    concurrencies: [1, 32, 64],
    rejectedRoundMs: 250,
    rejectedWarmupMs: 100,
    successRounds: 2,
    startsPerRound: (c) => (c === 1 ? 8 : c),
    successRoundMs: 10_000,
  },
  gateLimits: { concurrencies: [1, 32], roundMs: 300, successRoundMs: 1500, warmupMs: 100, maxStarts: 100 },
  sagas: { rounds: 2, workerCounts: [1, 2], perRound: 24, inFlight: 12, roundMs: 15_000 },
  cli: { rounds: 2, callsPerRound: 1 },
  http: { concurrencies: [1, 64], roundMs: 500 },
  // A smoke run: 1 and 4 processes only, one saga per lane a round (like the warm-up); most of it is
  // starting 2 × 4 worker processes, each bundling the workflow code.
  scaleOut: { rounds: 1, workerCounts: [1, 4], perRound: 12, inFlight: 12, roundMs: 15_000, workerPoolMax: 3, clientPoolMax: 5, realServer: 'if-built' },
  overhead: { rounds: 2, duplicateConcurrencies: [1, 32], duplicateRoundMs: 500, sagaInFlight: 8, sagasPerRound: 8, sagaRoundMs: 15_000 },
  traceCost: { rounds: 1, warmup: 500, answers: 1000 },
  packaged: { rounds: 2, warmupMs: 300, roundMs: 1000 },
  importTime: { rounds: 3, callsPerRound: 3 },
};

/** What the command line asked for. */
export interface Options {
  mode: 'full' | 'quick';
  sizes: Sizes;
  /** Where to write the JSON (default: bench/results/results.json). */
  jsonPath?: string;
  /** Benchmarks to run (default: all). */
  only: BenchmarkName[];
}

const USAGE = `usage: npm run bench -- [--quick] [--json FILE] [--only NAME[,NAME...]] [--shards N[,N...]]
  --quick        a smoke run (about 3 minutes), smaller rounds; no thresholds are enforced
  --json FILE    also write the JSON results to FILE (always written to bench/results/results.json)
  --only NAMES   run only these benchmarks: ${BENCHMARKS.join(', ')}
  --shards N     scale-out: the real server's history shards (default 4, the stack's); with several,
                 one real server after another, each beside the dev server in the same rounds`;

/** The most history shards `--shards` takes: each is a row, a lock and a queue of the server's. */
const MAX_SHARDS = 1024;

/**
 * Parses `argv` (without node and the script). Prints the usage and exits on --help; exits with
 * status 64 on a bad option.
 */
export function parseOptions(argv: string[]): Options {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { quick: { type: 'boolean' }, json: { type: 'string' }, only: { type: 'string' }, shards: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(64);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const only = values.only === undefined ? [...BENCHMARKS] : values.only.split(',').map((s) => s.trim());
  const unknown = only.filter((name) => !(BENCHMARKS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    process.stderr.write(`bench: unknown benchmark ${unknown.join(', ')}\n${USAGE}\n`);
    process.exit(64);
  }
  const mode = values.quick ? 'quick' : 'full';
  const base = mode === 'quick' ? QUICK : FULL;
  let sizes = base;
  if (values.shards !== undefined) {
    const shards = values.shards.split(',').map((s) => s.trim());
    const bad = shards.filter((s) => !/^[1-9]\d*$/.test(s) || Number(s) > MAX_SHARDS);
    if (bad.length > 0 || new Set(shards.map(Number)).size !== shards.length) {
      process.stderr.write(`bench: --shards takes distinct whole numbers from 1 to ${MAX_SHARDS}, not ${values.shards}\n${USAGE}\n`);
      process.exit(64);
    }
    if (!only.includes('scale-out')) {
      process.stderr.write(`bench: --shards is an option of scale-out, which this run leaves out\n${USAGE}\n`);
      process.exit(64);
    }
    sizes = { ...base, scaleOut: { ...base.scaleOut, historyShards: shards.map(Number) } };
  }
  // Always in the order of BENCHMARKS: the Temporal ones scale their workers up, never down.
  return { mode, sizes, jsonPath: values.json, only: BENCHMARKS.filter((name) => only.includes(name)) };
}
