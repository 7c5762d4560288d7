/**
 * The demo's scripted scenario: real `order` requests through the gate (`SagaClient.start`) and a
 * real worker, one scene at a time, each answer and each saga checked against what the design says
 * must happen. Customers carry the run id, so every run creates new intents and the same database
 * gives the same outcomes run after run.
 */
import { performance } from 'node:perf_hooks';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { SagaClient, StartedSaga } from '../../src/client';
import type { Rms } from '../../src/rms';

import { isTerminal, sagaWorkflowId, type ReservationAnswer, type SagaState } from '../../src/shared';
import type { TemporalCli } from './stack';
import { readableHistory, temporalAnswerArgs, temporalResultArgs, temporalShowArgs, temporalStartArgs } from './temporal-cli';
import { DECLINED_CARD, REFUND_REFUSED_CARD, type SimulatedOrderInput } from '../../test/fixtures/orders';

/** What the table shows for a request that the gate rejected: it has no saga. */
export const REJECTED_AT_GATE = 'rejected at the gate';

/** One request of the summary table, and the saga it started or joined, if any. */
export interface DemoRow {
  /** Stable name within a run: dup-1 … dup-5, retry-1 … retry-3, declined, short-stock, long-write, plain-client, race-…, expired, attention. */
  id: string;
  /** What the request shows, for the table. */
  request: string;
  /** The workflow id its idempotency key names; a saga by that id exists only when `started`. */
  workflowId: string;
  /** Whether a saga exists for the request (false: rejected at the gate, no workflow). */
  started: boolean;
  intentKey: string;
  /** The answer: SUCCESS, DUPLICATE or CONFLICT. */
  answer: string;
  /** Whether the request went through the gate, `SagaClient.start` (the Temporal CLI's did not). */
  viaGate: boolean;
  /** How long `SagaClient.start` took to answer, in ms (absent for the Temporal CLI's request). */
  answerMs?: number;
  fencingToken?: string;
  /** The saga's final outcome, or {@link REJECTED_AT_GATE}. */
  outcome: string;
  reason?: string;
  compensationsRun: string[];
  /** The saga in the Temporal UI; absent when no saga was started. */
  url?: string;
  /** What the scenario expects, in words. */
  expected: string;
  /** Whether the request was answered, and its saga ended, as expected. */
  ok: boolean;
}

/** What the scenario needs. */
export interface ScenarioContext {
  client: SagaClient;
  rms: Rms;
  /** The task queue the worker polls (the Temporal CLI's saga is started there). */
  taskQueue: string;
  /** Runs the Temporal CLI against the demo's server; resolves with its stdout. */
  temporal: TemporalCli;
  /** The codec server the documented Temporal CLI commands name. */
  codecEndpoint: string;
  /** Short id of this run; part of every customer and idempotency key. */
  runId: string;
  /** The lease the sagas are started with (the long write takes three times as long). */
  leaseMs: number;
  /** Prints a progress line. */
  say: (line: string) => void;
}

/** A gate answer and how long it took. */
export type Answered = StartedSaga & { answerMs: number };

/** A saga that waits for an operator (NEEDS_ATTENTION) has not ended, but stops where it is until one redrives it. */
const settled = (state: SagaState) => isTerminal(state.phase) || state.phase === 'NEEDS_ATTENTION';

/** A cart of `customer` (made unique by the run id) with overrides. */
function cart(ctx: ScenarioContext, customer: string, overrides: Partial<SimulatedOrderInput> = {}): SimulatedOrderInput {
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

export const key = (ctx: ScenarioContext, name: string) => `demo-${ctx.runId}-${name}`;

/** One `SagaClient.start` of an order (or of another saga type), timed from the call to its answer. */
export async function send(ctx: ScenarioContext, data: unknown, idempotencyKey: string, type = 'order', deadlineMs?: number): Promise<Answered> {
  const before = performance.now();
  const s = await ctx.client.start(type, data, { idempotencyKey, ...(deadlineMs === undefined ? {} : { deadlineMs }) });
  return { ...s, answerMs: performance.now() - before };
}

function describeAnswer(r: ReservationAnswer): string {
  if (r.status === 'SUCCESS') return `SUCCESS, fencing token ${r.fencingToken}`;
  if (r.status === 'CONFLICT') return `CONFLICT, retry after ${r.retryAfterMs} ms`;
  return 'DUPLICATE';
}

/** The progress line of one answer. */
export function describe(s: Answered): string {
  const what = s.started ? `saga ${s.workflowId}${s.outcome ? `, which already ended ${s.outcome}` : ''}` : `${REJECTED_AT_GATE}, no saga started`;
  return `answered in ${s.answerMs.toFixed(1)} ms: ${describeAnswer(s.reservation)}; ${what}`;
}

/**
 * Prints the saga's phases as they change until it ends (polling the `state` query), calling `tick`
 * on each poll; resolves with its final state (or, with `until`, its state once that holds).
 */
export async function follow(ctx: ScenarioContext, workflowId: string, tick?: (state: SagaState) => Promise<void>, until = (state: SagaState) => isTerminal(state.phase)): Promise<SagaState> {
  let last = '';
  for (;;) {
    const { state } = await ctx.client.status(workflowId);
    if (state.phase !== last) {
      last = state.phase;
      const extra = state.phase === 'COMPENSATING' && state.errors.length ? ` (${state.errors[state.errors.length - 1]!.message})` : '';
      ctx.say(`     ${workflowId}: ${state.phase}${extra}`);
    }
    if (until(state)) return isTerminal(state.phase) ? ctx.client.result(workflowId) : state;
    await tick?.(state);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** True when Temporal has no workflow by this id (a request rejected at the gate must leave none). */
async function noSaga(ctx: ScenarioContext, workflowId: string): Promise<boolean> {
  try {
    await ctx.client.temporal.workflow.getHandle(workflowId).describe();
    return false;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return true;
    throw err;
  }
}

/** The row of a request that started (or joined) a saga, with the saga's final state. */
export function sagaRow(id: string, request: string, s: Answered, final: SagaState, expected: string, ok: boolean): DemoRow {
  return {
    id,
    request,
    workflowId: s.workflowId,
    started: s.started,
    intentKey: s.intentKey,
    answer: s.reservation.status,
    viaGate: true,
    answerMs: s.answerMs,
    fencingToken: s.reservation.status === 'SUCCESS' ? s.reservation.fencingToken : undefined,
    outcome: final.outcome ?? final.phase,
    reason: final.reason,
    compensationsRun: final.compensationsRun,
    url: s.url,
    expected,
    ok: ok && s.started && s.url !== undefined,
  };
}

/**
 * The row of a request the gate must reject with one of `statuses`: answered at once, no run, no
 * link, and no workflow in Temporal. Nothing is waited for.
 */
export async function rejectedRow(ctx: ScenarioContext, id: string, request: string, s: Answered, statuses: readonly string[], ok = true): Promise<DemoRow> {
  const rejected = statuses.includes(s.reservation.status) && !s.started && s.runId === undefined && s.url === undefined;
  return {
    id,
    request,
    workflowId: s.workflowId,
    started: s.started,
    intentKey: s.intentKey,
    answer: s.reservation.status,
    viaGate: true,
    answerMs: s.answerMs,
    outcome: s.started ? `a saga was started (${s.workflowId})` : REJECTED_AT_GATE,
    compensationsRun: [],
    url: s.url,
    expected: `${statuses.join(' or ')}, ${REJECTED_AT_GATE}: no saga`,
    ok: ok && rejected && (await noSaga(ctx, s.workflowId)),
  };
}

const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

const tokenOf = (s: StartedSaga) => (s.reservation.status === 'SUCCESS' ? s.reservation.fencingToken : undefined);

/** Scene 1: four concurrent submissions of one cart, then a fifth after the first saga ended. */
async function duplicates(ctx: ScenarioContext): Promise<DemoRow[]> {
  const data = cart(ctx, 'ada');
  ctx.say(`1/10  Four submissions of one cart at once (customer ${data.customer}), each with its own idempotency key`);
  const answered = await Promise.all([1, 2, 3, 4].map((n) => send(ctx, data, key(ctx, `dup-${n}`))));
  answered.forEach((s, i) => ctx.say(`     dup-${i + 1}: ${describe(s)}`));
  const winners = answered.filter((s) => s.started);
  const finals = new Map<string, SagaState>();
  for (const s of winners) finals.set(s.workflowId, await follow(ctx, s.workflowId));
  const rows: DemoRow[] = [];
  for (const [i, s] of answered.entries()) {
    const request = `duplicates: ${i + 1} of 4 at once`;
    const final = finals.get(s.workflowId);
    rows.push(
      final
        ? sagaRow(`dup-${i + 1}`, request, s, final, 'the only SUCCESS; COMPLETED', winners.length === 1 && final.outcome === 'COMPLETED')
        : await rejectedRow(ctx, `dup-${i + 1}`, request, s, ['CONFLICT', 'DUPLICATE'], winners.length === 1),
    );
  }
  const late = await send(ctx, data, key(ctx, 'dup-5'));
  ctx.say(`     dup-5, sent after the first one completed: ${describe(late)}`);
  rows.push(await rejectedRow(ctx, 'dup-5', 'duplicates: 5th, sent later', late, ['DUPLICATE']));
  return rows;
}

/** Scene 2: a client sends one request three times with one key: before, while and after it runs. */
async function retry(ctx: ScenarioContext): Promise<DemoRow[]> {
  const data = cart(ctx, 'grace');
  const idempotencyKey = key(ctx, 'retry');
  ctx.say(`2/10  A client sends one request three times with idempotency key ${idempotencyKey}`);
  const first = await send(ctx, data, idempotencyKey);
  ctx.say(`     call 1: ${describe(first)}`);
  const second = await send(ctx, data, idempotencyKey);
  ctx.say(`     call 2, a retry while it runs: ${describe(second)}`);
  const final = await follow(ctx, first.workflowId);
  const third = await send(ctx, data, idempotencyKey);
  ctx.say(`     call 3, a retry after it ended: ${describe(third)}`);
  const sameSaga = (s: StartedSaga) => s.started && s.runId === first.runId && tokenOf(s) !== undefined && tokenOf(s) === tokenOf(first);
  const completed = final.outcome === 'COMPLETED';
  return [
    sagaRow('retry-1', 'retry: call 1', first, final, 'SUCCESS, a saga started; COMPLETED', first.reservation.status === 'SUCCESS' && completed),
    sagaRow('retry-2', 'retry: call 2, while it runs', second, final, 'the same saga and token; COMPLETED', sameSaga(second) && completed),
    {
      ...sagaRow(
        'retry-3',
        'retry: call 3, after it ended',
        third,
        final,
        'its recorded answer (same token) and outcome COMPLETED',
        sameSaga(third) && third.outcome === 'COMPLETED',
      ),
      // What the answer itself says: the outcome Temporal recorded for the saga.
      outcome: third.outcome ?? '-',
    },
  ];
}

/** Scene 3: the card is declined: the saga compensates (no charge to refund; the row is undone). */
async function declined(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'dan', { payment: { card: DECLINED_CARD } });
  ctx.say(`3/10  An order paid with card ${DECLINED_CARD}, which the example payment step declines`);
  const s = await send(ctx, data, key(ctx, 'declined'));
  ctx.say(`     ${describe(s)}`);
  const final = await follow(ctx, s.workflowId);
  ctx.say(`     compensations run: ${final.compensationsRun.join(', ')}`);
  const ok = final.outcome === 'COMPENSATED' && final.reason === 'STEP_REJECTED' && same(final.compensationsRun, ['refundPayment', 'undoEntity']);
  return sagaRow('declined', 'declined payment', s, final, 'COMPENSATED: refundPayment, undoEntity', ok);
}

/** Scene 4: more rare coins than exist: the payment is refunded, the stock released, the row undone. */
async function shortStock(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'eve', { items: [{ sku: 'rare-coin', quantity: 5, priceCents: 100_000 }] });
  ctx.say('4/10  An order for 5 rare coins (the example stock holds 1): charged, then short of stock');
  const s = await send(ctx, data, key(ctx, 'short-stock'));
  ctx.say(`     ${describe(s)}`);
  const final = await follow(ctx, s.workflowId);
  ctx.say(`     compensations run, in reverse order: ${final.compensationsRun.join(', ')}`);
  const ok =
    final.outcome === 'COMPENSATED' &&
    final.reason === 'STEP_REJECTED' &&
    same(final.stepsDone, ['chargePayment']) &&
    same(final.compensationsRun, ['releaseStock', 'refundPayment', 'undoEntity']);
  return sagaRow('short-stock', 'short stock (rare-coin × 5)', s, final, 'COMPENSATED: releaseStock, refundPayment, undoEntity', ok);
}

/**
 * Scene 5: a write three times longer than the lease, kept alive by the heartbeats that extend it.
 * Its length is the order's `simulate.writeDelayMs`, a test knob the demo turns on (SAGA_SIMULATIONS).
 */
async function longWrite(ctx: ScenarioContext): Promise<DemoRow> {
  const writeDelayMs = 3 * ctx.leaseMs;
  const data = cart(ctx, 'frank', { simulate: { writeDelayMs } });
  const request = `long write (${writeDelayMs / 1000} s, lease ${ctx.leaseMs / 1000} s)`;
  const expected = 'COMPLETED, holding the lease past its first lease';
  ctx.say(`5/10  A write that takes ${writeDelayMs / 1000} s under a ${ctx.leaseMs / 1000} s lease; every heartbeat extends the lease`);
  const s = await send(ctx, data, key(ctx, 'long-write'));
  ctx.say(`     ${describe(s)}`);
  if (s.reservation.status !== 'SUCCESS' || !s.started) return { ...(await rejectedRow(ctx, 'long-write', request, s, [])), expected, ok: false };
  const { fencingToken } = s.reservation;
  let lastReport = 0;
  let writing: number | undefined;
  const final = await follow(ctx, s.workflowId, async (state) => {
    if (state.phase !== 'WRITING' || Date.now() - lastReport < 1000) return;
    lastReport = Date.now();
    writing ??= Date.now();
    const { holder } = await ctx.rms.inspect(s.intentKey);
    if (!holder || holder.fencingToken !== fencingToken) return;
    ctx.say(`     lease held, ${(holder.remainingMs / 1000).toFixed(1)} s left, ${((Date.now() - writing) / 1000).toFixed(1)} s into the write`);
  });
  // The write's first beat sets the lease to one lease from its start (the gate's pickup lease, held
  // until then, ends there), and the write checks that it still holds the lease just before it
  // commits: a write that committed later than one lease after it started held a lease its
  // heartbeats had extended.
  const write = await writeTimes(ctx, s.workflowId);
  const margin = write === undefined ? undefined : write.committedAt - (write.startedAt + ctx.leaseMs);
  if (margin !== undefined) {
    ctx.say(`     the write committed ${(Math.abs(margin) / 1000).toFixed(1)} s ${margin > 0 ? 'after' : 'before'} its first lease would have ended`);
  }
  const ok = final.outcome === 'COMPLETED' && margin !== undefined && margin > 0;
  return sagaRow('long-write', request, s, final, expected, ok);
}

/**
 * Scene 6: a plain Temporal client (here the Temporal CLI) starts a saga by its workflow type with
 * `{type, idempotencyKey, data}`, and reads the answer through the `reservation` update: the saga
 * reserves the intent itself.
 */
async function plainClient(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'hedy');
  const idempotencyKey = key(ctx, 'plain-client');
  const workflowId = sagaWorkflowId('order', idempotencyKey);
  ctx.say('6/10  A plain Temporal client, the Temporal CLI: it starts the saga by workflow type, then reads the answer');
  ctx.say(`     temporal ${temporalStartArgs(ctx.taskQueue, 'order', idempotencyKey, data, ctx.codecEndpoint).slice(0, 8).join(' ')} --input '{"type":"order",…}' --codec-endpoint ${ctx.codecEndpoint}`);
  await ctx.temporal(temporalStartArgs(ctx.taskQueue, 'order', idempotencyKey, data, ctx.codecEndpoint));
  ctx.say(`     temporal ${temporalAnswerArgs(workflowId, ctx.codecEndpoint).join(' ')}`);
  const reply = await answerOf(ctx, workflowId);
  ctx.say(`     ${describeAnswer(reply.result)}; saga ${workflowId}`);
  const final = await follow(ctx, workflowId);
  const token = reply.result.status === 'SUCCESS' ? reply.result.fencingToken : undefined;
  // The documented result and history commands, then the history as Temporal stores it: no card in it.
  const result = await ctx.temporal(temporalResultArgs(workflowId, ctx.codecEndpoint));
  const shown = await ctx.temporal(temporalShowArgs(workflowId, ctx.codecEndpoint));
  const stored = readableHistory(await ctx.temporal(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json'], { codec: false }));
  const cardAtRest = stored.includes(data.payment.card);
  ctx.say(`     temporal workflow result and show: ${result.includes('COMPLETED') && shown.includes('WorkflowExecutionCompleted') ? 'the result and the history, decoded' : 'NOT what was expected'}; the card ${cardAtRest ? 'IS' : 'is not'} in the stored history`);
  return {
    id: 'plain-client',
    request: 'plain Temporal client (CLI)',
    workflowId,
    started: true,
    intentKey: final.intentKey,
    answer: reply.result.status,
    viaGate: false,
    fencingToken: token,
    outcome: final.outcome ?? final.phase,
    reason: final.reason,
    compensationsRun: final.compensationsRun,
    url: ctx.client.url(workflowId),
    expected: 'SUCCESS from the reservation update; COMPLETED; no card in the stored history',
    ok: token !== undefined && final.fencingToken === token && final.outcome === 'COMPLETED' && result.includes('COMPLETED') && !cardAtRest,
  };
}

/**
 * Scene 7: an amendment and a cancellation of one order, sent at once. Each takes the order's lock
 * at the gate: one gets it (SUCCESS), the other CONFLICT, and tries again (a new request) until the
 * lock is free. They run one after the other, never interleaved: amended then cancelled (both
 * COMPLETED), or cancelled first (the amendment then finds the order cancelled and compensates).
 */
async function race(ctx: ScenarioContext): Promise<DemoRow[]> {
  const data = cart(ctx, 'ida');
  ctx.say('7/10  An amendment and a cancellation of one order, sent at once: each needs the order\'s lock');
  const created = await send(ctx, data, key(ctx, 'race-order'));
  const order = await follow(ctx, created.workflowId);
  const rows = [sagaRow('race-order', 'race: the order', created, order, 'COMPLETED', order.outcome === 'COMPLETED')];
  if (order.entityId === undefined) return rows;
  ctx.say(`     order ${order.entityId}: ${data.items.map((i) => `${i.sku} × ${i.quantity}`).join(', ')}, charged`);
  const amendment = { order: order.entityId, items: [{ sku: 'widget', quantity: 5 }], payment: data.payment, simulate: { stepDelayMs: 1000 } };
  const requests = [
    { name: 'amend', type: 'order-amend', data: amendment, what: 'widget × 5, charged again' },
    { name: 'cancel', type: 'order-cancel', data: { order: order.entityId }, what: 'cancel' },
  ] as const;
  // Each side sends until the gate gives it the lock; every CONFLICT is a request of its own.
  const tries = await Promise.all(
    requests.map(async (r) => {
      const answers: Answered[] = [];
      for (let n = 1; ; n++) {
        const s = await send(ctx, r.data, key(ctx, `race-${r.name}-${n}`), r.type);
        answers.push(s);
        ctx.say(`     ${r.type} (${r.what}), try ${n}: ${describe(s)}`);
        const answer = s.reservation;
        if (answer.status !== 'CONFLICT') return answers;
        // Backing off (250 ms, doubling), at most the holder's remaining lease: the lock may be free sooner.
        await new Promise((done) => setTimeout(done, Math.min(answer.retryAfterMs, 250 * 2 ** (n - 1))));
      }
    }),
  );
  const [amend, cancel] = tries.map((answers) => answers[answers.length - 1]!);
  const [amendFinal, cancelFinal] = await Promise.all([follow(ctx, amend!.workflowId), follow(ctx, cancel!.workflowId)]);
  const amendFirst = BigInt(tokenOf(amend!) ?? 0) < BigInt(tokenOf(cancel!) ?? 0);
  ctx.say(
    amendFirst
      ? `     the amendment held the lock first: ${amendFinal.outcome}; then the cancellation: ${cancelFinal.outcome} (the amended charge refunded)`
      : `     the cancellation held the lock first: ${cancelFinal.outcome}; then the amendment: ${amendFinal.outcome} (${amendFinal.reason ?? ''}: the order was cancelled)`,
  );
  const amendOk = amendFirst ? amendFinal.outcome === 'COMPLETED' : amendFinal.outcome === 'COMPENSATED' && amendFinal.reason === 'STEP_REJECTED';
  const firstTries = tries.map((answers) => answers[0]!.reservation.status);
  const raced = firstTries.filter((status) => status === 'SUCCESS').length === 1;
  for (const [i, answers] of tries.entries()) {
    const r = requests[i]!;
    for (const [n, s] of answers.slice(0, -1).entries()) rows.push(await rejectedRow(ctx, `race-${r.name}-${n + 1}`, `race: ${r.type}, try ${n + 1}`, s, ['CONFLICT']));
  }
  rows.push(
    sagaRow(`race-amend`, `race: order-amend, try ${tries[0]!.length}`, amend!, amendFinal, 'one lock holder at a time: COMPLETED, or COMPENSATED after the cancellation', raced && amendOk),
    sagaRow(`race-cancel`, `race: order-cancel, try ${tries[1]!.length}`, cancel!, cancelFinal, 'COMPLETED, before or after the amendment', raced && cancelFinal.outcome === 'COMPLETED'),
  );
  return rows;
}

/**
 * Scene 8: a saga whose deadline passes during its first step (it takes 2 s; the start gives the saga
 * 1 s): it takes no further step, undoes what it did, and ends EXPIRED.
 */
async function expired(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'jan', { simulate: { stepDelayMs: 2000 } });
  ctx.say('8/10  An order given 1 s (its start\'s deadlineMs) whose payment step takes 2 s');
  const s = await send(ctx, data, key(ctx, 'expired'), 'order', 1000);
  ctx.say(`     ${describe(s)}`);
  const final = await follow(ctx, s.workflowId);
  ctx.say(`     the deadline passed during chargePayment: compensations run: ${final.compensationsRun.join(', ')}`);
  const ok = final.outcome === 'EXPIRED' && final.reason === 'DEADLINE_EXCEEDED' && same(final.stepsDone, ['chargePayment']) && same(final.compensationsRun, ['refundPayment', 'undoEntity']);
  return sagaRow('expired', 'deadline 1 s, a 2 s step', s, final, 'EXPIRED: refundPayment, undoEntity', ok);
}

/**
 * Scene 9: short of stock, and the card network refuses the refund: the saga cannot finish undoing,
 * so it waits in NEEDS_ATTENTION, holding its order row and intent, for an operator. A redrive
 * retries the refund, which is refused again: it waits on (the demo leaves it so; its type's wait is
 * a day).
 */
async function needsAttention(ctx: ScenarioContext): Promise<DemoRow> {
  const data = cart(ctx, 'kim', { payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: 'rare-coin', quantity: 5, priceCents: 100_000 }] });
  ctx.say(`9/10  Short of stock, paid with card ${REFUND_REFUSED_CARD}, whose refunds the example provider refuses`);
  const s = await send(ctx, data, key(ctx, 'attention'));
  ctx.say(`     ${describe(s)}`);
  const waiting = await follow(ctx, s.workflowId, undefined, settled);
  ctx.say(`     waits for an operator until ${waiting.attention?.until ?? '?'}: left to undo ${waiting.attention?.pending.join(', ') ?? '?'}`);
  ctx.say(`     bin/saga redrive ${s.workflowId}`);
  const redriven = await ctx.client.redrive(s.workflowId);
  ctx.say(`     the refund is refused again: ${redriven.phase}, redrives ${redriven.attention?.redrives ?? 0}`);
  const ok =
    redriven.phase === 'NEEDS_ATTENTION' &&
    same(redriven.compensationsRun, ['releaseStock']) &&
    same(redriven.attention?.pending ?? [], ['refundPayment', 'undoEntity']) &&
    redriven.attention?.redrives === 1;
  return sagaRow('attention', 'refund refused, redriven', s, redriven, 'NEEDS_ATTENTION after a redrive: refundPayment, undoEntity left', ok);
}

/**
 * The reservation answer of a saga started by type: its `reservation` update, or, when the saga ended
 * before the update reached it (aborted while the saga was closing, or refused after its end), the
 * answer its result holds.
 */
async function answerOf(ctx: ScenarioContext, workflowId: string): Promise<{ result: ReservationAnswer }> {
  try {
    return JSON.parse(await ctx.temporal([...temporalAnswerArgs(workflowId, ctx.codecEndpoint), '--output', 'json'])) as { result: ReservationAnswer };
  } catch (err) {
    if (!/aborted by closing workflow|already completed/.test(String((err as Error).message))) throw err;
    const { reservation } = await ctx.client.result(workflowId);
    if (!reservation) throw err;
    ctx.say('     the saga ended before the update reached it: its result holds the answer');
    return { result: reservation };
  }
}

/** When the saga's writeEntity activity completed (epoch ms, by its history), if it did. */
async function writeTimes(ctx: ScenarioContext, workflowId: string): Promise<{ startedAt: number; committedAt: number } | undefined> {
  const events = (await ctx.client.temporal.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'writeEntity');
  const of = (attributes: { scheduledEventId?: unknown } | null | undefined) => scheduled && attributes && String(attributes.scheduledEventId) === String(scheduled.eventId);
  const started = events.find((e) => of(e.activityTaskStartedEventAttributes));
  const completed = events.find((e) => of(e.activityTaskCompletedEventAttributes));
  const ms = (event: (typeof events)[number] | undefined) => {
    const t = event?.eventTime;
    return t ? Number(String(t.seconds ?? 0)) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : undefined;
  };
  const startedAt = ms(started);
  const committedAt = ms(completed);
  return startedAt === undefined || committedAt === undefined ? undefined : { startedAt, committedAt };
}

/** Runs every scene in order and returns one row per request. */
export async function runScenario(ctx: ScenarioContext): Promise<DemoRow[]> {
  const rows: DemoRow[] = [];
  for (const scene of [duplicates, retry, declined, shortStock, longWrite, plainClient, race, expired, needsAttention]) {
    rows.push(...[await scene(ctx)].flat());
    ctx.say('');
  }
  return rows;
}
