/**
 * Benchmark 8: `saga serve` under a mix of requests, against the same mix through the library in one
 * process (SagaClient.start, the baseline). Every request is a new idempotency key: half of them new
 * carts (SUCCESS, a saga started), 30% a cart whose saga completed (DUPLICATE), 20% a cart another
 * request holds (CONFLICT). Answers per second, and p50/p99 per answer kind, at 1 and 64 in flight.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { PROJECT_ROOT } from '../src/paths';
import { Rms, createRedis } from '../src/rms';

import { closedLoop } from './lib/load';
import { outputTail, workerEnv } from './lib/processes';
import { figureOf, formatNumber, formatRatio, ratioTarget, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { caseRows, inFlightCase, type BenchContext, type Contender } from './lib/rounds';
import { quantile } from './lib/stats';
import { completeOrderSaga, connectClients, freshOrder } from './lib/temporal-load';
import { type OrderInput } from '../test/fixtures/orders';

const CONTENDERS = { library: 'SagaClient.start (library, in process)', http: 'saga serve (HTTP, keep-alive)' } as const;
type Kind = 'SUCCESS' | 'DUPLICATE' | 'CONFLICT';
const KINDS: readonly Kind[] = ['SUCCESS', 'DUPLICATE', 'CONFLICT'];
/** A request mix: the kind of answer asked for, by request number. */
type Mix = (seq: number) => Kind;
/** A mix repeating `pattern`: interleaved, so that even a short round (a few slow SUCCESS answers) holds every kind. */
const repeating =
  (pattern: readonly Kind[]): Mix =>
  (seq) =>
    pattern[seq % pattern.length]!;
/** The realistic mix: 5 in 10 SUCCESS, 3 DUPLICATE, 2 CONFLICT. */
const MIXED = repeating(['SUCCESS', 'DUPLICATE', 'SUCCESS', 'CONFLICT', 'SUCCESS', 'DUPLICATE', 'SUCCESS', 'CONFLICT', 'SUCCESS', 'DUPLICATE']);
/** Rejections only (the gate's own traffic, no saga started): 6 in 10 DUPLICATE, 4 CONFLICT. */
const REJECTED = repeating(['DUPLICATE', 'CONFLICT', 'DUPLICATE', 'CONFLICT', 'DUPLICATE', 'DUPLICATE', 'CONFLICT', 'DUPLICATE', 'CONFLICT', 'DUPLICATE']);
/** The CONFLICT cart's holder keeps it this long: past any run. */
const HOLD_MS = 60 * 60 * 1000;
/** The case the answer-time target is judged on: the gate's own traffic, no saga running. */
const REJECTED_CASE = 'DUPLICATE and CONFLICT only, 1 in flight';

/** The targets. */
const TARGETS = { rejectedP50Ms: 2, throughputRatio: 0.5 } as const;

/** `saga serve` in a process of its own, on a free port. */
async function startServer(env: NodeJS.ProcessEnv): Promise<{ url: string; child: ChildProcess; stop: () => Promise<number | null> }> {
  const child = spawn(path.join(PROJECT_ROOT, 'bin/saga'), ['serve'], { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = outputTail(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`saga serve not listening after 60 s:\n${output()}`)), 60_000);
    child.stderr.on('data', () => {
      const found = /serve: listening on (http:\/\/\S+)/.exec(output())?.[1];
      if (found) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    void exited.then((code) => reject(new Error(`saga serve exited (${code}) before listening:\n${output()}`)));
  });
  return {
    url,
    child,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Runs benchmark 8. */
export async function httpLoad(ctx: BenchContext): Promise<BenchResult> {
  const { sizes, progress, workers } = ctx;
  const { concurrencies, roundMs } = sizes.http;
  await workers.scaleTo(1);
  const { sagas, close } = await connectClients(workers);
  const redis = createRedis(workers.sagaConfig.redis) as Redis;
  const rms = new Rms(redis, { keyPrefix: workers.sagaConfig.redis.keyPrefix });
  const token = randomBytes(24).toString('base64url');
  const server = await startServer({ ...workerEnv(workers.sagaConfig), SAGA_SERVE_ADDRESS: '127.0.0.1:0', SAGA_SERVE_TOKENS: `bench:${token}`, NODE_OPTIONS: '' });
  const rows: Row[] = [];
  const mismatches: string[] = [];
  try {
    // DUPLICATE: a cart whose saga completed. CONFLICT: a cart whose intent the bench holds.
    progress.update('http-load: running the saga whose cart the DUPLICATE requests repeat');
    const done = freshOrder();
    await completeOrderSaga(sagas, 'http-load', done);
    const held = freshOrder();
    const heldIntent = sagas.prepare('order', held).intentKey;
    const holder = await rms.reserve({ intent: heldIntent, sessionId: `bench-holder-${randomUUID()}`, leaseMs: HOLD_MS });
    if (holder.status !== 'SUCCESS') throw new Error(`http-load: could not hold the CONFLICT cart (${holder.status})`);
    const dataOf = (kind: Kind): OrderInput => (kind === 'SUCCESS' ? freshOrder() : kind === 'DUPLICATE' ? done : held);

    /** A contender sending the mix at `concurrency` for one round; `send` answers the kind it got and its latency. */
    const contender = (name: string, mix: Mix, concurrency: number, send: (data: OrderInput, key: string) => Promise<Kind>): Contender => ({
      name,
      run: async ({ warmup }) => {
        const latencies: Record<Kind, number[]> = { SUCCESS: [], DUPLICATE: [], CONFLICT: [] };
        const result = await closedLoop({
          concurrency,
          durationMs: warmup ? Math.min(roundMs, 500) : roundMs,
          maxOps: 1_000_000,
          op: async (_, seq) => {
            const expected = mix(seq);
            const t0 = performance.now();
            const got = await send(dataOf(expected), randomUUID());
            const ms = performance.now() - t0;
            if (got !== expected && mismatches.length < 5) mismatches.push(`${name}: expected ${expected}, got ${got}`);
            latencies[got].push(ms);
            return null;
          },
        });
        const figures: Record<string, number> = { rate: result.throughput };
        for (const kind of KINDS.filter((k) => latencies[k].length > 0 || mix === MIXED)) {
          const sorted = Float64Array.from(latencies[kind]).sort();
          figures[`${kind} p50`] = quantile(sorted, 0.5);
          figures[`${kind} p99`] = quantile(sorted, 0.99);
        }
        return figures;
      },
    });
    const viaLibrary = async (data: OrderInput, key: string): Promise<Kind> => (await sagas.start('order', data, { idempotencyKey: key })).reservation.status;
    const viaHttp = async (data: OrderInput, key: string): Promise<Kind> => {
      const response = await fetch(`${server.url}/v1/sagas/order`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
        body: JSON.stringify(data),
      });
      const body = (await response.json()) as { type?: string; reservation?: { status?: Kind } };
      if (response.status === 201 && body.reservation?.status === 'SUCCESS') return 'SUCCESS';
      if (response.status === 409 && body.type === '/problems/duplicate') return 'DUPLICATE';
      if (response.status === 409 && body.type === '/problems/conflict') return 'CONFLICT';
      throw new Error(`http-load: saga serve answered ${response.status} ${JSON.stringify(body)}`);
    };
    const cases: { caseName: string; mix: Mix; concurrency: number }[] = [
      { caseName: REJECTED_CASE, mix: REJECTED, concurrency: 1 },
      ...concurrencies.map((concurrency) => ({ caseName: inFlightCase('mix', concurrency), mix: MIXED, concurrency })),
    ];
    for (const { caseName, mix, concurrency } of cases) {
      const contenders = [contender(CONTENDERS.library, mix, concurrency, viaLibrary), contender(CONTENDERS.http, mix, concurrency, viaHttp)];
      rows.push(...(await caseRows('http-load', caseName, CONTENDERS.library, contenders, sizes.rounds, progress)));
    }
    await rms.release({ intent: heldIntent, sessionId: holder.sessionId, fencingToken: holder.fencingToken });
  } finally {
    const code = await server.stop();
    if (code !== 0) progress.log(`http-load: saga serve exited ${code} after SIGTERM`);
    redis.disconnect();
    await close();
  }
  if (mismatches.length > 0) throw new Error(`http-load: answers other than the mix asked for:\n  ${mismatches.join('\n  ')}`);

  const withRatio = withRatios(rows);
  const one = REJECTED_CASE;
  const many = inFlightCase('mix', Math.max(...concurrencies));
  const few = inFlightCase('mix', Math.min(...concurrencies));
  const p50 = (kind: Kind) => figureOf(withRatio, one, CONTENDERS.http, `${kind} p50`).median;
  const rate = (contender: string) => figureOf(withRatio, many, contender, 'rate').median;
  const ratio = rate(CONTENDERS.http) / rate(CONTENDERS.library);
  const targets: TargetCheck[] = [
    ...(['DUPLICATE', 'CONFLICT'] as const).map((kind) => ({
      case: one,
      contender: CONTENDERS.http,
      requirement: `${kind} p50 ≤ ${TARGETS.rejectedP50Ms} ms`,
      measured: `${formatNumber(p50(kind), 2)} ms`,
      met: p50(kind) <= TARGETS.rejectedP50Ms,
    })),
    ratioTarget(many, CONTENDERS.http, `answers/s ≥ ${TARGETS.throughputRatio}× the library`, ratio, ratio >= TARGETS.throughputRatio),
  ];
  const columns = [
    { metric: 'rate', label: 'answers/s', better: 'higher' as const, digits: 0 },
    ...KINDS.flatMap((kind) => [
      { metric: `${kind} p50`, label: `${kind} p50 ms`, better: 'lower' as const, digits: 2 },
      { metric: `${kind} p99`, label: `${kind} p99 ms`, better: 'lower' as const, digits: 2 },
    ]),
  ];
  return {
    name: 'http-load',
    title: '8. HTTP front door: saga serve under a mix of requests',
    baseline: 'SagaClient.start in one process (the library path the server wraps), same mix, same concurrency',
    method:
      `Closed loop, N requests in flight from the bench process, each with a new idempotency key, for ${roundMs} ms per round. The mix, interleaved by request number: 5 in 10 a new cart ` +
      `(SUCCESS: reservation, truth check, workflow start), 3 in 10 the cart of a completed saga (DUPLICATE: one Redis call), 2 in 10 a cart whose intent the bench ` +
      `holds (CONFLICT: one Redis call); the first case sends only the DUPLICATE and CONFLICT carts (6 in 10, 4 in 10), so no saga runs meanwhile. saga serve runs as its own process (bin/saga serve, one client token) on the same Redis, PostgreSQL and Temporal dev server, ` +
      `called with Node's fetch (keep-alive); every answer is checked against the kind asked for. One saga worker process runs the started sagas meanwhile.`,
    columns,
    rows: withRatio,
    targets,
    chartMetric: 'rate',
    notes: [
      `At ${Math.max(...concurrencies)} in flight saga serve answers ${formatNumber(rate(CONTENDERS.http), 0)} requests/s against ${formatNumber(rate(CONTENDERS.library), 0)} through the library (${formatRatio(ratio)}); ` +
        `over HTTP at 1 in flight, with no saga running, a DUPLICATE takes ${formatNumber(p50('DUPLICATE'), 2)} ms and a CONFLICT ${formatNumber(p50('CONFLICT'), 2)} ms (p50); ` +
        `in the mix at 1 in flight ${formatNumber(figureOf(withRatio, few, CONTENDERS.http, 'DUPLICATE p50').median, 2)} ms and ${formatNumber(figureOf(withRatio, few, CONTENDERS.http, 'CONFLICT p50').median, 2)} ms, the sagas it starts sharing the 2 cores.`,
    ],
    details: { roundMs, concurrencies, mix: { SUCCESS: 0.5, DUPLICATE: 0.3, CONFLICT: 0.2 } },
  };
}
