/**
 * The cost of one DUPLICATE answer: `SagaClient.start` against `Rms.reserve` alone, side by side in
 * alternating rounds at 1 and 64 in flight, with the client's CPU per answer (process.cpuUsage over
 * the round ÷ answers) and, at 64 in flight, where that CPU goes by stage (bench/lib/profile.ts):
 * input checks, intent key, session id, key tag, the Redis call, and the rest. A DUPLICATE needs
 * neither Temporal nor PostgreSQL: the client here connects to neither, so only the gate is measured.
 * One more case runs both over an RMS client that answers at once (no Redis, no socket): the gate's
 * work besides the Redis call, without the socket writes whose cost grows as answers come slower.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { SagaClient } from '../src/client';
import { createPool } from '../src/db';
import { Rms, createRedis } from '../src/rms';
import { markerValue } from '../src/rms/keys';
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

const CONTENDERS = { rms: 'Rms.reserve alone', saga: 'SagaClient.start', pipelined: 'SagaClient.start, ioredis auto-pipelining' } as const;

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
  // What batching the socket writes would give (not what SagaClient.connect makes): commands sent
  // in one tick go out in one write.
  const pipelinedRedis = new Redis(config.redis.url, { commandTimeout: config.redis.commandTimeoutMs, maxRetriesPerRequest: 1, enableAutoPipelining: true });
  const rms = new Rms(rawRedis, { keyPrefix: prefix });
  // A DUPLICATE reads nothing from PostgreSQL: the pool never opens a connection.
  const pool = createPool({ ...config.db, poolMax: 1 });
  const intentSecret = config.secrets.intentKey ?? randomBytes(32);
  const types = sagaTypesFor({ simulations: false });
  /** A SagaClient on `reserving`, as SagaClient.connect makes one, that never reaches Temporal. */
  const sagaClient = (reserving: Rms) =>
    new SagaClient({
      client: { namespace: config.temporal.namespace, connectOnFirstUse: () => Promise.reject(new Error('answer-cost: a DUPLICATE reached for Temporal')) },
      rms: reserving,
      pool,
      taskQueue: config.temporal.taskQueue,
      uiUrl: config.temporal.uiUrl,
      timings: { ...config.saga, compensationAttempts: DEFAULT_COMPENSATION_ATTEMPTS },
      types,
      intentSecret,
    });
  const sagas = sagaClient(new Rms(gateRedis, { keyPrefix: prefix }));
  const pipelined = sagaClient(new Rms(pipelinedRedis, { keyPrefix: prefix }));
  const meter = new CpuMeter(admin);
  const sessions = Array.from({ length: Math.max(...concurrencies) }, () => randomUUID());
  const rows: Row[] = [];
  const profiles: { case: string; rms: AnswerProfile; saga: AnswerProfile }[] = [];
  // Made below, once the cart's marker exists: the same client over an RMS client that answers at once.
  let answering: Redis | undefined;

  try {
    // The entity of one cart exists (finalised by another session): every request for it is a DUPLICATE.
    const cart = freshOrder();
    const intent = sagas.prepare('order', cart).intentKey;
    const creator = randomUUID().replaceAll('-', '');
    const taken = await rms.reserve({ intent, sessionId: creator, leaseMs: LEASE_MS });
    if (taken.status !== 'SUCCESS') throw new Error(`answer-cost: the cart's first reservation was answered ${taken.status}`);
    if ((await rms.finalize({ intent, sessionId: creator, fencingToken: taken.fencingToken })).status !== 'FINALIZED') throw new Error('answer-cost: the finalise was refused');
    answering = answeringClient(['DUPLICATE', markerValue(creator, taken.fencingToken)]);
    const noRedis = { rms: new Rms(answering, { keyPrefix: prefix }), sagas: sagaClient(new Rms(answering, { keyPrefix: prefix })) };
    const nonce = randomBytes(4).toString('hex');

    const maxInFlight = Math.max(...concurrencies);
    const cases = [
      ...concurrencies.map((concurrency) => ({ caseName: inFlightCase('DUPLICATE', concurrency), concurrency, rms, sagas, pipelined })),
      { caseName: noRedisCase(maxInFlight), concurrency: maxInFlight, ...noRedis, pipelined: undefined },
    ];
    for (const [index, { caseName, concurrency, rms: reserving, sagas: starting, pipelined: batching }] of cases.entries()) {
      const wrong = (who: string, got: string) => new Error(`answer-cost: ${who} answered ${got} where DUPLICATE was due`);
      const rawAsk = async (lane: number) => {
        const t0 = performance.now();
        const reply = await reserving.reserve({ intent, sessionId: sessions[lane]!, leaseMs: LEASE_MS });
        const ms = performance.now() - t0;
        if (reply.status !== 'DUPLICATE') throw wrong(CONTENDERS.rms, reply.status);
        return ms;
      };
      // Each request under a new idempotency key, as a new request for the same cart comes.
      const askOf = (client: SagaClient, name: string, tag: string) => async (_lane: number, seq: number) => {
        const t0 = performance.now();
        const started = await client.start('order', cart, { idempotencyKey: `cost-${nonce}-${tag}-${seq}` });
        const ms = performance.now() - t0;
        if (started.reservation.status !== 'DUPLICATE' || started.started) throw wrong(name, started.reservation.status);
        return ms;
      };
      const sagaAsk = askOf(starting, CONTENDERS.saga, `s${index}`);
      const contender = (name: string, ask: (lane: number, seq: number) => Promise<number>): Contender =>
        meteredLoopContender(name, meter, 'µs', (warmup) => forDuration(concurrency, warmup ? warmupMs : roundMs), ask);
      const contenders = [contender(CONTENDERS.rms, rawAsk), contender(CONTENDERS.saga, sagaAsk)];
      if (batching) contenders.push(contender(CONTENDERS.pipelined, askOf(batching, CONTENDERS.pipelined, `p${index}`)));
      rows.push(...(await caseRows('answer-cost', caseName, CONTENDERS.rms, contenders, sizes.rounds, progress)));
      if (concurrency === maxInFlight) {
        progress.update(`answer-cost ${caseName}: the client's CPU per answer by stage`);
        const profiled = (op: (lane: number, seq: number) => Promise<number>) => profileAnswers(async () => (await closedLoop({ ...forDuration(concurrency, profileMs), op })).ops);
        profiles.push({ case: caseName, rms: await profiled(rawAsk), saga: await profiled(sagaAsk) });
      }
    }
  } finally {
    await deleteKeys(admin, `${prefix}*`).catch(() => undefined);
    for (const r of [admin, rawRedis, gateRedis, pipelinedRedis, answering]) r?.disconnect();
    await pool.end();
  }

  const withRatio = withRatios(rows);
  const maxInFlight = Math.max(...concurrencies);
  const caseNames = [...concurrencies.map((c) => inFlightCase('DUPLICATE', c)), noRedisCase(maxInFlight)];
  const gateWork = caseNames.map((caseName) => ({ case: caseName, us: gateWorkUs(withRatio, caseName) }));
  return {
    name: 'answer-cost',
    title: "Answer cost: a DUPLICATE answer of SagaClient.start against Rms.reserve alone, and the client's CPU per answer",
    baseline: 'Rms.reserve alone: the raw RMS call on the same Redis, key prefix and intent, on its own ioredis connection as the client has one',
    method:
      `One cart's entity exists (reserved and finalised by another session); every SagaClient.start asks for that cart under a new idempotency key and must be answered DUPLICATE ` +
      `(started: false), every Rms.reserve asks for its intent with one of N sessions. N in flight = N concurrent requests from one process. Rounds of ${roundMs} ms after ${warmupMs} ms of warm-up, ` +
      `the two contenders alternating. client CPU = process.cpuUsage() over the round ÷ answers (the bench loop included, the same for both). ` +
      `The client reaches neither Temporal nor PostgreSQL (a DUPLICATE needs neither). "no Redis": the same two over an ioredis client that never connects and answers each reserve ` +
      `at once with the reply Redis gives (answers/s there is the client's own ceiling). "${CONTENDERS.pipelined}": SagaClient.start on an ioredis client with enableAutoPipelining ` +
      `(commands of one tick in one socket write), a measure of what batching the writes would give; SagaClient.connect does not make such a client.`,
    columns: [...ANSWER_COLUMNS, { metric: 'cpu:bench', label: 'client CPU µs/answer', better: 'lower', digits: 1 }],
    rows: withRatio,
    targets: targetsOf(withRatio, maxInFlight, gateWork),
    chartMetric: 'throughput',
    notes: [
      `The gate's work per answer besides the Redis call (client CPU µs per answer of SagaClient.start less that of Rms.reserve alone, median of the rounds' differences): ` +
        `${gateWork.map((g) => `${formatNumber(g.us, 1)} µs at ${g.case}`).join('; ')}. Against real Redis the difference also holds the socket writes made dearer ` +
        `by the slower pace of answers (each write wakes Redis more often); without Redis it is the gate's own work.`,
      ...profiles.map(
        (p) =>
          `Where the client's CPU per answer goes at ${p.case}, by stage (one extra ${profileMs} ms pass of each under V8's sampling profiler, which slows both): ` +
          `${profileText(CONTENDERS.rms, p.rms)}; ${profileText(CONTENDERS.saga, p.saga)}.`,
      ),
    ],
    details: { leaseMs: LEASE_MS, gateWork, profiles },
  };
}

/** The case of `inFlight` DUPLICATE answers over an RMS client that answers at once. */
function noRedisCase(inFlight: number): string {
  return `${inFlightCase('DUPLICATE', inFlight)}, no Redis`;
}

/**
 * An ioredis client that never connects and answers every reserve at once with `reply` (the reply
 * Redis gives): Rms and the gate above it run as they do, without ioredis's command and the socket.
 */
function answeringClient(reply: unknown[]): Redis {
  const client = new Redis({ lazyConnect: true, commandTimeout: 2000 }) as Redis & { rmsReserve?: () => Promise<unknown> };
  // Rms registers its scripts on the client, leaving a method that is there already.
  client.rmsReserve = () => Promise.resolve(reply);
  return client;
}

/** Client CPU µs per answer of SagaClient.start less Rms.reserve alone's in `caseName`: the median of the per-round differences. */
function gateWorkUs(rows: Row[], caseName: string): number {
  const saga = figureOf(rows, caseName, CONTENDERS.saga, 'cpu:bench').rounds;
  const raw = figureOf(rows, caseName, CONTENDERS.rms, 'cpu:bench').rounds;
  return spread(saga.map((us, i) => us - (raw[i] ?? Number.NaN))).median;
}

/** The issue's targets at the largest count: the rate against Redis, the work besides the Redis call without it. */
function targetsOf(rows: Row[], inFlight: number, gateWork: { case: string; us: number }[]): TargetCheck[] {
  const caseName = inFlightCase('DUPLICATE', inFlight);
  const share = figureOf(rows, caseName, CONTENDERS.saga, 'throughput').ratio ?? Number.NaN;
  const work = gateWork.find((g) => g.case === noRedisCase(inFlight))!.us;
  return [
    ratioTarget(caseName, CONTENDERS.saga, 'answers/s ≥ 0.5× Rms.reserve alone', share, share >= 0.5),
    {
      case: noRedisCase(inFlight),
      contender: CONTENDERS.saga,
      requirement: `≤ ${GATE_WORK_TARGET_US} µs of client CPU per answer besides the Redis call`,
      measured: `${formatNumber(work, 1)} µs`,
      met: work <= GATE_WORK_TARGET_US,
    },
  ];
}
