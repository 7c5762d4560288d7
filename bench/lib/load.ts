/** A closed-loop load driver: N operations in flight at once, bounded by a count and a duration. */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { CpuMeter } from './cpu';
import { withCpu } from './report';
import type { Contender } from './rounds';
import { latencyPercentiles } from './stats';

/** Options of {@link closedLoop}. */
export interface LoadOptions {
  /** Operations in flight at once. */
  concurrency: number;
  /** Stop starting operations after this long (ms). */
  durationMs: number;
  /** Stop after this many operations. */
  maxOps: number;
  /**
   * One operation, given its lane (0 ≤ lane < concurrency) and its sequence number. It returns the
   * latency to record in ms (an operation may time only part of itself), or null to record nothing.
   * Anything it throws ends the run: expected outcomes (duplicates, conflicts) are values.
   */
  op: (lane: number, seq: number) => Promise<number | null>;
}

/** What one run of {@link closedLoop} did. */
export interface LoadResult {
  /** Operations completed. */
  ops: number;
  /**
   * Operations per second while every lane was busy: completions up to the moment the first lane
   * found no more work, over that time. The tail, when fewer operations are in flight, is left out;
   * it matters when one operation takes seconds (a workflow) and a round holds few of them.
   */
  throughput: number;
  /** Recorded latencies (ms); the first `samples` entries are valid. */
  latencies: Float64Array;
  samples: number;
}

/** Runs `op` from `concurrency` lanes until `maxOps` operations or `durationMs` have passed. */
export async function closedLoop({ concurrency, durationMs, maxOps, op }: LoadOptions): Promise<LoadResult> {
  const latencies = new Float64Array(maxOps);
  let started = 0;
  let ops = 0;
  let samples = 0;
  let saturated: { ops: number; at: number } | undefined;
  const start = performance.now();
  const deadline = start + durationMs;
  const lane = async (id: number) => {
    while (started < maxOps && performance.now() < deadline) {
      const latency = await op(id, started++);
      ops++;
      if (latency !== null) latencies[samples++] = latency;
    }
    saturated ??= { ops, at: performance.now() };
  };
  await Promise.all(Array.from({ length: concurrency }, (_, id) => lane(id)));
  const elapsedMs = performance.now() - start;
  // Fewer completions than lanes before the first lane ran dry: there was no steady state to measure.
  const steady = saturated && saturated.ops >= concurrency ? saturated : { ops, at: start + elapsedMs };
  return { ops, throughput: (steady.ops / (steady.at - start)) * 1000, latencies, samples };
}

/** Runs `fn` and returns its result with its duration in ms. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const t0 = performance.now();
  const result = await fn();
  return { result, ms: performance.now() - t0 };
}

/**
 * A contender that runs `op` in a closed loop shaped by `loop` (the round's or the warm-up's) under
 * `meter`. Its figures: throughput (ops/s), p50/p99 (ms, as `op` times itself), CPU per operation by
 * component of `meter` in `unit`, and, when the meter reads the machine's CPU, `busy`: the machine's
 * CPU time over the round's wall time on all cores, in per cent. The percentiles are taken after the
 * meter stops, so their sorting is not counted.
 */
export function meteredLoopContender(
  name: string,
  meter: CpuMeter,
  unit: 'µs' | 'ms',
  loop: (warmup: boolean) => Omit<LoadOptions, 'op'>,
  op: LoadOptions['op'],
): Contender {
  return {
    name,
    run: async ({ warmup }) => {
      const stop = await meter.start();
      const t0 = performance.now();
      const r = await closedLoop({ ...loop(warmup), op });
      const wallMs = performance.now() - t0;
      const usage = await stop();
      const { p50, p99 } = latencyPercentiles(r.latencies, r.samples);
      const figures: Record<string, number> = { throughput: r.throughput, p50, p99 };
      if (usage.machine !== undefined) figures.busy = (usage.machine / (wallMs * os.cpus().length)) * 100;
      return withCpu(figures, usage, r.ops, unit);
    },
  };
}

/**
 * The loop of a round bounded by time alone: `concurrency` lanes for `durationMs`, at most 200
 * operations per ms (more than any contender answers).
 */
export function forDuration(concurrency: number, durationMs: number): Omit<LoadOptions, 'op'> {
  return { concurrency, durationMs, maxOps: durationMs * 200 };
}

/** Runs `op(0)` … `op(count - 1)`, 256 at a time: filling or draining Redis, nothing timed. */
export async function inParallel(count: number, op: (i: number) => Promise<void>): Promise<void> {
  await closedLoop({
    concurrency: 256,
    durationMs: 600_000,
    maxOps: count,
    op: async (_lane, i) => {
      await op(i);
      return null;
    },
  });
}
