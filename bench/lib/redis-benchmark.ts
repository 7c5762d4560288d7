/** Runs the `redis-benchmark` tool that ships with Redis and reads its CSV summary. */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The tool's figures for one command. */
export interface RedisBenchmarkResult {
  /** Requests per second. */
  rps: number;
  /** Latency percentiles, ms. */
  p50: number;
  p99: number;
}

/** The redis-benchmark binary: `$REDIS_BENCHMARK`, else the first on PATH; undefined when there is none. */
export function findRedisBenchmark(): string | undefined {
  if (process.env.REDIS_BENCHMARK) return process.env.REDIS_BENCHMARK;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'redis-benchmark');
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Sends `command` `requests` times from `clients` connections, with `__rand_int__` in its arguments
 * replaced by a 12-digit number below `keyspace` (independently per occurrence), and returns the
 * tool's summary.
 */
export async function redisBenchmark(
  binary: string,
  redisUrl: string,
  options: { clients: number; requests: number; keyspace: number; command: string[]; timeoutMs: number },
): Promise<RedisBenchmarkResult> {
  const args = ['-u', redisUrl, '-c', String(options.clients), '-n', String(options.requests), '-r', String(options.keyspace), '--csv', ...options.command];
  const { stdout } = await run(binary, args, { timeout: options.timeoutMs, maxBuffer: 1 << 20 });
  // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  const lines = stdout.trim().split('\n');
  const header = lines[0]?.split(',').map((s) => s.replace(/"/g, ''));
  const values = lines[lines.length - 1]?.match(/"([^"]*)"/g)?.map((s) => s.slice(1, -1));
  if (!header || !values || values.length !== header.length) throw new Error(`redis-benchmark: unexpected output:\n${stdout}`);
  const field = (name: string) => {
    const value = Number(values[header.indexOf(name)]);
    if (!Number.isFinite(value)) throw new Error(`redis-benchmark: no ${name} in:\n${stdout}`);
    return value;
  };
  return { rps: field('rps'), p50: field('p50_latency_ms'), p99: field('p99_latency_ms') };
}
