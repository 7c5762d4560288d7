/**
 * One set-up of benchmark 11 (bench/trace-cost.ts), run by it under callgrind: a SagaClient answering
 * DUPLICATE, `TRACE_COST_IN_FLIGHT` requests in flight, with tracing as `TRACE_COST_SETUP` says:
 * - `off`: no OpenTelemetry at all;
 * - `context`: only OpenTelemetry's context manager (AsyncLocalStorage), no SDK, no instrumentation;
 * - `unsampled`, `sampled`: `startTracing` as every entry point starts it (the SDK and the HTTP, fetch,
 *   ioredis and pg instrumentations), with the sampler of OTEL_TRACES_SAMPLER, spans exported to a
 *   processor that drops them.
 *
 * After `TRACE_COST_WARMUP` answers it zeroes callgrind's counters (`callgrind_control -z`), answers
 * `TRACE_COST_ANSWERS` more and dumps them (`-d`), so the dump holds the answers alone: no start-up,
 * no module loading, no warm-up. Prints one JSON line: `{"answers": N}`.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';

const setup = process.env.TRACE_COST_SETUP;
const count = (name: string) => {
  const n = Number(process.env[name]);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`trace-cost: ${name} must be a positive integer`);
  return n;
};

/** Tells callgrind (which runs this process) to zero (`-z`) or dump (`-d`) its counters. */
async function callgrind(flag: '-z' | '-d'): Promise<void> {
  await promisify(execFile)('callgrind_control', [flag, String(process.pid)]);
}

async function main(): Promise<void> {
  const [warmup, answers, inFlight] = [count('TRACE_COST_WARMUP'), count('TRACE_COST_ANSWERS'), count('TRACE_COST_IN_FLIGHT')];
  // Tracing first: the instrumentations patch ioredis and pg when they load.
  if (setup === 'context') {
    const [{ context }, { AsyncLocalStorageContextManager }] = await Promise.all([import('@opentelemetry/api'), import('@opentelemetry/context-async-hooks')]);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  } else if (setup === 'unsampled' || setup === 'sampled') {
    const [{ startTracing }, { BatchSpanProcessor }] = await Promise.all([import('../../src/tracing/sdk.js'), import('@opentelemetry/sdk-trace-base')]);
    const dropping = { export: (_spans: unknown, done: (result: { code: 0 }) => void) => done({ code: 0 }), shutdown: async () => undefined };
    startTracing({ serviceName: 'bench-trace-cost', spanProcessors: [new BatchSpanProcessor(dropping)] });
  } else if (setup !== 'off') {
    throw new Error(`trace-cost: TRACE_COST_SETUP must be off, context, unsampled or sampled (got ${setup})`);
  }
  // The order app's saga types only (examples/orders/src/sagas): not the test fixture, whose payment
  // provider server (Fastify) would add its loading and JIT to a process that callgrind slows 50-fold.
  const [{ SagaClient }, { loadConfig }, { createRedis, Rms }, { orderSagas }] = await Promise.all([
    import('../../src/client.js'),
    import('../../src/config.js'),
    import('../../src/rms/index.js'),
    import('../../examples/orders/src/sagas.js'),
  ]);
  const config = loadConfig(process.env);
  const sagas = await SagaClient.connect({ sagas: orderSagas({ simulations: config.simulations }), config, temporal: 'on first use' });
  const redis = createRedis(config.redis);
  try {
    // The entity of this cart exists (its marker), so every request under a new key is a DUPLICATE.
    const cart = { customer: `trace-cost-${randomUUID()}`, items: [{ sku: 'widget', quantity: 1, priceCents: 1000 }], payment: { card: '4242424242424242' } };
    const { intentKey } = sagas.prepare('order', cart, randomUUID());
    await new Rms(redis, { keyPrefix: config.redis.keyPrefix }).markExists({ intent: intentKey, fencingToken: '1' });
    const answer = async (n: number) => {
      let left = n;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (left-- > 0) {
            const started = await sagas.start('order', cart, { idempotencyKey: randomUUID() });
            if (started.reservation.status !== 'DUPLICATE') throw new Error(`trace-cost: expected DUPLICATE, got ${started.reservation.status}`);
          }
        }),
      );
    };
    await answer(warmup);
    await callgrind('-z');
    await answer(answers);
    await callgrind('-d');
    process.stdout.write(`${JSON.stringify({ answers })}\n`);
  } finally {
    await sagas.close();
    redis.disconnect();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`trace-cost: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
