/**
 * What a saga type declares: its scope, its input schema, how its intent is derived from the input,
 * its fenced write, and its remaining steps with their compensations. The generic workflow and
 * activities run any type declared this way.
 */
import type { PoolClient } from 'pg';
import type { z } from 'zod';
import type { FencedTable } from '../db';
import type { CompensationPolicy, SagaStepPlan } from '../shared';
import { branded } from '../brand';

/** What a step handler knows about its saga. */
export interface StepContext<I> {
  /** The workflow id (`<type>-<idempotency key>`): keys the step's effects. */
  sagaKey: string;
  intentKey: string;
  fencingToken: string;
  input: I;
  /**
   * The saga's entity and what its earlier steps answered: set for every step and compensation of a
   * creation (they run once its row is written) and of an operation. Absent only in an attempt
   * scheduled by an earlier version of the package and retried by this one.
   */
  entity?: EntityContext;
  /** Set for the steps of an {@link EntityOperation}: its entity and the earlier steps' results (as {@link entity}). */
  operation?: OperationContext;
  /**
   * Aborts when the attempt is given up (the saga was cancelled, the attempt timed out, the worker
   * shuts down). A handler that waits or works for long must stop then: whatever it did rolls back
   * with the transaction, and a compensation may already be on its way.
   */
  signal: AbortSignal;
}

/**
 * A step or compensation: runs inside the transaction that records its idempotency key, and must do
 * its effect through `tx`. An attempt that outlives its timeout cannot commit after the step's
 * compensation began (the compensation tombstones the step's key first; see src/db/idempotency.ts).
 */
export type StepHandler<I> = (tx: PoolClient, ctx: StepContext<I>) => Promise<unknown>;

/** What an external step's handler knows: its saga, and the keys the other service dedupes by. */
export interface ExternalStepContext<I> extends StepContext<I> {
  /**
   * `<saga key>:<step>`: send it as the other service's idempotency key. Every attempt of this step
   * (a retry after a timeout, a crash, a lost reply) sends the same one, so the service applies the
   * effect once and answers the retry with its stored response.
   */
  idempotencyKey: string;
  /** The idempotency key another step of this saga sends, e.g. the charge a refund undoes. */
  keyOf: (step: string) => string;
}

/**
 * A step or compensation whose effect is in another service (HTTP, gRPC): it cannot join our
 * transaction, so its record in the idempotency store goes STARTED (committed before the call) →
 * COMPLETED with the stored response, or FAILED with a business refusal ({@link StepRejectedError}),
 * and no transaction is held while the service works. A retry of a STARTED record calls again with
 * the same idempotency key; a COMPLETED or FAILED one is answered from the store.
 *
 * The compensation of an external step first tombstones the step's record, so no later attempt of
 * ours calls again; but an attempt already on the network may still reach the service. So the
 * compensation's own call must order itself after any attempt of the step at the service: undo the
 * effect made with the step's key if there is one, wait (fail, to be retried) while the service is
 * still working on that key, and otherwise make the service refuse that key from then on (void it).
 * The order example's payment provider (examples/orders/src/provider) answers refunds that way; with a service that cannot
 * void a key, the compensation has to outwait the step's attempts instead.
 */
export interface ExternalStep<I> {
  readonly kind: 'external';
  run(ctx: ExternalStepContext<I>): Promise<unknown>;
}

/** A step in our database (a {@link StepHandler}) or in another service (an {@link ExternalStep}). */
export type StepImplementation<I> = StepHandler<I> | ExternalStep<I>;

/** What a step, a compensation or a step group may be named: letters, digits, `_` and `-`, at most 64. */
export const STEP_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

/** The idempotency key of a saga's step or compensation: `<saga key>:<step>` (see ExternalStepContext). */
export function stepIdempotencyKey(sagaKey: string, step: string): string {
  return `${sagaKey}:${step}`;
}

/**
 * The saga key (workflow id) a step's idempotency key belongs to: what comes before its last `:`
 * (a step name has none; a saga key may). Undefined for a key no step of a saga has.
 */
export function sagaKeyOfStepKey(key: string): string | undefined {
  const at = key.lastIndexOf(':');
  return at > 0 && STEP_NAME_PATTERN.test(key.slice(at + 1)) ? key.slice(0, at) : undefined;
}

/** Declares an external step or compensation (see {@link ExternalStep}). */
export function externalStep<I>(run: (ctx: ExternalStepContext<I>) => Promise<unknown>): ExternalStep<I> {
  return { kind: 'external', run };
}

/** Whether `step` is an {@link ExternalStep}. */
export function isExternalStep<I>(step: StepImplementation<I>): step is ExternalStep<I> {
  return typeof step === 'object' && step.kind === 'external';
}

/**
 * A limit on the sagas of a type one caller starts (a `SagaClient`'s owner, an HTTP client): at most
 * `inFlight` running at once and at most `perSecond` started in any one second, counted for the
 * caller as a whole or, with `per`, for each value of the caller's inputs (a customer, a tenant). A
 * start past a limit is answered at the gate like a CONFLICT, with how long to wait (HTTP 429 with
 * Retry-After), and starts nothing; a DUPLICATE is answered as ever, without counting.
 */
export interface SagaLimit<I> {
  /**
   * Count per value of this as well, e.g. `(input) => input.customer`: the value is a keyed digest
   * (under INTENT_KEY_SECRET) before it names a Redis key. @default all of the caller's sagas count together
   */
  per?: (input: I) => string;
  /** At most this many sagas started and not ended. @default no limit */
  inFlight?: number;
  /** At most this many starts in any one second (sliding). @default no limit */
  perSecond?: number;
}

/** A saga type that creates an entity (an `order`): see {@link SagaType} for the other kind. */
export interface SagaDefinition<I = unknown> {
  /** A creation (the default when absent). */
  kind?: 'creation';
  /** Name used by clients and in workflow ids, e.g. `order`. */
  type: string;
  /** Intent scope (`^[a-z0-9][a-z0-9_-]{0,63}$`), the first part of the intent key. */
  scope: string;
  /** Validates and normalises the input. */
  schema: z.ZodType<I>;
  /** The minimal data that makes the created thing unique; hashed into the intent key. */
  intent(input: I): unknown;
  /** The table of the fenced entity rows. */
  table: FencedTable;
  /** The data columns of the entity row; `sagaKey` is the workflow id (keys of the saga's steps derive from it). */
  row(input: I, ctx: { sagaKey: string }): Record<string, unknown>;
  /**
   * Optional extra work inside the write's transaction, after the fenced row is written and before
   * it commits (a long, monolithic write). It must stop when `signal` aborts: the lease was lost or
   * the activity was cancelled, and the transaction will be rolled back.
   */
  writeWork?(tx: PoolClient, input: I, signal: AbortSignal): Promise<void>;
  /**
   * The remaining steps in order, each with its compensation. A step without one (a notice) cannot
   * be undone: it runs to its end even when the saga is cancelled meanwhile, and is retried until it
   * succeeds or is refused (a refusal compensates the steps before it).
   */
  steps: readonly SagaStepPlan[];
  /** Implementations of every step and compensation named in `steps`: in our database, or external. */
  handlers: Record<string, StepImplementation<I>>;
  /**
   * Handlers of steps and compensations the type no longer plans, kept by name for its sagas that
   * were planned with them and still run: a worker refuses to start while a running saga's plan
   * names a step or compensation it has no handler for (see the memo's `steps`). Drop one once no
   * saga planned with it runs.
   */
  retiredHandlers?: Record<string, StepImplementation<I>>;
  /** How compensations run. */
  /**
   * How long a saga of this type may take from its start, in ms (at most 30 days); a start may ask
   * for less, never more. Past it the saga takes no further step, compensates what it did and ends
   * EXPIRED; a step or compensation that is running is never cut. Absent: no deadline (a start may
   * still set one).
   */
  deadlineMs?: number;
  /**
   * Limits on the sagas one caller starts (see {@link SagaLimit}); several apply together, e.g. one
   * for the caller and one per customer. A saga counts until it ends however it ends, or, if it never
   * counts itself out (terminated), until its deadline and 5 minutes more (1 hour without a
   * deadline). @default none
   */
  limits?: SagaLimit<I> | readonly SagaLimit<I>[];
  compensation: CompensationPolicy;
}

/** What an operation's step handler knows besides its saga: the entity, and the earlier steps' results. */
/** The entity a step works on, and what the saga's earlier steps answered. */
export interface EntityContext {
  /**
   * The entity's row id: what the steps' SQL takes. Callers know the entity by another id (its
   * saga's `entityId`, the row id encrypted); keep this one out of what they are told, an error
   * message included.
   */
  id: string;
  /**
   * What each earlier step of this saga returned, by step name (a step of a group sees the steps
   * before its group; a compensation, every step done).
   */
  results: Readonly<Record<string, unknown>>;
}

export interface OperationContext {
  /**
   * The entity's row id (the operation's lock is on it): what the steps' SQL takes. Callers know the
   * entity by another id (its saga's `entityId`, the row id encrypted); keep this one out of what
   * they are told, an error message included.
   */
  entityId: string;
  /** The recorded result of each earlier step of this saga, by step name. */
  results: Readonly<Record<string, unknown>>;
}

/**
 * A saga type that changes an entity which exists already (cancel an order, amend it). It takes the
 * entity's **lock** in the RMS instead of reserving an intent: a lease on the lock key
 * `<scope>-lock:<HMAC of the entity id>`, with the reservation's fencing token, lease and
 * heartbeat rules, answered at the gate (SUCCESS with a token, or CONFLICT with `retryAfterMs` while
 * another operation holds it or the entity's creating saga still runs), released on every path.
 * Operations of every type on one entity share its lock, so they run one at a time.
 *
 * Each step in our database first **claims** the entity's row in its transaction: the row's
 * `last_operation_token` must not be above the lock's token, and becomes it (see
 * `FencedTable.claim`); a holder whose lease ended and whose entity a newer holder has claimed is
 * refused (FENCED_OUT), whatever it does. Such a step also keeps the lease (heartbeats extend it,
 * a lost lease aborts it). An external step extends the lease while it holds, but is not stopped by
 * its loss: it may only touch effects keyed by this saga, or settle what a committed step decided.
 * Order the steps so that every effect outside our database is made before the database step that
 * commits to it (and undone by a compensation if that step is refused), or settles it afterwards.
 */
export interface EntityOperation<I = unknown> {
  kind: 'operation';
  /** Name used by clients and in workflow ids, e.g. `order-cancel`. */
  type: string;
  /** The entity's scope (`^[a-z0-9][a-z0-9_-]{0,58}$`): the lock key is `<scope>-lock:…`. */
  scope: string;
  /** Validates and normalises the input. */
  schema: z.ZodType<I>;
  /**
   * The entity's id as the caller names it: the `entityId` its creating saga ended with (validate it
   * with `ENTITY_ID_PATTERN`). An id that names no row of `table` is a missing entity.
   */
  entity(input: I): string;
  /** The entity's table: it must carry `last_operation_token bigint` (see `FencedTable.claim`). */
  table: FencedTable;
  /**
   * The steps in order. A step without a compensation cannot be undone (a refund sent): it is
   * retried until it succeeds or is refused, never given up half-way, and a refusal runs the
   * compensations of the steps before it.
   */
  steps: readonly SagaStepPlan[];
  /** Implementations of every step and compensation named in `steps` (their context has `operation`). */
  handlers: Record<string, StepImplementation<I>>;
  /**
   * Handlers of steps and compensations the type no longer plans, kept by name for its sagas that
   * were planned with them and still run: a worker refuses to start while a running saga's plan
   * names a step or compensation it has no handler for (see the memo's `steps`). Drop one once no
   * saga planned with it runs.
   */
  retiredHandlers?: Record<string, StepImplementation<I>>;
  /**
   * The operation ends its entity and frees its intent (a return, a refund, a cancellation that gives
   * the thing back): once every step has succeeded, the row becomes RELEASED (kept for history,
   * found by no operation again) and the intent's marker is freed, so the next request for the same
   * intent is answered SUCCESS and creates a new entity, with a higher fencing token. A retry of the
   * creating saga's key still gets that saga's answer. The table must hold released rows (see
   * `fencedTableSql`, and `fencedTableReleaseSql` for a table created before): a worker refuses to
   * start otherwise. @default false
   */
  releases?: boolean;
  /**
   * How long a saga of this type may take from its start, in ms (at most 30 days); a start may ask
   * for less, never more. Past it the saga takes no further step, compensates what it did and ends
   * EXPIRED; a step or compensation that is running is never cut. Absent: no deadline (a start may
   * still set one).
   */
  deadlineMs?: number;
  /** Limits on the operations one caller starts (see {@link SagaDefinition.limits}). @default none */
  limits?: SagaLimit<I> | readonly SagaLimit<I>[];
  /** How compensations run (`freeIntent` does not apply: a lock is always released). */
  compensation: CompensationPolicy;
}

/** Any saga type: one that creates an entity, or an operation on one. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each definition has its own input type
export type SagaType<I = any> = SagaDefinition<I> | EntityOperation<I>;

/** Whether `def` is an {@link EntityOperation}. */
export function isEntityOperation<I>(def: SagaType<I>): def is EntityOperation<I> {
  return def.kind === 'operation';
}

/** The limits `def` declares, as a list (empty: none). */
export function limitsOf<I>(def: { limits?: SagaLimit<I> | readonly SagaLimit<I>[] }): readonly SagaLimit<I>[] {
  if (def.limits === undefined) return [];
  return Array.isArray(def.limits) ? (def.limits as readonly SagaLimit<I>[]) : [def.limits as SagaLimit<I>];
}

/** Thrown by a step for a business refusal: the saga compensates, without retrying the step. */
export class StepRejectedError extends Error {
  override readonly name = 'StepRejectedError';
  constructor(
    message: string,
    /** A short machine-readable reason, e.g. `PAYMENT_DECLINED`. */
    readonly reason: string,
  ) {
    super(message);
  }
}
branded(StepRejectedError, Symbol.for('reservation-saga/StepRejectedError'));

/**
 * Thrown by a compensation the other system refused: an answer, not an outage. It is asked again up
 * to the saga's `compensationAttempts` (whatever its retry policy), then recorded as failed.
 */
export class CompensationRefusedError extends Error {
  override readonly name = 'CompensationRefusedError';
}
branded(CompensationRefusedError, Symbol.for('reservation-saga/CompensationRefusedError'));

/** Thrown for input a saga type does not accept, before any side effect. */
export class SagaInputError extends Error {
  override readonly name: string = 'SagaInputError';
  constructor(
    message: string,
    /** `UNKNOWN_SAGA_TYPE`, `INVALID_INPUT` or `IDEMPOTENCY_KEY_REUSED` (see ErrorType). */
    readonly code: string,
  ) {
    super(message);
  }
}
branded(SagaInputError, Symbol.for('reservation-saga/SagaInputError'));

/** The handler of step or compensation `name` of `def`: a planned one, or one kept for sagas planned before (`retiredHandlers`). */
export function handlerOf<I>(def: { handlers: Record<string, StepImplementation<I>>; retiredHandlers?: Record<string, StepImplementation<I>> }, name: string): StepImplementation<I> | undefined {
  if (Object.hasOwn(def.handlers, name)) return def.handlers[name];
  return def.retiredHandlers && Object.hasOwn(def.retiredHandlers, name) ? def.retiredHandlers[name] : undefined;
}
