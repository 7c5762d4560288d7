/**
 * The cost of one DUPLICATE answer: `SagaClient.start` against `Rms.reserve` alone, side by side in
 * alternating rounds at 1 and 64 in flight, with the client's CPU per answer (process.cpuUsage over
 * the round ÷ answers) and, at 64 in flight, where that CPU goes by stage (bench/lib/profile.ts):
 * input checks, intent key, session id, key tag, the Redis call, and the rest. A DUPLICATE needs
 * neither Temporal nor PostgreSQL: the client here connects to neither, so only the gate is measured.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { SagaClient } from '../src/client';
import { createPool } from '../src/db';
import { Rms, createRedis } from '../src/rms';
import { DEFAULT_COMPENSATION_ATTEMPTS } from '../src/shared/saga';
import { CpuMeter } from './lib/cpu';
import { deleteKeys } from './lib/environment';
import { closedLoop, forDuration, meteredLoopContender } from './lib/load';
import { profileAnswers, profileText, type AnswerProfile } from './lib/profile';
import { ANSWER_COLUMNS, figureOf, formatNumber, ratioTarget, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { caseRows, inFlightCase, type BenchContext, type Contender } from './lib/rounds';
import { spread } from './lib/stats';
import { freshOrder } from './lib/temporal-load';
import { sagaTypesFor } from '../test/fixtures/orders';

const CONTENDERS = { rms: 'Rms.reserve alone', saga: 'SagaClient.start' } as const;

/** The lease every request asks for (none is taken: every answer is a DUPLICATE). */
const LEASE_MS = 30_000;

/** Client-side work per answer besides the Redis call (µs) that the issue asks for at most. */
const GATE_WORK_TARGET_US = 10;

/** Runs the answer-cost benchmark. */
export async function answerCost({ config, sizes, progress }: BenchContext): Promise<BenchResult> {
  const { concurrencies, roundMs, warmupMs, profileMs } = sizes.answerCost;
  const prefix = `${config.redis.keyPrefix}cost:`;
  const admin = createRedis(config.redis) as Redis;
  // One connection each, as a SagaClient has one: the raw contender's, and the client's.
  const rawRedis = createRedis(config.redis) as Redis;
  const gateRedis = createRedis(config.redis) as Redis;
  const rms = new Rms(rawRedis, { keyPrefix: prefix });
  // A DUPLICATE reads nothing from PostgreSQL: the pool never opens a connection.
  const pool = createPool({ ...config.db, poolMax: 1 });
  const sagas = new SagaClient({
    client: { namespace: config.temporal.namespace, connectOnFirstUse: () => Promise.reject(new Error('answer-cost: a DUPLICATE reached for Temporal')) },
    rms: new Rms(gateRedis, { keyPrefix: prefix }),
    pool,
    taskQueue: config.temporal.taskQueue,
    uiUrl: config.temporal.uiUrl,
    timings: { ...config.saga, compensationAttempts: DEFAULT_COMPENSATION_ATTEMPTS },
    types: sagaTypesFor({ simulations: false }),
    intentSecret: config.secrets.intentKey ?? randomBytes(32),
  });
  const meter = new CpuMeter(admin);
  const sessions = Array.from({ length: Math.max(...concurrencies) }, () => randomUUID());
  const rows: Row[] = [];
  const profiles: { case: string; rms: AnswerProfile; saga: AnswerProfile }[] = [];

  try {
    // The entity of one cart exists (finalised by another session): every request for it is a DUPLICATE.
    const cart = freshOrder();
    const intent = sagas.prepare('order', cart).intentKey;
    const creator = randomUUID().replaceAll('-', '');
    const taken = await rms.reserve({ intent, sessionId: creator, leaseMs: LEASE_MS });
    if (taken.status !== 'SUCCESS') throw new Error(`answer-cost: the cart's first reservation was answered ${taken.status}`);
    if ((await rms.finalize({ intent, sessionId: creator, fencingToken: taken.fencingToken })).status !== 'FINALIZED') throw new Error('answer-cost: the finalise was refused');
    const nonce = randomBytes(4).toString('hex');

    for (const concurrency of concurrencies) {
      const wrong = (who: string, got: string) => new Error(`answer-cost: ${who} answered ${got} where DUPLICATE was due`);
      const rawAsk = async (lane: number) => {
        const t0 = performance.now();
        const reply = await rms.reserve({ intent, sessionId: sessions[lane]!, leaseMs: LEASE_MS });
        const ms = performance.now() - t0;
        if (reply.status !== 'DUPLICATE') throw wrong(CONTENDERS.rms, reply.status);
        return ms;
      };
      // Each request under a new idempotency key, as a new request for the same cart comes.
      const sagaAsk = async (_lane: number, seq: number) => {
        const t0 = performance.now();
        const started = await sagas.start('order', cart, { idempotencyKey: `cost-${nonce}-${concurrency}-${seq}` });
        const ms = performance.now() - t0;
        if (started.reservation.status !== 'DUPLICATE' || started.started) throw wrong(CONTENDERS.saga, started.reservation.status);
        return ms;
      };
      const contender = (name: string, ask: (lane: number, seq: number) => Promise<number>): Contender =>
        meteredLoopContender(name, meter, 'µs', (warmup) => forDuration(concurrency, warmup ? warmupMs : roundMs), ask);
      const caseName = inFlightCase('DUPLICATE', concurrency);
      rows.push(...(await caseRows('answer-cost', caseName, CONTENDERS.rms, [contender(CONTENDERS.rms, rawAsk), contender(CONTENDERS.saga, sagaAsk)], sizes.rounds, progress)));
      if (concurrency === Math.max(...concurrencies)) {
        progress.update(`answer-cost ${caseName}: the client's CPU per answer by stage`);
        const profiled = (op: (lane: number, seq: number) => Promise<number>) => profileAnswers(async () => (await closedLoop({ ...forDuration(concurrency, profileMs), op })).ops);
        profiles.push({ case: caseName, rms: await profiled(rawAsk), saga: await profiled(sagaAsk) });
      }
    }
  } finally {
    await deleteKeys(admin, `${prefix}*`).catch(() => undefined);
    for (const r of [admin, rawRedis, gateRedis]) r.disconnect();
    await pool.end();
  }

  const withRatio = withRatios(rows);
  const gateWork = concurrencies.map((c) => ({ concurrency: c, us: gateWorkUs(withRatio, inFlightCase('DUPLICATE', c)) }));
  return {
    name: 'answer-cost',
    title: "Answer cost: a DUPLICATE answer of SagaClient.start against Rms.reserve alone, and the client's CPU per answer",
    baseline: 'Rms.reserve alone: the raw RMS call on the same Redis, key prefix and intent, on its own ioredis connection as the client has one',
    method:
      `One cart's entity exists (reserved and finalised by another session); every SagaClient.start asks for that cart under a new idempotency key and must be answered DUPLICATE ` +
      `(started: false), every Rms.reserve asks for its intent with one of N sessions. N in flight = N concurrent requests from one process. Rounds of ${roundMs} ms after ${warmupMs} ms of warm-up, ` +
      `the two contenders alternating. client CPU = process.cpuUsage() over the round ÷ answers (the bench loop included, the same for both). ` +
      `The client reaches neither Temporal nor PostgreSQL (a DUPLICATE needs neither).`,
    columns: [...ANSWER_COLUMNS, { metric: 'cpu:bench', label: 'client CPU µs/answer', better: 'lower', digits: 1 }],
    rows: withRatio,
    targets: targetsOf(withRatio, concurrencies, gateWork),
    chartMetric: 'throughput',
    notes: [
      `The gate's work per answer besides the Redis call (client CPU µs per answer of SagaClient.start less that of Rms.reserve alone, median of the rounds' differences): ` +
        `${gateWork.map((g) => `${formatNumber(g.us, 1)} µs at ${g.concurrency} in flight`).join(', ')}.`,
      ...profiles.map(
        (p) =>
          `Where the client's CPU per answer goes at ${p.case}, by stage (one extra ${profileMs} ms pass of each under V8's sampling profiler, which slows both): ` +
          `${profileText(CONTENDERS.rms, p.rms)}; ${profileText(CONTENDERS.saga, p.saga)}.`,
      ),
    ],
    details: { leaseMs: LEASE_MS, gateWork, profiles },
  };
}

/** Client CPU µs per answer of SagaClient.start less Rms.reserve alone's in `caseName`: the median of the per-round differences. */
function gateWorkUs(rows: Row[], caseName: string): number {
  const saga = figureOf(rows, caseName, CONTENDERS.saga, 'cpu:bench').rounds;
  const raw = figureOf(rows, caseName, CONTENDERS.rms, 'cpu:bench').rounds;
  return spread(saga.map((us, i) => us - (raw[i] ?? Number.NaN))).median;
}

function targetsOf(rows: Row[], concurrencies: number[], gateWork: { concurrency: number; us: number }[]): TargetCheck[] {
  if (!concurrencies.includes(64)) return [];
  const caseName = inFlightCase('DUPLICATE', 64);
  const share = figureOf(rows, caseName, CONTENDERS.saga, 'throughput').ratio ?? Number.NaN;
  const work = gateWork.find((g) => g.concurrency === 64)!.us;
  return [
    ratioTarget(caseName, CONTENDERS.saga, 'answers/s ≥ 0.5× Rms.reserve alone', share, share >= 0.5),
    {
      case: caseName,
      contender: CONTENDERS.saga,
      requirement: `≤ ${GATE_WORK_TARGET_US} µs of client CPU per answer besides the Redis call`,
      measured: `${formatNumber(work, 1)} µs`,
      met: work <= GATE_WORK_TARGET_US,
    },
  ];
}
