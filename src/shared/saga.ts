/**
 * The reservation saga's contract, shared by the workflow (sandbox-safe: no Node APIs here), the
 * activities and the client.
 */
/** Phases of a saga, in order; the last five are terminal. */
export const SagaPhase = {
  RESERVING: 'RESERVING',
  WRITING: 'WRITING',
  REGISTERED: 'REGISTERED',
  RUNNING_STEPS: 'RUNNING_STEPS',
  COMPENSATING: 'COMPENSATING',
  /**
   * A compensation failed after its retries: the saga waits, holding its row and its intent (an
   * operation, its entity's lock), for an operator to fix the cause and redrive it (`saga redrive`),
   * for its type's `attentionMs`; then it ends COMPENSATION_FAILED.
   */
  NEEDS_ATTENTION: 'NEEDS_ATTENTION',
  /** At a wait of its plan: for a signal or a timer (see `SagaStepPlan.wait`), holding its entity. */
  WAITING: 'WAITING',
  COMPLETED: 'COMPLETED',
  REJECTED: 'REJECTED',
  COMPENSATED: 'COMPENSATED',
  COMPENSATION_FAILED: 'COMPENSATION_FAILED',
  EXPIRED: 'EXPIRED',
} as const;
export type SagaPhase = (typeof SagaPhase)[keyof typeof SagaPhase];

/** Terminal outcomes (the `SagaOutcome` search attribute). */
export const SagaOutcome = {
  COMPLETED: 'COMPLETED',
  REJECTED: 'REJECTED',
  COMPENSATED: 'COMPENSATED',
  COMPENSATION_FAILED: 'COMPENSATION_FAILED',
  /**
   * Its deadline passed: it took no step after it, and everything it had done is undone (or it
   * wrote nothing: the deadline passed before its fenced write).
   */
  EXPIRED: 'EXPIRED',
} as const;
export type SagaOutcome = (typeof SagaOutcome)[keyof typeof SagaOutcome];

/**
 * How a saga's workflow ended when the saga recorded no outcome of its own: it failed (the worker
 * could not run its input), an operator terminated it, or its run timed out.
 */
export const SagaAbort = {
  FAILED: 'FAILED',
  TERMINATED: 'TERMINATED',
  TIMED_OUT: 'TIMED_OUT',
  CANCELED: 'CANCELED',
} as const;
export type SagaAbort = (typeof SagaAbort)[keyof typeof SagaAbort];

/** How a saga ended: its outcome, or how its workflow was stopped without one. */
export type SagaEnd = SagaOutcome | SagaAbort;

/**
 * `type` of the ApplicationFailures that activities raise for business outcomes (non-retryable) and
 * that the client raises for refused requests. Workflows branch on these, never on error classes.
 */
export const ErrorType = {
  /** The reservation lease was lost while writing: the write was rolled back. */
  LEASE_LOST: 'LEASE_LOST',
  /** A newer fencing token owns the row. */
  FENCED_OUT: 'FENCED_OUT',
  /** A step met a business refusal (declined payment, short stock, ...). */
  STEP_REJECTED: 'STEP_REJECTED',
  /** A late attempt of a step whose compensation has already taken its key: it never runs. */
  STEP_COMPENSATED: 'STEP_COMPENSATED',
  /** An operation's entity does not exist (or its creating saga was undone, or an operation released it). */
  ENTITY_NOT_FOUND: 'ENTITY_NOT_FOUND',
  /** A compensation was refused by the system it undoes. */
  COMPENSATION_REFUSED: 'COMPENSATION_REFUSED',
  /** The input does not match the saga type's schema. */
  INVALID_INPUT: 'INVALID_INPUT',
  /** An unknown saga type or step name. */
  UNKNOWN_SAGA_TYPE: 'UNKNOWN_SAGA_TYPE',
  /** The same idempotency key was used with another payload. */
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
  /**
   * The failure a REJECTED saga ends its workflow with (its details: the saga's final state). A
   * failed run does not hold its workflow id, so a later request with the same key is a new attempt.
   */
  SAGA_REJECTED: 'SAGA_REJECTED',
  /** The saga's deadline passed: it took no further step and compensated (outcome EXPIRED). */
  DEADLINE_EXCEEDED: 'DEADLINE_EXCEEDED',
  /** A redrive of a saga that is not waiting in NEEDS_ATTENTION (compensating, running, or ended). */
  NOT_NEEDING_ATTENTION: 'NOT_NEEDING_ATTENTION',
  /** A signal's wait passed its timeout: the saga compensates (a hold that expired). */
  WAIT_TIMED_OUT: 'WAIT_TIMED_OUT',
  /** A signal the saga does not wait for (its plan has no such wait, the wait timed out, or the saga ended). */
  NOT_WAITING: 'NOT_WAITING',
  /** A saga's input reached Temporal unencrypted (a plain client without the codec): its execution was deleted. */
  UNENCRYPTED_INPUT: 'UNENCRYPTED_INPUT',
} as const;
export type ErrorType = (typeof ErrorType)[keyof typeof ErrorType];

/** The synchronous answer of the reservation step, returned early to the caller. */
export type ReservationAnswer =
  | { status: 'SUCCESS'; fencingToken: string; expiresAt: number }
  | { status: 'DUPLICATE' }
  | { status: 'CONFLICT'; retryAfterMs: number };

/** One remaining step and the compensation that undoes it. */
export interface SagaStepPlan {
  /** Activity-side step name, e.g. `chargePayment`. */
  step: string;
  /**
   * Its compensation, e.g. `refundPayment`. A step may have none (a notice: nothing could undo it);
   * it then runs to its end even when the saga is cancelled, retried until it succeeds or is refused.
   */
  compensation?: string;
  /**
   * Steps next to each other with the same group run at once (a hotel and a flight held together),
   * each with its compensation registered before any of them starts. If one fails, the group's
   * others are let finish, then the compensations of the group and of the steps before it run (in
   * reverse, or at once, by the type's policy). Only in a type that creates an entity.
   */
  group?: string;
  /**
   * How the step's attempts are retried after an infrastructure error (a refusal,
   * `StepRejectedError`, is never retried). @default 8 attempts, 200 ms doubling up to 5 s apart
   * (about 30 s); a step of an operation with no compensation: until it succeeds or is refused
   */
  retry?: StepRetryPolicy;
  /**
   * How its compensation's attempts are retried after a failure (an outage of the service it calls)
   * before the compensation counts as failed (the saga then waits in NEEDS_ATTENTION). A refusal,
   * `CompensationRefusedError`, is retried only up to the saga's `compensationAttempts` whatever the
   * policy. A plan records it, so a running saga keeps the policy it was planned with.
   * @default {@link DEFAULT_COMPENSATION_RETRY}: for 10 minutes, 200 ms doubling up to 30 s apart
   */
  compensationRetry?: StepRetryPolicy;
  /**
   * Whether its compensation runs when the step itself is refused (`StepRejectedError`), with those
   * of the steps before it. true: a refusal may come after part of the effect (a charge authorised,
   * then declined), and the compensation settles it. false: a refusal of this step guarantees it did
   * nothing, so only the steps before it are undone. Only for a step with a compensation. @default true
   */
  undoRefused?: boolean;
  /**
   * Makes this entry a **wait**, not a step: the saga waits, with no activity, no worker slot and no
   * lease kept, for the signal `wait.signal` (sent by its entity's owner: `SagaClient.signal`, `saga
   * signal`, HTTP) or, without one, for `wait.timeoutMs` to pass (a timer). A wait has no handler,
   * compensation, group or retry. The steps after it find what it ended with in their results, under
   * its name: `{ signal, payload }` (the first one sent), `{ timedOut: true }` (a signal's timeout,
   * with `onTimeout: 'continue'`) or `{ elapsed: true }` (a timer). Only in a type that creates an entity.
   */
  wait?: SagaWait;
}

/** A wait of a saga's plan (see {@link SagaStepPlan.wait}). */
export interface SagaWait {
  /** The signal's name (letters, digits, _ and -; at most 64). Absent: a timer that ends after `timeoutMs`. */
  signal?: string;
  /** How long the saga waits, in ms (at most 30 days, and never past its deadline: that ends it EXPIRED). */
  timeoutMs: number;
  /**
   * What a signal's timeout does: `compensate`, the saga compensates what it did (reason
   * WAIT_TIMED_OUT: a hold that expires); `continue`, it goes on to the next step, which finds
   * `{ timedOut: true }`. @default 'compensate'
   */
  onTimeout?: 'compensate' | 'continue';
}

/** What a saga answers a signal with (see `SagaClient.signal`). */
export interface SagaSignalReceipt {
  signal: string;
  /** False when the same signal was received before: the first one's payload stands, this one changed nothing. */
  first: boolean;
}

/**
 * How a step's or a compensation's attempts are retried: Temporal's retry policy, in milliseconds.
 * Attempts stop at the first of `maximumAttempts` and `totalMs` reached.
 */
export interface StepRetryPolicy {
  /** At most this many attempts, the first included (1 to 1000). @default no bound but `totalMs` */
  maximumAttempts?: number;
  /** No attempt starts after this long from the first one's scheduling, in ms (at most 30 days). @default no bound but `maximumAttempts` */
  totalMs?: number;
  /** The wait before the second attempt, in ms (at least 1). @default 200 */
  initialIntervalMs?: number;
  /** Each wait is the previous one times this (at least 1). @default 2 */
  backoffCoefficient?: number;
  /** No wait is longer than this, in ms (at least `initialIntervalMs`). @default 100 × initialIntervalMs */
  maximumIntervalMs?: number;
  /** The failure types (ApplicationFailure `type`, an error's name) that are not retried. @default none */
  nonRetryableErrorTypes?: string[];
}

/** `StepRetryPolicy.initialIntervalMs` when a policy gives none. */
export const DEFAULT_RETRY_INITIAL_INTERVAL_MS = 200;

/** The longest `StepRetryPolicy.totalMs`: 30 days. */
export const MAX_RETRY_TOTAL_MS = 30 * 24 * 60 * 60 * 1000;

/** The most attempts a `StepRetryPolicy` may allow. */
export const MAX_RETRY_ATTEMPTS = 1000;

/** Attempts of a refused compensation (`CompensationRefusedError`), when the client sets none (`compensationAttempts`). */
export const DEFAULT_COMPENSATION_ATTEMPTS = 5;

/**
 * The retry policy a plan records for a compensation whose type declares none: it rides out an
 * outage of the service it calls of up to 10 minutes (about 25 attempts, 200 ms doubling up to 30 s
 * apart), then the saga waits for an operator. A refusal escalates after `compensationAttempts`
 * attempts (about 3 s). Plans recorded before it carry no policy: `compensationAttempts` attempts of
 * any failure, 200 ms doubling up to 5 s apart.
 */
export const DEFAULT_COMPENSATION_RETRY: Readonly<StepRetryPolicy> = Object.freeze({
  totalMs: 10 * 60 * 1000,
  initialIntervalMs: DEFAULT_RETRY_INITIAL_INTERVAL_MS,
  backoffCoefficient: 2,
  maximumIntervalMs: 30 * 1000,
});

/**
 * Temporal's activity options for a step or compensation retried by `policy` (its retry policy, and
 * a schedule-to-close timeout for `totalMs`).
 */
export function retryOptionsOf(policy: StepRetryPolicy): {
  retry: { maximumAttempts?: number; initialInterval?: number; backoffCoefficient?: number; maximumInterval?: number; nonRetryableErrorTypes?: string[] };
  scheduleToCloseTimeout?: number;
} {
  const retry = {
    ...(policy.maximumAttempts === undefined ? {} : { maximumAttempts: policy.maximumAttempts }),
    initialInterval: policy.initialIntervalMs ?? DEFAULT_RETRY_INITIAL_INTERVAL_MS,
    backoffCoefficient: policy.backoffCoefficient ?? 2,
    ...(policy.maximumIntervalMs === undefined ? {} : { maximumInterval: policy.maximumIntervalMs }),
    ...(policy.nonRetryableErrorTypes === undefined ? {} : { nonRetryableErrorTypes: [...policy.nonRetryableErrorTypes] }),
  };
  return { retry, ...(policy.totalMs === undefined ? {} : { scheduleToCloseTimeout: policy.totalMs }) };
}

/** How a saga type runs its compensations. */
export interface CompensationPolicy {
  /** Run the compensations concurrently instead of in reverse order. @default false */
  parallel: boolean;
  /** Keep running the other compensations after one failed. @default true */
  continueOnError: boolean;
  /**
   * After compensation, free the intent in Redis (only the `entity_exists` carrying this saga's
   * token) so a later, new request for the same intent may succeed. @default true
   */
  freeIntent: boolean;
  /**
   * How long a saga whose compensations could not all finish waits in NEEDS_ATTENTION, in ms,
   * holding its row and intent, for an operator to fix the cause and redrive the ones left (`saga
   * redrive`); each redrive that fails again waits as long anew. When the wait ends, the saga ends
   * COMPENSATION_FAILED (a creation's to be settled by hand, `saga settle`). 0: it ends so at once.
   * An operation waits holding its entity's lock (extending its lease), so no other operation runs
   * on an entity half undone. Absent in plans of earlier versions (they never wait). @default 1 day
   * (in defineSaga and defineOperation)
   */
  attentionMs?: number;
}

/** The longest a saga type may wait in NEEDS_ATTENTION for a redrive: 30 days. */
export const MAX_ATTENTION_MS = 30 * 24 * 60 * 60 * 1000;

/** Timing of the saga's activities; validated by the client (beat < heartbeat timeout < lease). */
export interface SagaTimings {
  leaseMs: number;
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
  /**
   * Attempts of a compensation its other system refuses (`CompensationRefusedError`) before it is
   * recorded as failed; in sagas planned before {@link DEFAULT_COMPENSATION_RETRY}, attempts of a
   * compensation that has no `compensationRetry`, whatever failed. @default 5
   */
  compensationAttempts: number;
}

/**
 * What any Temporal client starts a `reservationSaga` with: the saga type, the caller's idempotency
 * key and the data. The worker derives everything else from the registered saga type (intent key,
 * request hash, steps, compensation policy) and bounds the timings. `SagaClient` also passes the
 * reservation it took at the gate, which the saga confirms as its first step; without one the saga
 * reserves by itself and answers through the `reservation` update.
 */
export interface SagaStart {
  type: string;
  idempotencyKey: string;
  /** The saga type's input, e.g. an order. */
  data: unknown;
  /** Lease and heartbeat timings; the worker's own, where absent. */
  timings?: Partial<SagaTimings>;
  /** The reservation `SagaClient` took at the gate, for this saga's session, sealed by it. */
  reservation?: SealedReservation;
  /**
   * Who the saga runs for (SagaClient's `owner`; `http:<client id>` for `saga serve`): the entity it
   * creates is that owner's, and only the same owner's operations find it. A start without one (a
   * plain Temporal client, which may act for anyone) creates an entity of no owner and may operate
   * on any.
   */
  owner?: string;
  /**
   * How long the saga may take, from its start, in ms: at most its type's `deadlineMs` (which it
   * defaults to). Past it, the saga takes no further step and compensates, ending EXPIRED.
   */
  deadlineMs?: number;
}

/** The longest deadline a saga type or a start may declare: 30 days. */
export const MAX_DEADLINE_MS = 30 * 24 * 60 * 60 * 1000;

/** Who may start sagas for an owner: 1-64 letters, digits and `. _ : -`, beginning with a letter or digit. */
export const OWNER_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/**
 * The owner of a saga whose start names none: a SagaClient's without an `owner`, and a plain
 * Temporal client's start without one (its entity is this owner's, not open to every owner).
 */
export const DEFAULT_OWNER = 'app';

/** A reservation taken at the gate, handed to the saga it was taken for. */
export interface GateReservation {
  /** The saga's session, derived from its workflow id (see `sagaSessionId`). */
  sessionId: string;
  fencingToken: string;
  /** When the lease ends, epoch ms by the Redis server's clock. */
  expiresAt: number;
}

/**
 * A gate reservation as `SagaClient` hands it to the saga in its start. A start that reaches Temporal
 * unencrypted is deleted by the worker, which reads each start's history to know; a start whose
 * reservation carries a `mac` that holds is not read: only a holder of the intent secret can make
 * one, and SagaClient makes one only for a start it sends through an encrypting Temporal client.
 */
export interface SealedReservation extends GateReservation {
  /**
   * Keyed hash (HMAC-SHA-256 under a key derived from INTENT_KEY_SECRET) of the reservation, the
   * saga's workflow id and its request hash (see `reservationMac`); absent in starts of earlier
   * versions (their history is read).
   */
  mac?: string;
}

/**
 * The saga's plan as the worker derived it (and, before the gate, what the client started a saga
 * with; such histories still replay). Contains no raw secrets; the payload is the validated input.
 */
export interface SagaInput {
  type: string;
  /** The caller's idempotency key (the workflow id is `<type>-<key>`). */
  idempotencyKey: string;
  /** Keyed hash (HMAC-SHA-256 under INTENT_KEY_SECRET) of the canonical payload: a retry with the same key must carry the same hash. */
  requestHash: string;
  /** `<scope>:<hash>` of the intent, its text in Unicode NFC. */
  intentKey: string;
  /**
   * The key earlier versions gave this intent, present only when its text was not in NFC (they
   * keyed it as it came): the gate answers DUPLICATE or CONFLICT for an entity or a holder of it too.
   */
  legacyIntentKey?: string;
  /** The validated input of the saga type. */
  payload: unknown;
  steps: SagaStepPlan[];
  compensation: CompensationPolicy;
  timings: SagaTimings;
  /**
   * Set when the saga type is an operation on an existing entity (order-cancel): `intentKey` is then
   * the entity's lock, and the saga runs its steps under that lock instead of writing a new row.
   */
  operation?: {
    /** The entity's row id: what the lock and the steps take. */
    entityId: string;
    /** The id callers name the entity by (see `encodeEntityId`); absent in plans of earlier versions. */
    publicId?: string;
    /** Once its steps succeed, the saga releases the entity (see `EntityOperation.releases`); absent: it does not. */
    releases?: true;
  };
  /** Who the saga runs for (see {@link SagaStart.owner}); absent for a start without one. */
  owner?: string;
  /** How long the saga may take from its start, in ms (see {@link SagaStart.deadlineMs}); absent: no deadline. */
  deadlineMs?: number;
  /**
   * The counters of its caller's limits the gate counts the saga in (its type declares `limits` and
   * it has an owner): the saga counts itself out of them when it ends. Absent otherwise, and in the
   * plans of earlier versions.
   */
  limits?: SagaLimitCounters;
}

/** Where a saga counts against its caller's limits (see `SagaDefinition.limits`). */
export interface SagaLimitCounters {
  /** The caller's hash tag (`limitTag`): every counter of the caller is on its slot. */
  tag: string;
  /** The counters' ids: `<rule>` for a caller's limit, `<rule>:<scope value digest>` for a scope value's. */
  counters: string[];
  /** How long the saga counts at most, in ms, if it never counts itself out (a terminated saga). */
  holdMs: number;
}

/** The plan of one saga, derived by the worker; `reservation` is the one the gate took, if any. */
export interface SagaPlan extends SagaInput {
  /** The saga's reservation session (see `sagaSessionId`). */
  sessionId: string;
  reservation?: GateReservation;
}

/**
 * The saga's memo: what a retry with the same idempotency key is answered from, by one describe call,
 * with no worker. Set by SagaClient at start; kept current by the saga.
 */
export interface SagaMemo {
  /** Keyed hash of the canonical request (see SagaInput.requestHash; a plain SHA-256 for sagas of earlier versions): a retry with the same key must carry the same. */
  requestHash?: string;
  /** The saga's reservation answer. */
  reservation?: ReservationAnswer;
  /** Who the saga runs for ({@link SagaStart.owner}): set by SagaClient at start, by the saga for a plain start that names one. */
  owner?: string;
  /**
   * The steps and compensations the saga's plan runs, by name, recorded once it is planned: the
   * handlers every worker of its task queue must have until it ends. Absent for sagas planned by
   * earlier versions, and for one not planned yet (it will be planned with the types of the worker
   * that runs it).
   */
  steps?: string[];
}

/**
 * The steps of a plan that its compensation `compensation` undoes (each paired with it in the plan),
 * in order: what that compensation must find done, or stop, before it runs.
 */
export function stepsUndoneBy(plan: { readonly steps: readonly SagaStepPlan[] }, compensation: string): string[] {
  return plan.steps.filter((s) => s.compensation === compensation).map((s) => s.step);
}

/** The names of the steps and compensations of a plan, each once, in order. */
export function stepNamesOf(plan: Pick<SagaInput, 'steps'>): string[] {
  // A wait has no handler.
  return [...new Set(plan.steps.flatMap((s) => (s.wait ? [] : s.compensation ? [s.step, s.compensation] : [s.step])))];
}

/** An error the saga recorded (never swallowed). */
export interface SagaError {
  /** Where it happened: a step, a compensation or a phase. */
  at: string;
  type?: string;
  message: string;
}

/** What the `state` query returns, and the saga's result. */
export interface SagaState {
  type: string;
  idempotencyKey: string;
  requestHash: string;
  intentKey: string;
  phase: SagaPhase;
  /**
   * How it ended: the saga's outcome, or (in what `SagaClient.status` reads of a workflow stopped
   * without one) FAILED, TERMINATED or TIMED_OUT.
   */
  outcome?: SagaEnd;
  /** Why the saga was rejected or compensated, when it was. */
  reason?: string;
  reservation?: ReservationAnswer;
  fencingToken?: string;
  /**
   * The id of the saga's entity, once written: opaque (the row id encrypted, see `encodeEntityId`),
   * the id its type's operations take. Sagas of earlier versions recorded the row id.
   */
  entityId?: string;
  stepsDone: string[];
  compensationsRun: string[];
  errors: SagaError[];
  /**
   * Set while the saga waits in NEEDS_ATTENTION, and kept once it ends: what it still has to undo,
   * since when and until when it waits (ISO 8601, workflow time), and how many redrives it took.
   */
  attention?: SagaAttention;
  /** Set while the saga is at a wait of its plan: which, for what signal (none: a timer), until when (ISO 8601, workflow time). */
  waiting?: { step: string; signal?: string; until: string };
}

/** What a saga that needs an operator waits for (see {@link SagaState.attention}). */
export interface SagaAttention {
  /** The compensations still to run, in the order they will be retried (`undoEntity` last). */
  pending: string[];
  /** When it entered NEEDS_ATTENTION this time. */
  since: string;
  /** When its wait ends (then it ends COMPENSATION_FAILED) unless redriven before. */
  until: string;
  /** Redrives so far. */
  redrives: number;
}

/**
 * Argument of the early-answer update. With `requestHash`, the update is refused when the saga was
 * started with another payload; a caller that does not know the hash (the Temporal CLI) may omit it,
 * or the whole argument.
 */
export interface ReservationRequest {
  requestHash?: string;
}

/** The workflow type name. */
export const RESERVATION_SAGA_WORKFLOW = 'reservationSaga';

/** Idempotency keys: what a caller may choose (they become part of the workflow id). */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The workflow id of a saga: `<type>-<idempotency key>`. */
export function sagaWorkflowId(type: string, idempotencyKey: string): string {
  return `${type}-${idempotencyKey}`;
}

/** True for the four terminal phases. */
export function isTerminal(phase: SagaPhase): boolean {
  return phase in SagaOutcome;
}
