/** Summary statistics of benchmark samples: percentiles within a round, median and spread across rounds. */

/** The `q` quantile (0 < q ≤ 1) of ascending `sorted` values by nearest rank; NaN when empty. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

/** p50 and p99 of the first `count` latencies in `samples` (milliseconds). */
export function latencyPercentiles(samples: Float64Array, count: number): { p50: number; p99: number } {
  const sorted = samples.slice(0, count).sort();
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}

/** A figure across rounds: its median, its extremes, and every round's value. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number[];
}

/** The median (mean of the middle two for an even count), min and max of `values`. */
export function spread(values: readonly number[]): Spread {
  if (values.length === 0) throw new Error('spread of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]!, rounds: [...values] };
}
