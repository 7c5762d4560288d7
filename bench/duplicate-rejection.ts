/**
 * Benchmark 2: how fast a caller learns "duplicate" when 64 callers submit the same intents at once:
 * the RMS failing fast (reserve answers CONFLICT or DUPLICATE) against a PostgreSQL-only design that
 * learns it from the UNIQUE constraint (23505) inside the multi-table write transaction.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { createPool } from '../src/db';
import { Rms, createRedis, intentKey } from '../src/rms';
import { CpuMeter, named } from './lib/cpu';
import { deleteKeys } from './lib/environment';
import { submitPgOnly, writeOrder } from './lib/pg-only';
import { cpuNote, latencyColumns, ratioOf, ratioTarget, withCpu, withRatios, type BenchResult } from './lib/report';
import { caseRows, type BenchContext, type Contender } from './lib/rounds';
import { latencyPercentiles } from './lib/stats';

const LEASE_MS = 30_000;
const CONTENDERS = { pg: 'PostgreSQL-only', rms: 'RMS fail-fast' } as const;

/** Runs benchmark 2. */
export async function duplicateRejection({ config, sizes, progress }: BenchContext): Promise<BenchResult> {
  const { clients, intentsPerRound, roundMs } = sizes.duplicates;
  const prefix = `${config.redis.keyPrefix}dup:`;
  // One connection per caller, so no caller of the PostgreSQL-only design waits for a free one.
  const pool = createPool({ ...config.db, poolMax: clients });
  const redis = createRedis(config.redis) as Redis;
  const rms = new Rms(redis, { keyPrefix: prefix });
  const sessions = Array.from({ length: clients }, () => randomUUID());
  const meter = new CpuMeter(redis, { postgres: named('postgres') });

  /**
   * A round: every caller submits the same `intentsPerRound` fresh intents, in the same order, all
   * starting together. `submit` answers true when the caller created the entity, or the time it took
   * to learn "duplicate".
   */
  const round = (submit: (caller: number, intent: string) => Promise<true | number>) => async () => {
    const nonce = randomBytes(6).toString('hex');
    const intents = Array.from({ length: intentsPerRound }, (_, i) => intentKey('order', { bench: nonce, i }, randomBytes(32)));
    const latencies = new Float64Array(clients * intentsPerRound);
    let rejections = 0;
    let created = 0;
    let reached = 0;
    const stop = await meter.start();
    const start = performance.now();
    const deadline = start + roundMs;
    await Promise.all(
      Array.from({ length: clients }, async (_, caller) => {
        for (let i = 0; i < intents.length && performance.now() < deadline; i++) {
          reached = Math.max(reached, i + 1);
          const outcome = await submit(caller, intents[i]!);
          if (outcome === true) created++;
          else latencies[rejections++] = outcome;
        }
      }),
    );
    const elapsedMs = performance.now() - start;
    const usage = await stop();
    // Both designs must let exactly one caller per intent through; anything else is a broken run.
    if (created !== reached) throw new Error(`duplicate-rejection: ${created} entities created for ${reached} intents`);
    const { p50, p99 } = latencyPercentiles(latencies, rejections);
    return withCpu({ throughput: (rejections / elapsedMs) * 1000, p50, p99 }, usage, created + rejections, 'µs');
  };

  const pgOnly: Contender = {
    name: CONTENDERS.pg,
    run: round(async (caller, intent) => {
      const t0 = performance.now();
      if ((await submitPgOnly(pool, intent, `${intent}/${caller}`)) === 'created') return true;
      return performance.now() - t0;
    }),
  };

  const rmsFirst: Contender = {
    name: CONTENDERS.rms,
    run: round(async (caller, intent) => {
      const sessionId = sessions[caller]!;
      const t0 = performance.now();
      const answer = await rms.reserve({ intent, sessionId, leaseMs: LEASE_MS });
      if (answer.status !== 'SUCCESS') return performance.now() - t0;
      // The one caller that got the lease writes the same transaction, then promotes its reservation.
      await writeOrder(pool, intent, `${intent}/${caller}`);
      await rms.finalize({ intent, sessionId, fencingToken: answer.fencingToken });
      return true;
    }),
  };

  const caseName = `${clients} callers`;
  let rows;
  try {
    rows = withRatios(await caseRows('duplicate-rejection', caseName, CONTENDERS.pg, [pgOnly, rmsFirst], sizes.rounds, progress));
  } finally {
    await deleteKeys(redis, `${prefix}*`).catch(() => undefined);
    redis.disconnect();
    await pool.end();
  }

  const speedup = 1 / ratioOf(rows, caseName, CONTENDERS.rms, CONTENDERS.pg, 'p50');
  return {
    name: 'duplicate-rejection',
    title: '2. Duplicate rejection: time to learn "duplicate"',
    baseline: 'PostgreSQL-only: the UNIQUE intent_key inside the multi-table write transaction (orders, payments, stock_reservations), "duplicate" learnt from error 23505',
    method:
      `${clients} callers, each on its own PostgreSQL connection, submit the same ${intentsPerRound} fresh intents per round in the same order, starting together; ` +
      `one submission per intent creates it, the other ${clients - 1} are rejections, timed from submission to the answer. RMS fail-fast: Rms.reserve answers CONFLICT (lease held) or DUPLICATE (finalised); ` +
      `its winner writes the same transaction and finalises. rejections/s counts every rejection over the round's wall time. PostgreSQL CPU counts every backend of the server, whoever it serves.`,
    columns: [
      { metric: 'throughput', label: 'rejections/s', better: 'higher', digits: 0 },
      ...latencyColumns(3),
    ],
    rows,
    targets: [ratioTarget(caseName, CONTENDERS.rms, '≥ 20× faster (p50) than PostgreSQL-only', speedup, speedup >= 20)],
    chartMetric: 'p50',
    notes: [cpuNote(rows, caseName, 'µs', 'submission')],
    details: { clients, intentsPerRound, leaseMs: LEASE_MS },
  };
}
