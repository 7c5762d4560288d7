/**
 * The reservation saga: confirm the reservation the gate took (or reserve, when a plain Temporal
 * client started it), write the fenced row while heartbeats keep the lease, finalise, run the
 * remaining steps, and on any failure or cancellation run the compensations and end in a terminal
 * state. Deterministic: activities do all I/O.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { SagaActivities } from '../activities/saga';
import {
  ErrorType,
  INTENT_KEY,
  SAGA_OUTCOME,
  SAGA_PHASE,
  SAGA_TYPE,
  SagaOutcome,
  SagaPhase,
  redriveUpdate,
  reservationUpdate,
  signalUpdate,
  isTerminal,
  retryOptionsOf,
  stateQuery,
  stepNamesOf,
  stepsUndoneBy,
  type ReservationAnswer,
  type SagaInput,
  type SagaMemo,
  type SagaPlan,
  type SagaStepPlan,
  type SagaWait,
  type SagaWaitEventKind,
  type SagaStart,
  type SagaState,
} from '../shared';
import { sagaEvents } from './saga-events';

/**
 * The patch that moved the reservation in front of the workflow (the gate in SagaClient) and the
 * plan into the worker. Histories recorded before it replay the earlier code, {@link legacySaga}.
 */
export const GATE_PATCH = 'gate-before-workflow';

/** Once every step has succeeded, completing is retried until it succeeds, never compensated. */
export const FORWARD_PATCH = 'forward-only-after-steps';

/** A compensation that failed keeps the entity: no undo of the row, no freeing of the intent. */
export const KEEP_ENTITY_PATCH = 'failed-compensation-keeps-entity';

/**
 * Steps heartbeat: a cancellation or a timeout reaches a running step (its AbortSignal), and a
 * stalled attempt is given up after the heartbeat timeout instead of the 60 s start-to-close. Each
 * step and step compensation carries its name as its summary in the UI.
 */
export const STEP_HEARTBEAT_PATCH = 'steps-heartbeat';

/**
 * A cancellation that arrives before the saga knows its plan and holds its reservation (while every
 * worker was down, or at once after the start) waits for both, two short local activities: the saga
 * then compensates as any cancelled one does and gives its lease back, instead of failing with no
 * intent known and its lease left to run out.
 */
export const PLAN_BEFORE_CANCEL_PATCH = 'plan-before-cancellation';

/**
 * A REJECTED saga (it wrote nothing) ends as a failed workflow, with its final state as the
 * failure's details, instead of completing: a failed run does not hold its workflow id, so a later
 * request with the same key is a new attempt (SagaClient starts with ALLOW_DUPLICATE_FAILED_ONLY),
 * where a completed REJECTED run answered its key CONFLICT or DUPLICATE forever.
 */
export const REJECTED_FAILS_PATCH = 'rejected-saga-fails';

/**
 * A saga whose start names an owner the memo does not (a plain Temporal client's start: SagaClient
 * sets the memo itself) records it in the memo, where status, cancel and list read it: the saga is
 * its owner's only, as one SagaClient started.
 */
export const MEMO_OWNER_PATCH = 'memo-owner';

/**
 * A saga records in its memo, once planned, the names of the steps and compensations its plan runs:
 * a worker whose saga types no longer have one of them refuses to start while the saga runs.
 */
export const MEMO_STEPS_PATCH = 'memo-plan-steps';

/**
 * A saga whose compensations could not all finish waits in NEEDS_ATTENTION (its type's
 * `attentionMs`) for an operator's redrive, instead of ending COMPENSATION_FAILED at once. Plans of
 * earlier versions have no `attentionMs`: they never reach it.
 */
export const NEEDS_ATTENTION_PATCH = 'needs-attention';

/**
 * A saga of a type with limits counts itself out of its caller's counters when it ends, however it
 * ends: completed, compensated, expired, rejected, cancelled, failed. Only plans that carry limits
 * take it (none of earlier versions do), so recorded histories replay unchanged.
 */
export const LIMITS_PATCH = 'gate-limits';

/**
 * Every patch above, taken at once: a saga started after it records this one marker (and one
 * TemporalChangeVersion upsert) where it recorded one of each per patch, five in an order saga, ten
 * history events and five visibility updates of the server's. Sagas started before it replay each
 * patch as they recorded it. A patch added later is asked on its own, as before.
 */
export const FOLDED_PATCHES_PATCH = 'folded-patches';

/** The patches {@link FOLDED_PATCHES_PATCH} takes at once. */
const FOLDED = new Set([
  GATE_PATCH,
  FORWARD_PATCH,
  KEEP_ENTITY_PATCH,
  STEP_HEARTBEAT_PATCH,
  PLAN_BEFORE_CANCEL_PATCH,
  REJECTED_FAILS_PATCH,
  MEMO_OWNER_PATCH,
  MEMO_STEPS_PATCH,
  NEEDS_ATTENTION_PATCH,
  LIMITS_PATCH,
]);

/**
 * A redrive of a cancelled saga (cancelled while it waited in NEEDS_ATTENTION, or compensating
 * because it was cancelled) waits for its round outside the cancellation and is answered with it,
 * as any redrive is; before, its update failed at once with the cancellation while the round ran
 * all the same. Asked by each redrive as it is accepted. Not folded: asked on its own, as every
 * patch added after the fold is.
 */
export const REDRIVE_CANCELLED_PATCH = 'redrive-of-cancelled-saga';

/**
 * A saga whose fenced write finds another saga's entity in PostgreSQL (REGISTERED or COMPLETED
 * under an older token: a late finalise, or Redis that forgot it) ends REJECTED, as one refused at
 * its reservation does: it wrote nothing, and its key is a new attempt. Before, the rejection was
 * thrown inside the steps' try and compensated: the saga ended COMPENSATED (SAGA_REJECTED). Asked
 * only there, on its own.
 */
export const REJECTED_AT_WRITE_PATCH = 'rejected-at-write';

/** Whether the saga runs the code of a patch: `patched`, or true for a folded one in a saga that took them all. */
type Patched = (patchId: string) => boolean;

/**
 * The saga's {@link Patched}, decided once at its start: a saga that starts now takes
 * {@link FOLDED_PATCHES_PATCH}; one that started before replays without its marker and asks each
 * patch on its own.
 */
function patchesOf(): Patched {
  return patched(FOLDED_PATCHES_PATCH) ? (id) => FOLDED.has(id) || patched(id) : patched;
}

/** Activity options. Infrastructure errors retry; business outcomes are non-retryable failures. */
const RETRY_INFRA = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 8 } as const;

/** A step that nothing could undo (it has no compensation): retried until it succeeds or is refused. */
const RETRY_UNTIL_DONE = { initialInterval: RETRY_INFRA.initialInterval, backoffCoefficient: RETRY_INFRA.backoffCoefficient, maximumInterval: RETRY_INFRA.maximumInterval };

function activities(input: SagaInput) {
  const quick: ActivityOptions = { startToCloseTimeout: '10s', retry: RETRY_INFRA };
  // On cancellation the saga waits for a running activity to settle: a step's compensation must
  // never run before (and so miss) the effect of the step it undoes.
  const settle = { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } as const;
  return {
    reserve: proxyActivities<SagaActivities>({ ...quick, summary: 'reserve the intent in the RMS', retry: { ...RETRY_INFRA, maximumAttempts: 4 } }),
    write: proxyActivities<SagaActivities>({
      // A long, monolithic write: its liveness is the heartbeat, not the start-to-close timeout.
      startToCloseTimeout: '30m',
      heartbeatTimeout: input.timings.heartbeatTimeoutMs,
      summary: 'write the fenced row (heartbeats extend the lease)',
      retry: { ...RETRY_INFRA, maximumAttempts: 5 },
      ...settle,
    }),
    finalize: proxyActivities<SagaActivities>({ ...quick, summary: 'mark the row REGISTERED, promote the reservation', ...settle }),
    release: proxyActivities<SagaActivities>({ ...quick, summary: 'release the reservation (the deadline passed before the write)' }),
    complete: proxyActivities<SagaActivities>({ ...quick, summary: 'mark the row COMPLETED', ...settle }),
    forward: proxyActivities<SagaActivities>({
      ...quick,
      summary: 'mark the row COMPLETED (every step done: retried until it succeeds)',
      // No maximumAttempts: unlimited.
      retry: { initialInterval: RETRY_INFRA.initialInterval, backoffCoefficient: RETRY_INFRA.backoffCoefficient, maximumInterval: RETRY_INFRA.maximumInterval },
    }),
    step: proxyActivities<SagaActivities>({ startToCloseTimeout: '60s', retry: RETRY_INFRA, ...settle }),
    // Each named in the UI by its step or compensation (`summary`), not as one more runStep.
    heartbeatingStep: (name: string, undoable = true) =>
      proxyActivities<SagaActivities>({
        startToCloseTimeout: '60s',
        heartbeatTimeout: input.timings.heartbeatTimeoutMs,
        ...stepRetry(input, name, { retry: undoable ? RETRY_INFRA : RETRY_UNTIL_DONE }),
        summary: `step ${name}`,
        ...settle,
      }),
    namedCompensation: (name: string) =>
      proxyActivities<SagaActivities>({
        startToCloseTimeout: '60s',
        ...compensationRetry(input, name),
        summary: `compensation ${name}`,
      }),
    compensation: proxyActivities<SagaActivities>({
      startToCloseTimeout: '60s',
      retry: { ...RETRY_INFRA, maximumAttempts: input.timings.compensationAttempts },
    }),
  };
}

/**
 * The retry options of step `name`: its plan's `retry` (the type declared one), else `otherwise`.
 * Retry options are no command of their own: a history replays whatever they are.
 */
function stepRetry(input: SagaInput, name: string, otherwise: Pick<ActivityOptions, 'retry'>): Pick<ActivityOptions, 'retry' | 'scheduleToCloseTimeout'> {
  const policy = input.steps.find((s) => s.step === name)?.retry;
  return policy === undefined ? otherwise : retryOptionsOf(policy);
}

/**
 * The retry options of compensation `name`: the policy its plan recorded (the type's, or
 * DEFAULT_COMPENSATION_RETRY). Plans from before policies were recorded have none:
 * `timings.compensationAttempts`, 200 ms doubling up to 5 s.
 */
function compensationRetry(input: SagaInput, name: string): Pick<ActivityOptions, 'retry' | 'scheduleToCloseTimeout'> {
  const policy = input.steps.find((s) => s.compensation === name)?.compensationRetry;
  return policy === undefined ? { retry: { ...RETRY_INFRA, maximumAttempts: input.timings.compensationAttempts } } : retryOptionsOf(policy);
}

/** The business `type` of a failure, looking through the ActivityFailure wrapper. */
function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

/** When the saga's deadline passes (epoch ms, workflow time), counted from its start; undefined: it has none. */
function deadlineOf(input: SagaInput): number | undefined {
  return input.deadlineMs === undefined ? undefined : workflowInfo().startTime.getTime() + input.deadlineMs;
}

function pastDeadline(deadline: number | undefined): deadline is number {
  return deadline !== undefined && Date.now() >= deadline;
}

function deadlinePassed(deadline: number, next: string): string {
  return `the saga's deadline (${new Date(deadline).toISOString()}) passed before ${next}`;
}

/** What a saga past its deadline throws before it takes `next`: it takes no step after its deadline. */
function deadlineExceeded(deadline: number, next: string): ApplicationFailure {
  return ApplicationFailure.create({ type: ErrorType.DEADLINE_EXCEEDED, message: deadlinePassed(deadline, next), nonRetryable: true });
}

/**
 * How a saga that compensated after `reason` ends: EXPIRED when its deadline made it compensate and
 * every compensation succeeded, COMPENSATED when something else did, COMPENSATION_FAILED when one failed.
 */
function compensatedOutcome(failed: boolean, reason: string): SagaOutcome {
  if (failed) return SagaOutcome.COMPENSATION_FAILED;
  return reason === ErrorType.DEADLINE_EXCEEDED ? SagaOutcome.EXPIRED : SagaOutcome.COMPENSATED;
}

function failureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

function keyReused(idempotencyKey: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`idempotency key ${idempotencyKey} was already used with another payload`, ErrorType.IDEMPOTENCY_KEY_REUSED);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The request hash an update caller sent, if any (the Temporal CLI may send nothing at all). */
function hashOf(request: unknown): unknown {
  return isRecord(request) ? request.requestHash : undefined;
}

/** Setting the phase and the search attributes together, and ending the saga with its outcome. */
function lifecycle(state: SagaState, has: Patched) {
  const finish = (outcome: SagaOutcome, reason?: string): SagaState => {
    state.outcome = outcome;
    if (reason !== undefined) state.reason = reason;
    state.phase = outcome;
    upsertSearchAttributes([
      { key: SAGA_PHASE, value: outcome },
      { key: SAGA_OUTCOME, value: outcome },
    ]);
    return state;
  };
  return {
    enter: (phase: SagaPhase) => {
      state.phase = phase;
      upsertSearchAttributes([{ key: SAGA_PHASE, value: phase }]);
    },
    finish,
    /** Ends the saga REJECTED: a failed workflow carrying its state ({@link REJECTED_FAILS_PATCH}), or a completed one before it. */
    reject: (reason: string): SagaState => {
      finish(SagaOutcome.REJECTED, reason);
      if (!has(REJECTED_FAILS_PATCH)) return state;
      throw ApplicationFailure.create({ message: `saga rejected: ${reason}`, type: ErrorType.SAGA_REJECTED, nonRetryable: true, details: [state] });
    },
  };
}

/**
 * Orchestrates one saga of any type. Started by `SagaClient` with `{type, idempotencyKey, data,
 * timings, reservation}`, or by any Temporal client with `{type, idempotencyKey, data}`: the worker
 * derives the plan (intent key, request hash, steps, compensation policy, bounded timings) from the
 * registered saga type, and a malformed or inconsistent input fails the workflow at once.
 */
export async function reservationSaga(start: SagaStart | SagaInput): Promise<SagaState> {
  const has = patchesOf();
  if (!has(GATE_PATCH)) return legacySaga(start as SagaInput);
  // Set once the worker has derived the plan; the update handlers wait for it.
  const known: { plan?: SagaPlan } = {};
  try {
    return await gatedSaga(start, known, has);
  } finally {
    await countOut(known.plan, has);
  }
}

/** Counts the saga out of its caller's limits of sagas in flight ({@link LIMITS_PATCH}); nothing for a plan without limits. */
async function countOut(plan: SagaPlan | undefined, has: Patched): Promise<void> {
  if (plan?.limits === undefined || !has(LIMITS_PATCH)) return;
  const { limits, sessionId } = plan;
  const act = proxyActivities<SagaActivities>({ startToCloseTimeout: '10s', retry: RETRY_INFRA, summary: "count the saga out of its caller's limits" });
  try {
    await CancellationScope.nonCancellable(() => act.countOut({ limits, sessionId }));
  } catch {
    // Redis out of reach for every attempt: the count ends by itself after its hold; the outcome stands.
  }
}

/** The saga after the gate patch; `known` gets its plan once the worker has derived it. */
async function gatedSaga(start: SagaStart | SagaInput, known: { plan?: SagaPlan }, has: Patched): Promise<SagaState> {
  const { workflowId, namespace } = workflowInfo();
  const given: Record<string, unknown> = isRecord(start) ? start : {};
  const state: SagaState = {
    type: typeof given.type === 'string' ? given.type : '',
    idempotencyKey: typeof given.idempotencyKey === 'string' ? given.idempotencyKey : '',
    requestHash: '',
    intentKey: '',
    phase: SagaPhase.RESERVING,
    stepsDone: [],
    compensationsRun: [],
    errors: [],
  };
  let reservationFailed: string | undefined;
  const { reject } = lifecycle(state, has);
  const redrives: Redrives = { asked: 0, answered: 0, waitEnded: false };
  const signals: Signals = { received: new Map(), timedOut: new Set() };

  setHandler(stateQuery, () => state);
  setHandler(
    signalUpdate,
    async ({ signal, payload }) => {
      // Sent before the plan was known: judged by it once it is.
      await condition(() => known.plan !== undefined || isTerminal(state.phase));
      refuseSignal(signal, known.plan, state, signals);
      const first = !signals.received.has(signal);
      if (first) signals.received.set(signal, payload ?? null);
      return { signal, first };
    },
    // Refused before anything is recorded: a repeat is accepted (and changes nothing).
    { validator: (request: { signal: string; payload?: unknown }) => refuseSignal(request?.signal, known.plan, state, signals) },
  );
  setHandler(
    redriveUpdate,
    async () => {
      const ticket = ++redrives.asked;
      // Answered once the round this redrive asked for has run: the saga waits again, or has ended.
      const roundRun = () => condition(() => redrives.answered >= ticket && state.phase !== SagaPhase.COMPENSATING);
      // A cancellation, before or during this wait, never stops the round (the saga waits and
      // compensates where none reaches), so it does not fail the redrive either. The patch is asked
      // as the redrive is accepted, not when a cancellation comes: the answer is then always given
      // once the saga has moved on, never in a workflow task beside commands of the saga's own.
      await (has(REDRIVE_CANCELLED_PATCH) ? CancellationScope.nonCancellable(roundRun) : roundRun());
      return state;
    },
    {
      // Refused before anything is recorded unless the saga waits: a redrive never runs a
      // compensation a second time, nor one of a saga still compensating by itself.
      validator: () => {
        if (state.phase !== SagaPhase.NEEDS_ATTENTION) {
          throw ApplicationFailure.nonRetryable(`saga ${workflowId} is ${state.phase}, not NEEDS_ATTENTION: there is nothing to redrive`, ErrorType.NOT_NEEDING_ATTENTION);
        }
        // Its wait ran out, and it is on its way to COMPENSATION_FAILED (an operation gives its lock
        // back first): no round will run, and a redrive accepted now would wait for one for good,
        // and the saga with it. A refusal writes nothing to history: sagas replay as they ran.
        if (redrives.waitEnded) {
          throw ApplicationFailure.nonRetryable(
            `saga ${workflowId} no longer waits for a redrive: its wait ended at ${state.attention?.until}, and it ends ${SagaOutcome.COMPENSATION_FAILED}`,
            ErrorType.NOT_NEEDING_ATTENTION,
          );
        }
      },
    },
  );
  setHandler(
    reservationUpdate,
    async (request) => {
      await condition(() => known.plan !== undefined || reservationFailed !== undefined);
      const { plan } = known;
      if (plan && hashOf(request) !== undefined && hashOf(request) !== plan.requestHash) throw keyReused(plan.idempotencyKey);
      await condition(() => state.reservation !== undefined || reservationFailed !== undefined);
      if (state.reservation) return state.reservation;
      throw ApplicationFailure.nonRetryable(`reservation failed: ${reservationFailed}`, 'RESERVATION_FAILED');
    },
    {
      // Same idempotency key, other payload: refused before anything is written to history (once
      // the plan is known; before that, by the handler).
      validator: (request) => {
        const { plan } = known;
        if (plan && hashOf(request) !== undefined && hashOf(request) !== plan.requestHash) throw keyReused(plan.idempotencyKey);
      },
    },
  );

  // 0. The plan, derived by the worker from the saga type: nothing the caller computed is trusted.
  const local = proxyLocalActivities<SagaActivities>({ startToCloseTimeout: '10s', retry: { ...RETRY_INFRA, maximumAttempts: 4 } });
  const shielded = has(PLAN_BEFORE_CANCEL_PATCH);
  const uncancelled = <T>(fn: () => Promise<T>): Promise<T> => (shielded ? CancellationScope.nonCancellable(fn) : fn());
  let planned: SagaPlan;
  try {
    planned = await uncancelled(() => local.planSaga({ workflowId, namespace, start }));
  } catch (err) {
    reservationFailed = failureMessage(err);
    // Let a waiting `reservation` update see the failure, then fail the workflow: never a task that
    // fails forever on input it cannot run.
    await handlersSettled();
    throw ApplicationFailure.nonRetryable(reservationFailed, failureType(err) ?? ErrorType.INVALID_INPUT);
  }
  known.plan = planned;
  Object.assign(state, { type: planned.type, idempotencyKey: planned.idempotencyKey, requestHash: planned.requestHash, intentKey: planned.intentKey });
  // SagaClient sets these at start; a saga started by a plain Temporal client sets them now.
  const searchable = workflowInfo().typedSearchAttributes;
  if (searchable.get(SAGA_TYPE) !== planned.type || searchable.get(INTENT_KEY) !== planned.intentKey) {
    upsertSearchAttributes([
      { key: SAGA_TYPE, value: planned.type },
      { key: INTENT_KEY, value: planned.intentKey },
      { key: SAGA_PHASE, value: SagaPhase.RESERVING },
    ]);
  }

  // 1. Confirm the gate's reservation (the same session gets its token back), or reserve now.
  let answer: ReservationAnswer;
  try {
    answer = await uncancelled(() =>
      local.reserveIntent({
        type: planned.type,
        intentKey: planned.intentKey,
        sessionId: planned.sessionId,
        leaseMs: planned.timings.leaseMs,
        // An entity operation takes the entity's lock (its intent key is the lock's), its owner's only.
        ...(planned.operation ? { entityId: planned.operation.entityId, ...(planned.owner === undefined ? {} : { owner: planned.owner }) } : {}),
        // An intent whose text was not in NFC is checked under the key earlier versions gave it too.
        ...(planned.legacyIntentKey === undefined ? {} : { legacyIntentKey: planned.legacyIntentKey }),
      }),
    );
  } catch (err) {
    reservationFailed = failureMessage(err);
    state.errors.push({ at: 'reserveIntent', type: failureType(err), message: reservationFailed });
    await handlersSettled();
    return reject('RESERVATION_FAILED');
  }
  const gate = planned.reservation;
  if (gate && answer.status === 'SUCCESS' && answer.fencingToken === gate.fencingToken) {
    // Confirmed: the gate's answer stands, as the caller received it.
    answer = { status: 'SUCCESS', fencingToken: gate.fencingToken, expiresAt: gate.expiresAt };
  } else if (gate) {
    // The gate's lease ended before a worker ran this saga (every worker down longer than the lease).
    state.errors.push({ at: 'reserveIntent', type: 'LEASE_EXPIRED', message: `the gate's lease (token ${gate.fencingToken}) ended before the saga started; reserved again: ${answer.status}` });
  }
  state.reservation = answer;
  // A retry with the same key is answered from the memo by one describe call, without a worker.
  const memo: SagaMemo = workflowInfo().memo ?? {};
  const owned = planned.owner !== undefined && memo.owner !== planned.owner && has(MEMO_OWNER_PATCH);
  // The handlers this saga will need, where a worker about to start can read them (see checkRunningSagas).
  const steps = has(MEMO_STEPS_PATCH) ? stepNamesOf(planned) : undefined;
  if (memo.requestHash !== planned.requestHash || !sameAnswer(memo.reservation, answer) || owned || steps !== undefined) {
    upsertMemo({ requestHash: planned.requestHash, reservation: answer, ...(owned ? { owner: planned.owner } : {}), ...(steps ? { steps } : {}) } satisfies SagaMemo);
  }
  if (state.reservation.status !== 'SUCCESS') return reject(state.reservation.status);
  // Only plans of entity operation types carry `operation`: no earlier saga takes this branch.
  if (planned.operation) return runOperation(planned, planned.operation.entityId, state.reservation.fencingToken, state, redrives, has);
  return runReserved(planned, planned.sessionId, state.reservation.fencingToken, state, { searchableRegistered: false, redrives, has, signals });
}

/** The signals a saga received, by name (the first payload of each), and the waits that timed out. */
interface Signals {
  received: Map<string, unknown>;
  timedOut: Set<string>;
}

/**
 * Throws NOT_WAITING for a signal the saga does not take: once it has ended, or its plan (when
 * known) has no wait for it, or that wait timed out. A repeat of one received is taken.
 */
function refuseSignal(signal: unknown, plan: SagaPlan | undefined, state: SagaState, signals: Signals): asserts signal is string {
  const { workflowId } = workflowInfo();
  const notWaiting = (why: string) => ApplicationFailure.nonRetryable(`saga ${workflowId} ${why}`, ErrorType.NOT_WAITING);
  // From a plain Temporal client, the update's argument is whatever it sent.
  if (typeof signal !== 'string') throw notWaiting('takes a signal as { signal: <name>, payload? }');
  if (isTerminal(state.phase)) throw notWaiting(`has ended (${state.phase}): it waits for no signal`);
  if (plan && !plan.steps.some((s) => s.wait?.signal === signal)) throw notWaiting(`waits for no signal ${JSON.stringify(signal)}`);
  if (signals.timedOut.has(signal)) throw notWaiting(`no longer waits for ${JSON.stringify(signal)}: its wait timed out`);
}

/**
 * The wait `step` of a plan: until its signal comes (or came already) or its timeout passes, never
 * past the saga's deadline. No activity runs meanwhile. Answers what the steps after it find under
 * its name; a signal's timeout throws WAIT_TIMED_OUT (the saga compensates) unless it continues.
 */
async function waitFor(
  step: string,
  wait: SagaWait,
  deadline: number | undefined,
  state: SagaState,
  signals: Signals,
  enter: (phase: SagaPhase) => void,
  told: (event: SagaWaitEventKind) => void,
): Promise<unknown> {
  const now = Date.now();
  const ends = now + wait.timeoutMs;
  const cut = deadline !== undefined && deadline < ends;
  const until = cut ? deadline : ends;
  state.waiting = { step, ...(wait.signal === undefined ? {} : { signal: wait.signal }), until: new Date(until).toISOString() };
  enter(SagaPhase.WAITING);
  told('started');
  const { signal } = wait;
  let came: boolean;
  try {
    came = signal === undefined ? (await sleep(until - now), false) : await condition(() => signals.received.has(signal), until - now);
  } catch (err) {
    if (isCancellation(err)) told('cancelled');
    throw err;
  }
  delete state.waiting;
  told(signal === undefined ? 'elapsed' : came ? 'signalled' : 'timed_out');
  if (signal !== undefined && came) {
    enter(SagaPhase.RUNNING_STEPS);
    return { signal, payload: signals.received.get(signal) };
  }
  if (signal !== undefined) signals.timedOut.add(signal);
  if (cut) throw deadlineExceeded(deadline, `the end of wait ${step}`);
  enter(SagaPhase.RUNNING_STEPS);
  if (signal === undefined) return { elapsed: true };
  if (wait.onTimeout === 'continue') return { timedOut: true };
  throw ApplicationFailure.create({ type: ErrorType.WAIT_TIMED_OUT, message: `wait ${step}: no ${signal} within ${wait.timeoutMs} ms`, nonRetryable: true });
}

/** The activities of an entity operation. */
function operationActivities(input: SagaPlan) {
  const settle = { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } as const;
  const timeouts = { startToCloseTimeout: '60s', heartbeatTimeout: input.timings.heartbeatTimeoutMs } as const;
  return {
    step: (name: string, undoable: boolean) =>
      proxyActivities<SagaActivities>({ ...timeouts, ...stepRetry(input, name, { retry: undoable ? RETRY_INFRA : RETRY_UNTIL_DONE }), summary: `step ${name}`, ...settle }),
    compensation: (name: string) => proxyActivities<SagaActivities>({ ...timeouts, ...compensationRetry(input, name), summary: `compensation ${name}` }),
    release: proxyActivities<SagaActivities>({ startToCloseTimeout: '10s', retry: RETRY_INFRA, summary: "release the entity's lock" }),
    // Every step has succeeded: the saga goes forward, through any outage, unless a newer holder claimed the entity.
    releaseEntity: proxyActivities<SagaActivities>({ startToCloseTimeout: '30s', retry: RETRY_UNTIL_DONE, summary: 'release the entity: its intent is free again' }),
    // Kept until the saga cancels it: each redrive's wait may be as long as the type's attentionMs,
    // and a heartbeat that stops (a dead worker) starts another attempt, which finds the lease held or lost.
    hold: proxyActivities<SagaActivities>({
      startToCloseTimeout: '366d',
      heartbeatTimeout: input.timings.heartbeatTimeoutMs,
      retry: { initialInterval: RETRY_INFRA.initialInterval, backoffCoefficient: RETRY_INFRA.backoffCoefficient, maximumInterval: RETRY_INFRA.maximumInterval },
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      summary: "hold the entity's lock while the saga needs attention",
    }),
  };
}

/**
 * An entity operation (order-cancel), holding the entity's lock: the steps in order, each database
 * step claiming the entity's row with the lock's token (see EntityOperation), each step given the
 * earlier steps' results; then, for an operation that releases its entity, the release (a newer
 * holder's claim refuses it, and the steps are compensated as for a refused step); on a failure or a cancellation the compensations of the steps begun, in
 * reverse; and on every path the lock given back. A step without a compensation cannot be undone:
 * it runs to its end even when the saga is cancelled meanwhile, and is retried until it succeeds or
 * is refused.
 */
async function runOperation(input: SagaPlan, entityId: string, fencingToken: string, state: SagaState, redrives: Redrives, has: Patched): Promise<SagaState> {
  const { workflowId } = workflowInfo();
  const act = operationActivities(input);
  const { enter, finish } = lifecycle(state, has);
  state.fencingToken = fencingToken;
  // Callers see the id they name the entity by; plans of earlier versions have only the row id.
  state.entityId = input.operation?.publicId ?? entityId;
  const owner = { type: input.type, intentKey: input.intentKey, sessionId: input.sessionId, fencingToken };
  const results: Record<string, unknown> = {};
  const request = (name: string) => ({
    ...owner,
    sagaKey: workflowId,
    payload: input.payload,
    name,
    operation: { entityId, results: { ...results }, leaseMs: input.timings.leaseMs, heartbeatIntervalMs: input.timings.heartbeatIntervalMs },
  });
  const compensations: Compensation[] = [];
  const deadline = deadlineOf(input);
  let ended: { outcome: SagaOutcome; reason?: string };
  try {
    enter(SagaPhase.RUNNING_STEPS);
    for (const plan of input.steps) {
      const { step, compensation } = plan;
      if (pastDeadline(deadline)) throw deadlineExceeded(deadline, `step ${step}`);
      if (compensation !== undefined) {
        const undoes = stepsUndoneBy(input, compensation);
        const refusedAfter = input.timings.compensationAttempts;
        compensations.push({ name: compensation, run: () => act.compensation(compensation).runOperationCompensation({ ...request(compensation), undoes, refusedAfter }) });
      }
      const run = () => act.step(step, compensation !== undefined).runOperationStep(request(step));
      const done = await refusalUndone(plan, compensations, () => (compensation === undefined ? CancellationScope.nonCancellable(run) : run()));
      results[step] = done.response;
      state.stepsDone.push(step);
    }
    // Only plans of operations that release carry `releases`: no earlier saga takes this branch.
    if (input.operation?.releases) await CancellationScope.nonCancellable(() => act.releaseEntity.releaseEntity({ ...owner, entityId }));
    ended = { outcome: SagaOutcome.COMPLETED };
  } catch (err) {
    const cancelled = isCancellation(err);
    state.errors.push({ at: state.phase, type: cancelled ? 'CANCELLED' : failureType(err), message: failureMessage(err) });
    enter(SagaPhase.COMPENSATING);
    let left = await CancellationScope.nonCancellable(() => compensate(compensations.reverse(), input.compensation, state));
    if (waitsForRedrive(left, input, redrives, has)) {
      // The entity stays locked while its operation is half undone: no other operation may run on it.
      left = await CancellationScope.nonCancellable(() =>
        holdingLock(act.hold, { ...owner, leaseMs: input.timings.leaseMs, heartbeatIntervalMs: input.timings.heartbeatIntervalMs }, state, () =>
          untilRedriven(left, input, state, redrives, has, (l) => compensate(l, input.compensation, state)),
        ),
      );
    }
    const reason = cancelled ? 'CANCELLED' : (failureType(err) ?? 'FAILED');
    ended = { outcome: compensatedOutcome(left.length > 0, reason), reason };
  }
  try {
    await CancellationScope.nonCancellable(() => act.release.releaseLock(owner));
  } catch (err) {
    // The lease ends by itself; the saga's outcome stands.
    state.errors.push({ at: 'releaseLock', type: failureType(err), message: failureMessage(err) });
  }
  finish(ended.outcome, ended.reason);
  // A redrive that ended the saga answers with its outcome before the workflow completes.
  if (state.attention !== undefined) await handlersSettled();
  return state;
}

/**
 * Runs `fn` while an activity keeps the entity's lock (extending its lease), then stops it. A hold
 * that ends by itself (the lease found lost, or Redis away past it) is recorded: the compensations
 * left may then be refused, fenced out by a newer holder.
 */
async function holdingLock<T>(
  hold: SagaActivities,
  lock: { type: string; intentKey: string; sessionId: string; fencingToken: string; leaseMs: number; heartbeatIntervalMs: number },
  state: SagaState,
  fn: () => Promise<T>,
): Promise<T> {
  const scope = new CancellationScope();
  const held = scope.run(() => hold.holdLock(lock)).catch((err: unknown) => {
    if (!isCancellation(err)) state.errors.push({ at: 'holdLock', type: failureType(err), message: failureMessage(err) });
  });
  try {
    return await fn();
  } finally {
    scope.cancel();
    await held;
  }
}

/** Lets running update handlers finish (they answer the caller), even in a cancelled saga. */
function handlersSettled(): Promise<void> {
  return CancellationScope.nonCancellable(() => condition(allHandlersFinished));
}

function sameAnswer(a: ReservationAnswer | undefined, b: ReservationAnswer): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The saga as started before the gate: the client computed the plan, the workflow reserved with
 * its run id as the session. Kept unchanged so that running sagas and recorded histories replay.
 */
async function legacySaga(input: SagaInput): Promise<SagaState> {
  const { runId } = workflowInfo();
  const sessionId = runId;
  const act = activities(input);
  const state: SagaState = {
    type: input.type,
    idempotencyKey: input.idempotencyKey,
    requestHash: input.requestHash,
    intentKey: input.intentKey,
    phase: SagaPhase.RESERVING,
    stepsDone: [],
    compensationsRun: [],
    errors: [],
  };
  let reservationFailed: string | undefined;
  // Before the gate: each patch is asked on its own (folded-patches came later).
  const { finish } = lifecycle(state, patched);

  setHandler(stateQuery, () => state);
  setHandler(
    reservationUpdate,
    async () => {
      await condition(() => state.reservation !== undefined || reservationFailed !== undefined);
      if (state.reservation) return state.reservation;
      throw ApplicationFailure.nonRetryable(`reservation failed: ${reservationFailed}`, 'RESERVATION_FAILED');
    },
    {
      validator: (request) => {
        if (hashOf(request) !== input.requestHash) throw keyReused(input.idempotencyKey);
      },
    },
  );
  upsertSearchAttributes([
    { key: SAGA_TYPE, value: input.type },
    { key: INTENT_KEY, value: input.intentKey },
    { key: SAGA_PHASE, value: SagaPhase.RESERVING },
  ]);

  try {
    state.reservation = await act.reserve.reserveIntent({ type: input.type, intentKey: input.intentKey, sessionId, leaseMs: input.timings.leaseMs });
  } catch (err) {
    reservationFailed = failureMessage(err);
    state.errors.push({ at: 'reserveIntent', type: failureType(err), message: reservationFailed });
    return finish(SagaOutcome.REJECTED, 'RESERVATION_FAILED');
  }
  if (state.reservation.status !== 'SUCCESS') return finish(SagaOutcome.REJECTED, state.reservation.status);
  return runReserved(input, sessionId, state.reservation.fencingToken, state, { searchableRegistered: true, has: patched });
}

/**
 * Everything after a successful reservation: the fenced write, finalisation, steps, compensation.
 * `searchableRegistered`: also upsert the REGISTERED phase, as sagas from before the gate did (it is
 * followed by RUNNING_STEPS in the same workflow task, so nobody outside could ever see it).
 */
async function runReserved(
  input: SagaInput,
  sessionId: string,
  fencingToken: string,
  state: SagaState,
  options: { searchableRegistered: boolean; redrives?: Redrives; has: Patched; signals?: Signals },
): Promise<SagaState> {
  const { workflowId } = workflowInfo();
  const act = activities(input);
  const { has } = options;
  const { enter, finish, reject } = lifecycle(state, has);
  state.fencingToken = fencingToken;

  const owner = { type: input.type, intentKey: input.intentKey, sessionId, fencingToken };
  const stepContext = { ...owner, sagaKey: workflowId, payload: input.payload };
  // Compensations are registered before the effect they undo, and run in reverse.
  const compensations: Compensation[] = [
    {
      name: 'undoEntity',
      run: () => act.compensation.undoEntity({ ...owner, freeIntent: input.compensation.freeIntent }),
    },
  ];

  const deadline = deadlineOf(input);
  if (pastDeadline(deadline)) {
    // Nothing is written past the deadline: the reservation is given back, the intent left free.
    state.errors.push({ at: state.phase, type: ErrorType.DEADLINE_EXCEEDED, message: deadlinePassed(deadline, 'the fenced write: nothing was written') });
    try {
      await CancellationScope.nonCancellable(() => act.release.releaseLock(owner));
    } catch (err) {
      // The lease ends by itself; the saga's outcome stands.
      state.errors.push({ at: 'releaseLock', type: failureType(err), message: failureMessage(err) });
    }
    return finish(SagaOutcome.EXPIRED, ErrorType.DEADLINE_EXCEEDED);
  }

  // Set when the write found another saga's entity and the saga ends REJECTED (REJECTED_AT_WRITE_PATCH).
  let rejectedAtWrite = false;
  try {
    // 2. Fenced write, kept alive by heartbeats that extend the lease.
    enter(SagaPhase.WRITING);
    // A plan without an owner (earlier histories, plain starts) writes none: its arguments are as they were.
    const written = await act.write.writeEntity({ ...owner, payload: input.payload, timings: input.timings, ...(input.owner === undefined ? {} : { createdBy: input.owner }) });
    if (written.status === 'DUPLICATE') {
      // PostgreSQL knew an entity that Redis had forgotten; the activity repaired the RMS.
      rejectedAtWrite = has(REJECTED_AT_WRITE_PATCH);
      return reject('DUPLICATE');
    }
    state.entityId = written.entityId;

    // 3. Finalise: the row becomes REGISTERED (fenced) before the reservation is promoted.
    await act.finalize.finalizeEntity(owner);
    if (options.searchableRegistered) enter(SagaPhase.REGISTERED);
    else state.phase = SagaPhase.REGISTERED;

    // 4. The remaining steps.
    enter(SagaPhase.RUNNING_STEPS);
    const heartbeating = input.steps.length > 0 && has(STEP_HEARTBEAT_PATCH);
    // What each step returned: the steps after it and the compensations see it (StepRequest.created).
    const results: Record<string, unknown> = {};
    const created = () => ({ entityId: written.entityId, results: { ...results } });
    for (const batch of stepBatches(input.steps)) {
      if (pastDeadline(deadline)) throw deadlineExceeded(deadline, `step ${batch.map((s) => s.step).join(', ')}`);
      // Only plans with waits take this branch, and no plan of an earlier version has one.
      const { wait, step: waitStep } = batch[0]!;
      if (wait !== undefined) {
        const told = (event: SagaWaitEventKind) => sagaEvents.wait({ type: input.type, intentKey: input.intentKey, step: waitStep, event });
        results[waitStep] = await waitFor(waitStep, wait, deadline, state, options.signals ?? { received: new Map(), timedOut: new Set() }, enter, told);
        state.stepsDone.push(waitStep);
        continue;
      }
      // A group's compensations are all registered before any of its steps starts. A step without
      // one (plans of earlier versions have none such) cannot be undone.
      for (const { compensation } of batch) {
        if (compensation === undefined) continue;
        const undo = heartbeating ? act.namedCompensation(compensation) : act.compensation;
        // The steps it undoes come from the recorded plan, never from the worker's type (see StepRequest.undoes).
        const undoes = stepsUndoneBy(input, compensation);
        const refusedAfter = input.timings.compensationAttempts;
        compensations.push({ name: compensation, run: () => undo.runCompensation({ ...stepContext, name: compensation, undoes, refusedAfter, created: created() }) });
      }
      // The steps of a group see what the steps before the group returned.
      const before = created();
      await allSettledOrFirstFailure(
        batch.map(async (plan) => {
          const { step, compensation } = plan;
          const undoable = compensation !== undefined;
          const run = () => (heartbeating ? act.heartbeatingStep(step, undoable) : act.step).runStep({ ...stepContext, name: step, created: before });
          // A step nothing could undo runs to its end, even when the saga is cancelled meanwhile.
          const done = await refusalUndone(plan, compensations, () => (undoable ? run() : CancellationScope.nonCancellable(run)));
          // Histories of earlier versions recorded no response.
          if (done.response !== undefined) results[step] = done.response;
          state.stepsDone.push(step);
        }),
      );
    }
    if (!has(FORWARD_PATCH)) {
      await act.complete.completeEntity(owner);
      return finish(SagaOutcome.COMPLETED);
    }
  } catch (err) {
    // Nothing of its own to undo: the rejection ends the saga, as at its reservation.
    if (rejectedAtWrite) throw err;
    const cancelled = isCancellation(err);
    state.errors.push({ at: state.phase, type: cancelled ? 'CANCELLED' : failureType(err), message: failureMessage(err) });
    enter(SagaPhase.COMPENSATING);
    const reversed = compensations.reverse();
    let left = await CancellationScope.nonCancellable(() =>
      has(KEEP_ENTITY_PATCH) ? compensateKeepingEntity(reversed, input.compensation, state) : compensate(reversed, input.compensation, state),
    );
    const { redrives } = options;
    if (waitsForRedrive(left, input, redrives, has)) {
      left = await CancellationScope.nonCancellable(() => untilRedriven(left, input, state, redrives, has, (l) => compensateKeepingEntity(l, input.compensation, state)));
    }
    const reason = cancelled ? 'CANCELLED' : (failureType(err) ?? 'FAILED');
    finish(compensatedOutcome(left.length > 0, reason), reason);
    // A redrive that ended the saga answers with its outcome before the workflow completes.
    if (state.attention !== undefined) await handlersSettled();
    return state;
  }
  // 5. Every step has succeeded: the saga only goes forward. Marking the row COMPLETED is retried
  // until it succeeds (a PostgreSQL failover must not undo a paid order), and a cancellation can no
  // longer stop it.
  await CancellationScope.nonCancellable(() => act.forward.completeEntity(owner));
  return finish(SagaOutcome.COMPLETED);
}

/**
 * Runs step `plan`; when it is refused (STEP_REJECTED) and its plan says a refusal leaves nothing to
 * undo (`undoRefused: false`), its own compensation is taken off `compensations` first. Plans of
 * earlier versions have no `undoRefused`: their refused steps are compensated, as they always were.
 */
async function refusalUndone<T>(plan: SagaStepPlan, compensations: Compensation[], run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (plan.undoRefused === false && failureType(err) === ErrorType.STEP_REJECTED) {
      const at = compensations.findIndex((c) => c.name === plan.compensation);
      if (at >= 0) compensations.splice(at, 1);
    }
    throw err;
  }
}

/** The plan's steps as they run: one at a time, or a group of steps next to each other at once. */
function stepBatches<S extends { group?: string }>(steps: readonly S[]): S[][] {
  const batches: S[][] = [];
  for (const step of steps) {
    const last = batches.at(-1);
    if (step.group !== undefined && last && last[0]!.group === step.group) last.push(step);
    else batches.push([step]);
  }
  return batches;
}

/**
 * Waits for every one of `runs` to end, then throws the first failure among them, in their order:
 * a step of a group that failed never cuts the others short (their compensations run after them).
 */
async function allSettledOrFirstFailure(runs: Promise<void>[]): Promise<void> {
  const settled = await Promise.allSettled(runs);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** One compensation of a saga, as it runs it. */
interface Compensation {
  name: string;
  run: () => Promise<unknown>;
}

/**
 * The redrives an operator sent (`redrive` updates accepted) and those the saga has run a round
 * for: updates accepted together are answered by one round, so none runs a compensation twice.
 * `waitEnded`: a wait ran out without a redrive; the saga ends COMPENSATION_FAILED, whatever its
 * phase still says meanwhile.
 */
interface Redrives {
  asked: number;
  answered: number;
  waitEnded: boolean;
}

/**
 * Whether a saga whose compensations `left` could not all finish waits in NEEDS_ATTENTION for a
 * redrive: its plan gives it time to ({@link NEEDS_ATTENTION_PATCH}; plans of earlier versions
 * have no `attentionMs`), and it runs the code that answers redrives (not the legacy saga).
 */
function waitsForRedrive(left: Compensation[], input: SagaInput, redrives: Redrives | undefined, has: Patched): redrives is Redrives {
  return left.length > 0 && (input.compensation.attentionMs ?? 0) > 0 && redrives !== undefined && has(NEEDS_ATTENTION_PATCH);
}

/**
 * Waits in NEEDS_ATTENTION, its type's `attentionMs` at a time, for a redrive, and on each one retries the
 * compensations `left` with `retry` (in their order; a creation's `undoEntity` last and only once
 * the others succeeded); returns what is still left when a round finished them all ([]) or a wait
 * ended without a redrive. The saga holds its row and intent (an operation, its entity's lock) all
 * along: nothing is undone until its turn.
 */
async function untilRedriven(
  left: Compensation[],
  input: SagaInput,
  state: SagaState,
  redrives: Redrives,
  has: Patched,
  retry: (left: Compensation[]) => Promise<Compensation[]>,
): Promise<Compensation[]> {
  const attentionMs = input.compensation.attentionMs ?? 0;
  const { enter } = lifecycle(state, has);
  const { workflowId } = workflowInfo();
  for (let round = 0; left.length > 0; round++) {
    const since = Date.now();
    const pending = left.map((c) => c.name);
    state.attention = { pending, since: new Date(since).toISOString(), until: new Date(since + attentionMs).toISOString(), redrives: round };
    enter(SagaPhase.NEEDS_ATTENTION);
    // Shown on the saga's page in the Temporal UI, above its history.
    setCurrentDetails(
      `**Needs attention**: ${pending.join(', ')} could not be undone (see the saga's errors). Fix the cause, then ` +
        `\`saga redrive ${workflowId}\`; at ${state.attention.until} the saga ends COMPENSATION_FAILED (then \`saga settle\`).`,
    );
    sagaEvents.attention({ type: state.type, intentKey: state.intentKey, pending, redrives: round });
    const redriven = await condition(() => redrives.asked > redrives.answered, attentionMs, { summary: `needs attention: waiting for a redrive of ${pending.join(', ')}` });
    if (!redriven) {
      redrives.waitEnded = true;
      break;
    }
    enter(SagaPhase.COMPENSATING);
    state.attention.redrives = round + 1;
    const asked = redrives.asked;
    left = await retry(left);
    redrives.answered = asked;
  }
  // A redrive accepted in the very task in which the wait ran out is answered with how the saga ends.
  redrives.answered = redrives.asked;
  setCurrentDetails('');
  return left;
}

/**
 * Runs the steps' compensations by the type's policy, then undoes the entity only if every one of
 * them succeeded: a saga that ends COMPENSATION_FAILED keeps its row and its intent (the customer,
 * the items and the amount an operator needs to settle it; no new saga may take the row over).
 * Records every failure; returns the compensations not done (failed, or never run), in their order:
 * none when every one succeeded. `ordered` ends with `undoEntity`.
 */
async function compensateKeepingEntity(ordered: Compensation[], policy: SagaInput['compensation'], state: SagaState): Promise<Compensation[]> {
  const undo = ordered[ordered.length - 1]!;
  const left = await compensate(ordered.slice(0, -1), policy, state);
  if (left.length > 0) return [...left, undo];
  return compensate([undo], policy, state);
}

/**
 * Runs the compensations by the type's policy; records every failure; returns those not done
 * (failed, or not run after a failure without `continueOnError`), in their order.
 */
async function compensate(ordered: Compensation[], policy: SagaInput['compensation'], state: SagaState): Promise<Compensation[]> {
  const done = new Set<Compensation>();
  const runOne = async (c: Compensation) => {
    try {
      await c.run();
      state.compensationsRun.push(c.name);
      done.add(c);
      return true;
    } catch (err) {
      state.errors.push({ at: c.name, type: failureType(err), message: failureMessage(err) });
      return false;
    }
  };
  if (policy.parallel) {
    await Promise.all(ordered.map(runOne));
  } else {
    for (const c of ordered) {
      if (!(await runOne(c)) && !policy.continueOnError) break;
    }
  }
  return ordered.filter((c) => !done.has(c));
}
