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
  /** Implementations of every step and compensation named in `steps`. */
  handlers: Record<string, StepHandler<I>>;
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
