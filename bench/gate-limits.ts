/**
 * Benchmark: what limits at the gate (SagaDefinition.limits) cost the answers of SagaClient.start.
 * The same order saga type with and without limits, side by side in one run: a DUPLICATE must cost
 * the same (limits are counted only for what would start a saga), a SUCCESS at most one more Redis
 * round trip (the caller's counters are on another slot than the intent's).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { SagaClient } from '../src/client';
import { Rms, createRedis } from '../src/rms';
import { defineSaga, sagaTypesOf, type SagaDefinition } from '../src/sagas';
import { closedLoop } from './lib/load';
import { ANSWER_COLUMNS, baselineRatio, ratioTarget, withRatios, type BenchResult, type Row } from './lib/report';
import { inFlightCase, rowsOf, type BenchContext, type RoundFigures } from './lib/rounds';
import { latencyPercentiles } from './lib/stats';
import { freshOrder } from './lib/temporal-load';
import { sagaTypesFor, type OrderInput } from '../test/fixtures/orders';

const CONTENDERS = { off: 'limits off (order)', on: 'limits on (order-limited)' } as const;
const TARGETS = { DUPLICATE: 1.1, SUCCESS: 1.2 } as const;
type Answer = keyof typeof TARGETS;

/** Limits no request of the run reaches: every answer pays for them, none is refused. */
const LIMITS = [{ inFlight: 1_000_000, perSecond: 10_000 }, { per: (input: OrderInput) => input.customer, inFlight: 100 }];

/** Runs the gate-limits benchmark. */
export async function gateLimits(ctx: BenchContext): Promise<BenchResult> {
  const { sizes, progress, workers } = ctx;
  const { concurrencies, roundMs, successRoundMs, warmupMs, maxStarts } = sizes.gateLimits;
  // A task queue no worker polls: a SUCCESS starts its workflow and nothing runs it, so the answers of
  // both types are timed on an idle dev server (the workflows go with the dev server at the end).
  const taskQueue = `bench-limits-${randomUUID().slice(0, 8)}`;
  const config = { ...workers.sagaConfig, temporal: { ...workers.sagaConfig.temporal, taskQueue } };
  const types = sagaTypesFor(config);
  const { kind: _kind, ...order } = types.order as SagaDefinition<OrderInput>;
  const sagas = await SagaClient.connect({ sagas: sagaTypesOf([...Object.values(types), defineSaga<OrderInput>({ ...order, type: 'order-limited', limits: LIMITS })]), config });
  const redis = createRedis(config.redis) as Redis;
  const rows: Row[] = [];
  try {
    // The DUPLICATE cart's entity: marked in Redis as a finished saga of another session marks it.
    const duplicateCart = freshOrder();
    const rms = new Rms(redis, { keyPrefix: config.redis.keyPrefix });
    const { intentKey } = sagas.prepare('order', duplicateCart);
    const held = await rms.reserve({ intent: intentKey, sessionId: randomUUID(), leaseMs: 60_000 });
    if (held.status !== 'SUCCESS') throw new Error(`gate-limits: the DUPLICATE cart was answered ${held.status}`);
    await rms.markExists({ intent: intentKey, fencingToken: held.fencingToken, existsTtlMs: 3_600_000 });

    /**
     * One round of `answer` at `concurrency`: the requests alternate between the two types, so both
     * are timed side by side under the same load (a busy machine's drift lands on both alike).
     */
    const round = async (answer: Answer, concurrency: number, warmup: boolean): Promise<Record<string, RoundFigures>> => {
      const kinds = [
        { name: CONTENDERS.off, type: 'order', latencies: [] as number[] },
        { name: CONTENDERS.on, type: 'order-limited', latencies: [] as number[] },
      ];
      const t0 = performance.now();
      await closedLoop({
        concurrency,
        durationMs: warmup ? warmupMs : answer === 'SUCCESS' ? successRoundMs : roundMs,
        maxOps: answer === 'SUCCESS' ? 2 * maxStarts : roundMs * 400,
        op: async (_lane, seq) => {
          const kind = kinds[seq % 2]!;
          const cart = answer === 'DUPLICATE' ? duplicateCart : freshOrder();
          const t = performance.now();
          const started = await sagas.start(kind.type, cart, { idempotencyKey: randomUUID() });
          const ms = performance.now() - t;
          if (started.reservation.status !== answer) throw new Error(`gate-limits: ${kind.type} answered ${started.reservation.status} where ${answer} was due`);
          kind.latencies.push(ms);
          return ms;
        },
      });
      const elapsedMs = performance.now() - t0;
      return Object.fromEntries(
        kinds.map((k) => {
          const { p50, p99 } = latencyPercentiles(Float64Array.from(k.latencies), k.latencies.length);
          return [k.name, { p50, p99, throughput: (k.latencies.length / elapsedMs) * 1000 }];
        }),
      );
    };
    for (const answer of ['DUPLICATE', 'SUCCESS'] as const) {
      for (const concurrency of concurrencies) {
        const caseName = inFlightCase(answer, concurrency);
        progress.update(`gate-limits ${caseName}: warm-up`);
        await round(answer, concurrency, true);
        const results = new Map<string, RoundFigures[]>([
          [CONTENDERS.off, []],
          [CONTENDERS.on, []],
        ]);
        for (let r = 0; r < sizes.rounds; r++) {
          progress.update(`gate-limits ${caseName}: round ${r + 1}/${sizes.rounds}`);
          const figures = await round(answer, concurrency, false);
          for (const [name, f] of Object.entries(figures)) results.get(name)!.push(f);
        }
        rows.push(...rowsOf(caseName, CONTENDERS.off, results));
      }
    }
  } finally {
    // The counters and leases are under the run's key prefix, which the harness deletes at the end.
    redis.disconnect();
    await sagas.close();
  }

  const withRatio = withRatios(rows);
  return {
    name: 'gate-limits',
    title: 'Limits at the gate: SagaClient.start with limits on against off',
    baseline: 'the order saga type without limits, on the same client, Redis, PostgreSQL and dev server',
    method:
      `The order type and a copy of it, order-limited, declaring limits no request reaches (per caller: ${LIMITS[0]!.inFlight.toLocaleString('en-US')} in flight and ${LIMITS[0]!.perSecond!.toLocaleString('en-US')} per second; per customer: ${LIMITS[1]!.inFlight} in flight), ` +
      `so every answer pays for them and none is refused. N in flight = N concurrent SagaClient.start calls from one process, each with a new idempotency key, ` +
      `alternating between the two types within each round (both timed side by side under the same load; answers/s is each type's share). ` +
      `DUPLICATE: a cart whose entity exists; SUCCESS: a fresh cart per request, its workflow started on a task queue no worker polls (the answer, not the saga, is timed; at most ${maxStarts} starts of each type a round). ` +
      `Rounds last ${roundMs} ms (SUCCESS: ${successRoundMs} ms), after a warm-up round. Ratios are limits on / limits off, round by round.`,
    columns: ANSWER_COLUMNS,
    rows: withRatio,
    targets: (['DUPLICATE', 'SUCCESS'] as const).flatMap((answer) =>
      concurrencies.map((c) => {
        const ratio = baselineRatio(withRatio, inFlightCase(answer, c), CONTENDERS.on, 'p50');
        return ratioTarget(inFlightCase(answer, c), CONTENDERS.on, `p50 ≤ ${TARGETS[answer]}× limits off`, ratio, ratio <= TARGETS[answer]);
      }),
    ),
    chartMetric: 'p50',
    notes: [],
    details: { taskQueue, limits: LIMITS.map(({ per, ...l }) => ({ ...l, ...(per ? { per: 'customer' } : {}) })) },
  };
}
