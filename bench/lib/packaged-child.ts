/**
 * One round of benchmark 12 (bench/packaged-client.ts), in a process of its own: the order app's
 * SagaClient answering DUPLICATE, imported as `reservation-saga`. Run from the checkout, that name is
 * the sources (tsconfig paths); run from a copy of this file in an app that installed the packed
 * tarball, it is the tarball's build, as a team gets it.
 *
 * Environment: the saga configuration (src/config.ts), PACKAGED_SAGAS (the order app's sagas module),
 * PACKAGED_CART (a cart whose entity exists, as JSON), PACKAGED_IN_FLIGHT (comma-separated),
 * PACKAGED_WARMUP_MS and PACKAGED_ROUND_MS. Prints one JSON line: per in-flight count, the answers'
 * p50 and p99 (ms) and answers/s.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { loadConfig, SagaClient, type SagaList, type Config } from 'reservation-saga';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`packaged-client: set ${name}`);
  return value;
};
const positive = (name: string, text: string): number => {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`packaged-client: ${name} must be a positive integer (got ${text})`);
  return n;
};

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const module = (await import(pathToFileURL(env('PACKAGED_SAGAS')).href)) as { sagas: (config: Config) => SagaList };
  const cart = JSON.parse(env('PACKAGED_CART')) as unknown;
  const inFlight = env('PACKAGED_IN_FLIGHT').split(',').map((n) => positive('PACKAGED_IN_FLIGHT', n));
  const [warmupMs, roundMs] = [positive('PACKAGED_WARMUP_MS', env('PACKAGED_WARMUP_MS')), positive('PACKAGED_ROUND_MS', env('PACKAGED_ROUND_MS'))];
  const client = await SagaClient.connect({ sagas: module.sagas(config), config, temporal: 'on first use' });
  try {
    /** `lanes` callers asking for `ms`: every answer must be DUPLICATE; returns the latencies. */
    const load = async (lanes: number, ms: number): Promise<{ latencies: number[]; seconds: number }> => {
      const latencies: number[] = [];
      const t0 = performance.now();
      const until = t0 + ms;
      await Promise.all(
        Array.from({ length: lanes }, async () => {
          while (performance.now() < until) {
            const idempotencyKey = randomUUID();
            const start = performance.now();
            const started = await client.start('order', cart, { idempotencyKey });
            latencies.push(performance.now() - start);
            if (started.reservation.status !== 'DUPLICATE' || started.started) throw new Error(`packaged-client: answered ${started.reservation.status} where DUPLICATE was due`);
          }
        }),
      );
      return { latencies, seconds: (performance.now() - t0) / 1000 };
    };
    const result: Record<string, { p50: number; p99: number; throughput: number }> = {};
    for (const lanes of inFlight) {
      await load(lanes, warmupMs);
      const { latencies, seconds } = await load(lanes, roundMs);
      latencies.sort((a, b) => a - b);
      const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)]!;
      result[lanes] = { p50: at(0.5), p99: at(0.99), throughput: latencies.length / seconds };
    }
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await client.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`packaged-client: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
