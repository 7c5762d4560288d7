/**
 * What a saga type declares: its scope, its input schema, how its intent is derived from the input,
 * its fenced write, and its remaining steps, each with a compensation. The generic workflow and
 * activities run any type declared this way.
 */
import type { PoolClient } from 'pg';
import type { z } from 'zod';
import type { FencedTable } from '../db';
import type { CompensationPolicy, SagaStepPlan } from '../shared';

/** What a step handler knows about its saga. */
export interface StepContext<I> {
  /** The workflow id (`<type>-<idempotency key>`): keys the step's effects. */
  sagaKey: string;
  intentKey: string;
  fencingToken: string;
  input: I;
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
 * The example payment provider (src/provider) answers refunds that way; with a service that cannot
 * void a key, the compensation has to outwait the step's attempts instead.
 */
export interface ExternalStep<I> {
  readonly kind: 'external';
  run(ctx: ExternalStepContext<I>): Promise<unknown>;
}

/** A step in our database (a {@link StepHandler}) or in another service (an {@link ExternalStep}). */
export type StepImplementation<I> = StepHandler<I> | ExternalStep<I>;

/** Declares an external step or compensation (see {@link ExternalStep}). */
export function externalStep<I>(run: (ctx: ExternalStepContext<I>) => Promise<unknown>): ExternalStep<I> {
  return { kind: 'external', run };
}

/** Whether `step` is an {@link ExternalStep}. */
export function isExternalStep<I>(step: StepImplementation<I>): step is ExternalStep<I> {
  return typeof step === 'object' && step.kind === 'external';
}

/** A saga type. */
export interface SagaDefinition<I = unknown> {
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
  /** The data columns of the entity row. */
  row(input: I): Record<string, unknown>;
  /**
   * Optional extra work inside the write's transaction, after the fenced row is written and before
   * it commits (a long, monolithic write). It must stop when `signal` aborts: the lease was lost or
   * the activity was cancelled, and the transaction will be rolled back.
   */
  writeWork?(tx: PoolClient, input: I, signal: AbortSignal): Promise<void>;
  /** The remaining steps in order, each with its compensation. */
  steps: readonly SagaStepPlan[];
  /** Implementations of every step and compensation named in `steps`: in our database, or external. */
  handlers: Record<string, StepImplementation<I>>;
  /** How compensations run. */
  compensation: CompensationPolicy;
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

/** Thrown by a compensation the other system refused; it is retried, then recorded as failed. */
export class CompensationRefusedError extends Error {
  override readonly name = 'CompensationRefusedError';
}

/** Thrown for input a saga type does not accept, before any side effect. */
export class SagaInputError extends Error {
  override readonly name = 'SagaInputError';
  constructor(
    message: string,
    /** `UNKNOWN_SAGA_TYPE`, `INVALID_INPUT` or `IDEMPOTENCY_KEY_REUSED` (see ErrorType). */
    readonly code: string,
  ) {
    super(message);
  }
}
