/** Warm-up and rounds: every contender of a case runs once per round, in an order that rotates. */
import type { Config } from '../../src/config';
import type { Sizes } from './options';
import type { Progress } from './progress';
import type { Row } from './report';
import { spread } from './stats';
import type { WorkerFleet } from './workers';

/** What a benchmark gets from the harness. */
export interface BenchContext {
  /** The run's services (dev server, throwaway database, Redis); task queue and key prefix are the run's. */
  config: Config;
  /** The run's dev server's own metrics (Prometheus text): what it did, counted (bench/lib/server-work.ts). */
  serverMetricsUrl: string;
  sizes: Sizes;
  progress: Progress;
  /** Worker processes for the Temporal benchmarks, started on demand and stopped by the harness. */
  workers: WorkerFleet;
  /**
   * Registers what a benchmark must take down besides the harness's services (its own Temporal
   * server, worker fleets): run, last registered first, when the run ends or is interrupted (Ctrl-C),
   * before the worker processes and services. A benchmark also takes them down itself when it ends;
   * each must be safe to call twice.
   */
  onCleanup: (close: () => Promise<void>) => void;
}

/** One round's figures of one contender, by metric. */
export type RoundFigures = Record<string, number>;

/** A contender: `run` does one round (or the warm-up) and returns its figures. */
export interface Contender {
  name: string;
  run: (round: { warmup: boolean }) => Promise<RoundFigures>;
}

/**
 * Runs one warm-up of every contender, then `rounds` rounds; each round runs every contender once,
 * starting one further along than the round before, so slow drift (caches, compaction, a noisy
 * neighbour) does not always land on the same contender. Returns each contender's rounds.
 */
export async function runRounds(
  contenders: Contender[],
  rounds: number,
  progress: Progress,
  label: string,
): Promise<Map<string, RoundFigures[]>> {
  const results = new Map<string, RoundFigures[]>(contenders.map((c) => [c.name, []]));
  for (const c of contenders) {
    progress.update(`${label}: warm-up ${c.name}`);
    await c.run({ warmup: true });
  }
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(r + k) % contenders.length]!;
      progress.update(`${label}: round ${r + 1}/${rounds} ${c.name}`);
      results.get(c.name)!.push(await c.run({ warmup: false }));
    }
  }
  return results;
}

/** Rows of one case from each contender's rounds (median, extremes, every round). */
export function rowsOf(caseName: string, baseline: string, results: Map<string, RoundFigures[]>): Row[] {
  return [...results].map(([contender, rounds]) => ({
    case: caseName,
    contender,
    baseline: contender === baseline,
    figures: Object.keys(rounds[0] ?? {}).map((metric) => ({ metric, ...spread(rounds.map((r) => r[metric]!)) })),
  }));
}

/**
 * Runs the rounds of one case (see {@link runRounds}), the progress line naming `benchmark` and the
 * case, and returns its rows with `baseline` as the baseline row (see {@link rowsOf}).
 */
export async function caseRows(benchmark: string, caseName: string, baseline: string, contenders: Contender[], rounds: number, progress: Progress): Promise<Row[]> {
  return rowsOf(caseName, baseline, await runRounds(contenders, rounds, progress, `${benchmark} ${caseName}`));
}

/** The name of a case by what is asked and how many requests are in flight, e.g. `DUPLICATE, 64 in flight`. */
export function inFlightCase(what: string, inFlight: number): string {
  return `${what}, ${inFlight} in flight`;
}
