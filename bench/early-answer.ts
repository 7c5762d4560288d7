/**
 * Benchmark 3: the early answer. SagaClient.start is a gate: it reserves the request's intent in Redis
 * and answers DUPLICATE or CONFLICT without Temporal, or starts the saga (one workflow.start) on
 * SUCCESS. Each answer is timed at several concurrencies against what it is made of or replaces:
 * DUPLICATE and CONFLICT against Rms.reserve alone (baseline) and the PostgreSQL-only design, SUCCESS
 * against a bare workflow.start of an empty workflow (baseline) and the gate alone. The workflows the
 * rejected requests started are counted on the task queue (Temporal visibility): there must be none.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Client } from '@temporalio/client';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import type { SagaClient } from '../src/client';
import { createPool } from '../src/db';
import { reserveIntent } from '../src/gate';
import { Rms, createRedis } from '../src/rms';
import { devServerMeter, type CpuMeter } from './lib/cpu';
import { closedLoop, forDuration, meteredLoopContender } from './lib/load';
import { profileAnswers, profileText, type AnswerProfile } from './lib/profile';
import { submitPgOnly } from './lib/pg-only';
import { ANSWER_COLUMNS, baselineRatio, cpuNote, figureOf, formatNumber, ratioOf, ratioTarget, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { caseRows, inFlightCase, type BenchContext, type Contender } from './lib/rounds';
import { latencyPercentiles } from './lib/stats';
import { completeOrderSaga, countOnTaskQueue, connectClients, freshOrder, untilCompleted, untilVisible, within } from './lib/temporal-load';
import { emptyWorkflow } from './workflows';
import { ordersTable, type OrderInput } from '../test/fixtures/orders';

const CONTENDERS = {
  rms: 'Rms.reserve alone',
  saga: 'SagaClient.start',
  pg: 'PostgreSQL-only',
  start: 'workflow.start (empty)',
  gate: 'gate alone (reserveIntent)',
} as const;

type Rejection = 'DUPLICATE' | 'CONFLICT';
const REJECTIONS: readonly Rejection[] = ['DUPLICATE', 'CONFLICT'];

/** The CONFLICT holder's lease: longer than any run, released when the rejected cases are done. */
const HOLD_MS = 60 * 60 * 1000;
/** Starts of a SUCCESS warm-up (at most one per lane). */
const SUCCESS_WARMUP_STARTS = 8;
const DRAIN_TIMEOUT_MS = 180_000;

/** What the cases share: the clients, the bench's own connections, the meter and the run's settings. */
interface Deps {
  ctx: BenchContext;
  client: Client;
  sagas: SagaClient;
  /** The bench's RMS: its own ioredis connection (as SagaClient has one), on the saga workers' key prefix. */
  rms: Rms;
  /** One PostgreSQL connection per caller, for the PostgreSQL-only design and the gate alone. */
  pool: pg.Pool;
  meter: CpuMeter;
  /** A session per lane, for Rms.reserve alone. */
  sessions: string[];
  leaseMs: number;
}

/** Runs benchmark 3. */
export async function earlyAnswer(ctx: BenchContext): Promise<BenchResult> {
  const { sizes, progress, workers } = ctx;
  const { concurrencies, rejectedRoundMs, startsPerRound } = sizes.earlyAnswer;
  const maxInFlight = Math.max(...concurrencies);
  const { taskQueue } = workers.sagaConfig.temporal;
  await workers.scaleTo(1);
  const { client, sagas, close } = await connectClients(workers);
  const redis = createRedis(workers.sagaConfig.redis) as Redis;
  const deps: Deps = {
    ctx,
    client,
    sagas,
    rms: new Rms(redis, { keyPrefix: workers.sagaConfig.redis.keyPrefix }),
    pool: createPool({ ...workers.sagaConfig.db, poolMax: maxInFlight }),
    meter: devServerMeter(redis, { 'saga worker': () => workers.sagaPids }),
    sessions: Array.from({ length: maxInFlight }, () => randomUUID()),
    leaseMs: workers.sagaConfig.saga.leaseMs,
  };
  const { rms, pool } = deps;
  const rows: Row[] = [];
  const holder = { intent: '', sessionId: randomUUID(), fencingToken: '' };
  const profiles: CaseProfiles[] = [];
  let visibility: { before: number; after: number; rejected: number; started: number };

  try {
    // DUPLICATE: one saga of a cart runs to completion; a request for that cart under any other key is a duplicate.
    progress.update('early-answer: running the saga whose cart the DUPLICATE requests repeat');
    const duplicateCart = freshOrder();
    const first = await completeOrderSaga(sagas, 'early-answer', duplicateCart);
    // CONFLICT: another session holds the cart's intent. In the PostgreSQL-only design that holder
    // has committed its registration (status REGISTERED), so a second request hits 23505 too.
    const conflictCart = freshOrder();
    holder.intent = sagas.prepare('order', conflictCart).intentKey;
    const held = await rms.reserve({ intent: holder.intent, sessionId: holder.sessionId, leaseMs: HOLD_MS });
    if (held.status !== 'SUCCESS') throw new Error(`early-answer: the CONFLICT holder was answered ${held.status}`);
    holder.fencingToken = held.fencingToken;
    if ((await submitPgOnly(pool, holder.intent, `holder-${holder.sessionId}`)) !== 'created') throw new Error('early-answer: the holder row exists already');

    await untilVisible(client, first.workflowId);
    const workflowsBefore = await countOnTaskQueue(client, taskQueue);
    const gateBefore = sagas.gateCounts;
    for (const [answer, cart, intent] of [
      ['DUPLICATE', duplicateCart, first.intentKey],
      ['CONFLICT', conflictCart, holder.intent],
    ] as const) {
      for (const concurrency of concurrencies) {
        const measured = await rejectedCase(deps, answer, concurrency, cart, intent, concurrency === maxInFlight);
        rows.push(...measured.rows);
        if (measured.profiles) profiles.push({ case: inFlightCase(answer, concurrency), ...measured.profiles });
      }
    }

    // The rejected requests' workflows: a saga started after the last of them is waited for until
    // visibility lists it, then the task queue is counted again; the difference less that saga.
    const gateAfter = sagas.gateCounts;
    if (gateAfter.SUCCESS !== gateBefore.SUCCESS) throw new Error('early-answer: a rejected case was answered SUCCESS');
    const rejected = gateAfter.DUPLICATE - gateBefore.DUPLICATE + gateAfter.CONFLICT - gateBefore.CONFLICT;
    progress.update(`early-answer: counting the workflows of ${rejected} rejected requests on ${taskQueue}`);
    const barrier = await completeOrderSaga(sagas, 'early-answer');
    await untilVisible(client, barrier.workflowId);
    const workflowsAfter = await countOnTaskQueue(client, taskQueue);
    if (workflowsAfter - workflowsBefore < 1) throw new Error(`early-answer: the task queue count (${workflowsBefore} → ${workflowsAfter}) missed the barrier saga`);
    visibility = { before: workflowsBefore, after: workflowsAfter, rejected, started: workflowsAfter - workflowsBefore - 1 };
    await rms.release(holder);
    holder.fencingToken = '';

    for (const concurrency of concurrencies) rows.push(...(await successCase(deps, concurrency)));
  } finally {
    if (holder.fencingToken) await rms.release(holder).catch(() => undefined);
    redis.disconnect();
    await pool.end();
    await close();
  }

  const withRatio = withRatios(rows);
  const rejectedPer = visibility.rejected > 0 ? visibility.started / visibility.rejected : Number.NaN;
  return {
    name: 'early-answer',
    title: '3. Early answer: time to the answer of SagaClient.start',
    baseline:
      'for DUPLICATE and CONFLICT, Rms.reserve alone (the raw RMS call on the same Redis and key prefix, one ioredis connection as SagaClient has); ' +
      'for SUCCESS, client.workflow.start of an empty workflow on the same dev server and connection (answered once the start is recorded)',
    method:
      `N in flight = N concurrent requests from one process. DUPLICATE: one order saga of a cart ran to completion first; every request repeats that cart under a new idempotency key. ` +
      `CONFLICT: another session holds the cart's intent (Rms.reserve, lease ${HOLD_MS / 60_000} min); every request repeats that cart under a new key. ` +
      `SagaClient.start must answer DUPLICATE or CONFLICT with started: false; Rms.reserve alone asks the same intent with one of N sessions. ` +
      `PostgreSQL-only: the multi-table write transaction (orders, payments, stock_reservations) on one PostgreSQL connection per caller, answered by 23505 from the UNIQUE intent_key ` +
      `(in the CONFLICT case the holder's REGISTERED row is committed: a design without leases learns "in progress" the same way). ` +
      `SUCCESS: a fresh order per request (its own customer); SagaClient.start = reserve + one PostgreSQL lookup + one workflow.start of the saga, which must end COMPLETED; ` +
      `gate alone = reserveIntent (src/gate.ts) on a fresh intent, no workflow. DUPLICATE and CONFLICT rounds last ${rejectedRoundMs} ms; a SUCCESS round is ` +
      `${concurrencies.map((c) => `${startsPerRound(c)} starts at ${c}`).join(', ')} in flight, and waits for its workflows to end. One worker process of each kind. answers/s is over the round's steady part.`,
    columns: ANSWER_COLUMNS,
    rows: withRatio,
    targets: [
      ...targetsOf(withRatio, concurrencies),
      {
        case: 'rejected requests',
        contender: CONTENDERS.saga,
        requirement: '0 workflows started per rejected request',
        measured: `${visibility.started} / ${visibility.rejected} = ${formatNumber(rejectedPer, 3)}`,
        met: visibility.started === 0 && visibility.rejected > 0,
      },
    ],
    chartMetric: 'p50',
    chartScale: 'log',
    notes: [
      `Workflows started per rejected request: ${visibility.rejected.toLocaleString('en-US')} DUPLICATE and CONFLICT answers of SagaClient.start (warm-ups included) started ` +
        `${visibility.started} workflows (${formatNumber(rejectedPer, 3)} per request): Temporal visibility counted ${visibility.before} workflows on ${taskQueue} before them and ` +
        `${visibility.after} after, read once a saga started after them was listed (that saga is the one more).`,
      ...REJECTIONS.map((answer) => cpuNote(withRatio, inFlightCase(answer, maxInFlight), 'µs', 'request')),
      ...profiles.map(
        (p) =>
          `Where the client's CPU goes at ${p.case}, one extra ${rejectedRoundMs} ms pass of each under V8's sampling profiler (bench/lib/profile.ts; the profiler slows both): ` +
          `${profileText(CONTENDERS.rms, p.rms)}; ${profileText(CONTENDERS.saga, p.saga)}.`,
      ),
      successNote(withRatio, concurrencies),
    ],
    details: { holdMs: HOLD_MS, leaseMs: deps.leaseMs, taskQueue, visibility, profiles },
  };
}

/**
 * One DUPLICATE or CONFLICT case: requests for `cart` (whose intent is `intent`) under new keys
 * through SagaClient.start, against Rms.reserve on the intent and the PostgreSQL-only write. Every
 * answer is checked: anything but `answer` (or a started workflow) ends the run.
 */
async function rejectedCase(
  deps: Deps,
  answer: Rejection,
  concurrency: number,
  cart: OrderInput,
  intent: string,
  profile: boolean,
): Promise<{ rows: Row[]; profiles?: { rms: AnswerProfile; saga: AnswerProfile } }> {
  const { ctx, sagas, rms, pool, meter, sessions, leaseMs } = deps;
  const { rejectedRoundMs, rejectedWarmupMs } = ctx.sizes.earlyAnswer;
  const wrong = (who: string, got: string) => new Error(`early-answer: ${who} answered ${got} where ${answer} was due`);
  /** A contender: `ask(lane)` sends one request and returns its latency (ms). */
  const contender = (name: string, ask: (lane: number) => Promise<number>): Contender & { ask: (lane: number) => Promise<number> } => ({
    ...meteredLoopContender(name, meter, 'µs', (warmup) => forDuration(concurrency, warmup ? rejectedWarmupMs : rejectedRoundMs), ask),
    ask,
  });
  const rmsAlone = contender(CONTENDERS.rms, async (lane) => {
    const t0 = performance.now();
    const reply = await rms.reserve({ intent, sessionId: sessions[lane]!, leaseMs });
    const ms = performance.now() - t0;
    if (reply.status !== answer) throw wrong(CONTENDERS.rms, reply.status);
    return ms;
  });
  const saga = contender(CONTENDERS.saga, async () => {
    const idempotencyKey = randomUUID();
    const t0 = performance.now();
    const started = await sagas.start('order', cart, { idempotencyKey });
    const ms = performance.now() - t0;
    if (started.reservation.status !== answer || started.started) throw wrong(CONTENDERS.saga, `${started.reservation.status} (started: ${started.started})`);
    return ms;
  });
  const pgOnly = contender(CONTENDERS.pg, async (lane) => {
    const t0 = performance.now();
    const outcome = await submitPgOnly(pool, intent, `${intent}/${lane}`);
    const ms = performance.now() - t0;
    if (outcome !== 'duplicate') throw wrong(CONTENDERS.pg, outcome);
    return ms;
  });
  const caseName = inFlightCase(answer, concurrency);
  const rows = await caseRows('early-answer', caseName, CONTENDERS.rms, [rmsAlone, saga, pgOnly], ctx.sizes.rounds, ctx.progress);
  if (!profile) return { rows };
  ctx.progress.update(`early-answer ${caseName}: profiling the client's CPU per answer`);
  const profiled = (c: typeof saga) => profileAnswers(async () => (await closedLoop({ ...forDuration(concurrency, rejectedRoundMs), op: c.ask })).ops);
  return { rows, profiles: { rms: await profiled(rmsAlone), saga: await profiled(saga) } };
}

/** The profiles of one case: Rms.reserve alone and SagaClient.start (see bench/lib/profile.ts). */
interface CaseProfiles {
  case: string;
  rms: AnswerProfile;
  saga: AnswerProfile;
}

/**
 * One SUCCESS case: fresh orders through SagaClient.start (each saga must end COMPLETED), against
 * a bare workflow.start of an empty workflow and the gate alone on fresh intents.
 */
async function successCase(deps: Deps, concurrency: number): Promise<Row[]> {
  const { ctx, client, sagas, rms, pool, leaseMs } = deps;
  const { successRounds, startsPerRound, successRoundMs } = ctx.sizes.earlyAnswer;
  const caseName = inFlightCase('SUCCESS', concurrency);
  /**
   * A contender: `start` sends one request and returns its latency and, when it started a workflow,
   * a promise of its end. Each round waits for every workflow it started to end, so the next round
   * starts on an idle worker.
   */
  const contender = (name: string, start: () => Promise<{ ms: number; end?: Promise<unknown> }>): Contender => ({
    name,
    run: async ({ warmup }) => {
      const ends: Promise<unknown>[] = [];
      const r = await closedLoop({
        concurrency,
        durationMs: successRoundMs,
        maxOps: warmup ? Math.min(concurrency, SUCCESS_WARMUP_STARTS) : startsPerRound(concurrency),
        op: async () => {
          const { ms, end } = await start();
          if (end) {
            end.catch(() => undefined);
            ends.push(end);
          }
          return ms;
        },
      });
      if (ends.length > 0) {
        ctx.progress.update(`early-answer ${caseName}: waiting for ${ends.length} ${name} workflows to end`);
        await within(`${name}: ${ends.length} workflows`, DRAIN_TIMEOUT_MS, ends);
      }
      const { p50, p99 } = latencyPercentiles(r.latencies, r.samples);
      return { throughput: r.throughput, p50, p99 };
    },
  });
  const bare = contender(CONTENDERS.start, async () => {
    const workflowId = `bench-empty-${randomUUID()}`;
    const t0 = performance.now();
    const handle = await client.workflow.start(emptyWorkflow, { taskQueue: ctx.workers.bareConfig.temporal.taskQueue, workflowId });
    return { ms: performance.now() - t0, end: handle.result() };
  });
  const saga = contender(CONTENDERS.saga, async () => {
    const order = freshOrder();
    const idempotencyKey = randomUUID();
    const t0 = performance.now();
    const started = await sagas.start('order', order, { idempotencyKey });
    const ms = performance.now() - t0;
    if (started.reservation.status !== 'SUCCESS' || !started.started) throw new Error(`early-answer: a fresh order was answered ${started.reservation.status}`);
    return { ms, end: untilCompleted(sagas, 'early-answer', started.workflowId) };
  });
  const gate = contender(CONTENDERS.gate, async () => {
    const { intentKey } = sagas.prepare('order', freshOrder());
    const sessionId = randomUUID();
    const t0 = performance.now();
    const answer = await reserveIntent({ rms, pool }, { table: ordersTable, intentKey, sessionId, leaseMs });
    const ms = performance.now() - t0;
    if (answer.status !== 'SUCCESS') throw new Error(`early-answer: the gate answered a fresh intent ${answer.status}`);
    return { ms };
  });
  return caseRows('early-answer', caseName, CONTENDERS.start, [bare, saga, gate], successRounds, ctx.progress);
}

/** The targets of the issue that this run's cases can judge. */
function targetsOf(rows: Row[], concurrencies: number[]): TargetCheck[] {
  const targets: TargetCheck[] = [];
  for (const answer of REJECTIONS) {
    if (concurrencies.includes(1)) {
      const p50 = figureOf(rows, inFlightCase(answer, 1), CONTENDERS.saga, 'p50').median;
      targets.push({ case: inFlightCase(answer, 1), contender: CONTENDERS.saga, requirement: 'p50 ≤ 1 ms', measured: `${p50.toFixed(3)} ms`, met: p50 <= 1 });
    }
    for (const c of [1, 64].filter((n) => concurrencies.includes(n))) {
      const ratio = baselineRatio(rows, inFlightCase(answer, c), CONTENDERS.saga, 'p50');
      targets.push(ratioTarget(inFlightCase(answer, c), CONTENDERS.saga, 'p50 ≤ 2× Rms.reserve alone', ratio, ratio <= 2));
    }
    if (concurrencies.includes(64)) {
      const speedup = ratioOf(rows, inFlightCase(answer, 64), CONTENDERS.pg, CONTENDERS.saga, 'p50');
      targets.push(ratioTarget(inFlightCase(answer, 64), CONTENDERS.saga, '≥ 20× faster (p50) than PostgreSQL-only', speedup, speedup >= 20));
      const share = baselineRatio(rows, inFlightCase(answer, 64), CONTENDERS.saga, 'throughput');
      targets.push(ratioTarget(inFlightCase(answer, 64), CONTENDERS.saga, 'answers/s ≥ 0.6× Rms.reserve alone', share, share >= 0.6));
    }
  }
  for (const c of [1, 32].filter((n) => concurrencies.includes(n))) {
    const ratio = baselineRatio(rows, inFlightCase('SUCCESS', c), CONTENDERS.saga, 'p50');
    targets.push(ratioTarget(inFlightCase('SUCCESS', c), CONTENDERS.saga, 'p50 ≤ 2× workflow.start', ratio, ratio <= 2));
  }
  return targets;
}

/** Where a SUCCESS answer's time goes: the gate and a start, from the medians at each concurrency. */
function successNote(rows: Row[], concurrencies: number[]): string {
  const parts = concurrencies.map((c) => {
    const p50 = (contender: string) => formatNumber(figureOf(rows, inFlightCase('SUCCESS', c), contender, 'p50').median, 2);
    return `at ${c} in flight ${p50(CONTENDERS.saga)} ms against gate alone ${p50(CONTENDERS.gate)} + workflow.start (empty) ${p50(CONTENDERS.start)}`;
  });
  return `Where a SUCCESS answer's time goes (p50 of SagaClient.start; the saga's start also carries its input, a memo and three search attributes): ${parts.join('; ')}.`;
}
