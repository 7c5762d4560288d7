/**
 * The demo's scripted scenario: real `order` sagas through a real worker, one scene at a time, each
 * saga checked against what the design says must happen. Customers carry the run id, so every run
 * creates new intents and the same database gives the same outcomes run after run.
 */
import type { SagaClient, StartedSaga } from '../../src/client';
import type { Rms } from '../../src/rms';
import { DECLINED_CARD, type OrderInput } from '../../src/sagas';
import { isTerminal, type SagaState } from '../../src/shared';

/** One saga of the summary table. */
export interface DemoRow {
  /** Stable name within a run: dup-1 … dup-5, retry, declined, short-stock, long-write. */
  id: string;
  /** What the saga shows, for the table. */
  saga: string;
  workflowId: string;
  intentKey: string;
  /** The early answer of the reservation: SUCCESS, DUPLICATE or CONFLICT. */
  answer: string;
  fencingToken?: string;
  outcome: string;
  reason?: string;
  compensationsRun: string[];
  /** The saga in the Temporal UI. */
  url: string;
  /** What the scenario expects, in words. */
  expected: string;
  /** Whether the saga ended as expected. */
  ok: boolean;
}

/** What the scenario needs. */
export interface ScenarioContext {
  client: SagaClient;
  rms: Rms;
  /** Short id of this run; part of every customer and idempotency key. */
  runId: string;
  /** The lease the sagas are started with (the long write takes three times as long). */
  leaseMs: number;
  /** Prints a progress line. */
  say: (line: string) => void;
}

/** A cart of `customer` (made unique by the run id) with overrides. */
function cart(ctx: ScenarioContext, customer: string, overrides: Partial<OrderInput> = {}): OrderInput {
  return {
    customer: `demo-${ctx.runId}-${customer}`,
    items: [
      { sku: 'widget', quantity: 2, priceCents: 1250 },
      { sku: 'gadget', quantity: 1, priceCents: 4999 },
    ],
    payment: { card: '4242424242424242' },
    ...overrides,
  };
}

const key = (ctx: ScenarioContext, name: string) => `demo-${ctx.runId}-${name}`;

function describeAnswer(s: StartedSaga): string {
  const r = s.reservation;
  if (r.status === 'SUCCESS') return `SUCCESS, fencing token ${r.fencingToken}`;
  if (r.status === 'CONFLICT') return `CONFLICT, retry after ${r.retryAfterMs} ms`;
  return 'DUPLICATE';
}

/**
 * Prints the saga's phases as they change until it ends (polling the `state` query), calling `tick`
 * on each poll; resolves with its final state.
 */
async function follow(ctx: ScenarioContext, workflowId: string, tick?: (state: SagaState) => Promise<void>): Promise<SagaState> {
  let last = '';
  for (;;) {
    const { state } = await ctx.client.status(workflowId);
    if (state.phase !== last) {
      last = state.phase;
      const extra = state.phase === 'COMPENSATING' && state.errors.length ? ` (${state.errors[state.errors.length - 1]!.message})` : '';
      ctx.say(`     ${workflowId}: ${state.phase}${extra}`);
    }
    if (isTerminal(state.phase)) break;
    await tick?.(state);
    await new Promise((r) => setTimeout(r, 100));
  }
  return ctx.client.result(workflowId);
}

function row(
  id: string,
  saga: string,
  s: StartedSaga,
  final: SagaState,
  expected: string,
  ok: boolean,
): DemoRow {
  return {
    id,
    saga,
    workflowId: s.workflowId,
    intentKey: s.intentKey,
    answer: s.reservation.status,
    fencingToken: s.reservation.status === 'SUCCESS' ? s.reservation.fencingToken : undefined,
    outcome: final.outcome ?? final.phase,
    reason: final.reason,
    compensationsRun: final.compensationsRun,
    url: s.url,
    expected,
    ok,
  };
}

const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Scene 1: four concurrent submissions of one cart, then a fifth after the first saga ended. */
async function duplicates(ctx: ScenarioContext): Promise<DemoRow[]> {
  const data = cart(ctx, 'ada');
  ctx.say(`1/5  Four submissions of one cart at once (customer ${data.customer}), each with its own idempotency key`);
  const started = await Promise.all([1, 2, 3, 4].map((n) => ctx.client.start('order', data, { idempotencyKey: key(ctx, `dup-${n}`) })));
  for (const s of started) ctx.say(`     ${s.workflowId}: ${describeAnswer(s)}`);
  const winners = started.filter((s) => s.reservation.status === 'SUCCESS');
  const finals = await Promise.all(started.map((s) => (s === winners[0] ? follow(ctx, s.workflowId) : ctx.client.result(s.workflowId))));
  const rows = started.map((s, i) => {
    const final = finals[i]!;
    if (s.reservation.status === 'SUCCESS') {
      return row(`dup-${i + 1}`, `duplicates: ${i + 1} of 4 at once`, s, final, 'the only SUCCESS; COMPLETED', winners.length === 1 && final.outcome === 'COMPLETED');
    }
    return row(
      `dup-${i + 1}`,
      `duplicates: ${i + 1} of 4 at once`,
      s,
      final,
      'CONFLICT or DUPLICATE; REJECTED',
      final.outcome === 'REJECTED' && final.reason === s.reservation.status,
    );
  });
  const late = await ctx.client.start('order', data, { idempotencyKey: key(ctx, 'dup-5') });
  ctx.say(`     ${late.workflowId} (sent after the first one completed): ${describeAnswer(late)}`);
  const lateFinal = await ctx.client.result(late.workflowId);
  rows.push(
    row('dup-5', 'duplicates: 5th, sent later', late, lateFinal, 'DUPLICATE; REJECTED', late.reservation.status === 'DUPLICATE' && lateFinal.outcome === 'REJECTED'),
  );
  return rows;
}

/** Scene 2: a client retries with the same idempotency key, while the saga runs and after it ended. */
async function retry(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'grace');
  const idempotencyKey = key(ctx, 'retry');
  ctx.say(`2/5  A client sends one request three times with idempotency key ${idempotencyKey}`);
  const first = await ctx.client.start('order', data, { idempotencyKey });
  ctx.say(`     call 1 → ${first.workflowId}: ${describeAnswer(first)}`);
  const second = await ctx.client.start('order', data, { idempotencyKey });
  ctx.say(`     call 2 (a retry while it runs) → ${second.workflowId}: ${describeAnswer(second)}`);
  const final = await follow(ctx, first.workflowId);
  const third = await ctx.client.start('order', data, { idempotencyKey });
  ctx.say(`     call 3 (a retry after it ended) → ${third.workflowId}: ${describeAnswer(third)}`);
  const answers = [first, second, third].map((s) => JSON.stringify([s.workflowId, s.runId, s.reservation]));
  const ok = first.reservation.status === 'SUCCESS' && new Set(answers).size === 1 && final.outcome === 'COMPLETED';
  return row('retry', 'retry: one key sent 3 times', first, final, 'one saga, the same answer 3 times; COMPLETED', ok);
}

/** Scene 3: the card is declined: the saga compensates (no charge to refund; the row is undone). */
async function declined(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'dan', { payment: { card: DECLINED_CARD } });
  ctx.say(`3/5  An order paid with card ${DECLINED_CARD}, which the example payment step declines`);
  const s = await ctx.client.start('order', data, { idempotencyKey: key(ctx, 'declined') });
  ctx.say(`     ${s.workflowId}: ${describeAnswer(s)}`);
  const final = await follow(ctx, s.workflowId);
  ctx.say(`     compensations run: ${final.compensationsRun.join(', ')}`);
  const ok = final.outcome === 'COMPENSATED' && final.reason === 'STEP_REJECTED' && same(final.compensationsRun, ['refundPayment', 'undoEntity']);
  return row('declined', 'declined payment', s, final, 'COMPENSATED: refundPayment, undoEntity', ok);
}

/** Scene 4: more rare coins than exist: the payment is refunded, the stock released, the row undone. */
async function shortStock(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'eve', { items: [{ sku: 'rare-coin', quantity: 5, priceCents: 100_000 }] });
  ctx.say('4/5  An order for 5 rare coins (the example stock holds 1): charged, then short of stock');
  const s = await ctx.client.start('order', data, { idempotencyKey: key(ctx, 'short-stock') });
  ctx.say(`     ${s.workflowId}: ${describeAnswer(s)}`);
  const final = await follow(ctx, s.workflowId);
  ctx.say(`     compensations run, in reverse order: ${final.compensationsRun.join(', ')}`);
  const ok =
    final.outcome === 'COMPENSATED' &&
    final.reason === 'STEP_REJECTED' &&
    same(final.stepsDone, ['chargePayment']) &&
    same(final.compensationsRun, ['releaseStock', 'refundPayment', 'undoEntity']);
  return row('short-stock', 'short stock (rare-coin × 5)', s, final, 'COMPENSATED: releaseStock, refundPayment, undoEntity', ok);
}

/** Scene 5: a write three times longer than the lease, kept alive by the heartbeats that extend it. */
async function longWrite(ctx: ScenarioContext): Promise<DemoRow> {
  const writeDelayMs = 3 * ctx.leaseMs;
  const data = cart(ctx, 'frank', { simulate: { writeDelayMs } });
  ctx.say(`5/5  A write that takes ${writeDelayMs / 1000} s under a ${ctx.leaseMs / 1000} s lease; every heartbeat extends the lease`);
  const s = await ctx.client.start('order', data, { idempotencyKey: key(ctx, 'long-write') });
  ctx.say(`     ${s.workflowId}: ${describeAnswer(s)}`);
  if (s.reservation.status !== 'SUCCESS') {
    return row('long-write', `long write (${writeDelayMs / 1000} s)`, s, await ctx.client.result(s.workflowId), 'COMPLETED', false);
  }
  const { fencingToken, expiresAt: initialExpiry } = s.reservation;
  let lastReport = 0;
  const final = await follow(ctx, s.workflowId, async (state) => {
    if (state.phase !== 'WRITING' || Date.now() - lastReport < 1000) return;
    lastReport = Date.now();
    const { holder } = await ctx.rms.inspect(s.intentKey);
    if (!holder || holder.fencingToken !== fencingToken) return;
    const past = Date.now() - initialExpiry;
    ctx.say(
      `     lease held, ${(holder.remainingMs / 1000).toFixed(1)} s left; the initial lease ${past > 0 ? `ended ${(past / 1000).toFixed(1)} s ago` : `ends in ${(-past / 1000).toFixed(1)} s`}`,
    );
  });
  // The write checks that it still holds the lease just before it commits, so a write that committed
  // after the initial lease's end held a lease its heartbeats had extended.
  const committedAt = await writeCommittedAt(ctx, s.workflowId);
  const margin = committedAt === undefined ? undefined : committedAt - initialExpiry;
  if (margin !== undefined) {
    ctx.say(`     the write committed ${(Math.abs(margin) / 1000).toFixed(1)} s ${margin > 0 ? 'after' : 'before'} the initial lease would have ended`);
  }
  const ok = final.outcome === 'COMPLETED' && margin !== undefined && margin > 0;
  return row('long-write', `long write (${writeDelayMs / 1000} s, lease ${ctx.leaseMs / 1000} s)`, s, final, 'COMPLETED, holding the lease past its initial expiry', ok);
}

/** When the saga's writeEntity activity completed (epoch ms, by its history), if it did. */
async function writeCommittedAt(ctx: ScenarioContext, workflowId: string): Promise<number | undefined> {
  const events = (await ctx.client.temporal.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'writeEntity');
  const completed = events.find(
    (e) => scheduled && e.activityTaskCompletedEventAttributes && String(e.activityTaskCompletedEventAttributes.scheduledEventId) === String(scheduled.eventId),
  );
  const t = completed?.eventTime;
  return t ? Number(String(t.seconds ?? 0)) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : undefined;
}

/** Runs every scene in order and returns one row per saga. */
export async function runScenario(ctx: ScenarioContext): Promise<DemoRow[]> {
  const rows: DemoRow[] = [];
  for (const scene of [duplicates, retry, declined, shortStock, longWrite]) {
    rows.push(...[await scene(ctx)].flat());
    ctx.say('');
  }
  return rows;
}
