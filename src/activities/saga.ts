/**
 * The saga's activities: thin adapters over the RMS and the PostgreSQL layer. Business outcomes
 * become non-retryable ApplicationFailures with a `type` from ErrorType; infrastructure errors stay
 * retryable.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { temporal } from '@temporalio/proto';
import { isEncrypted } from '../codec/encryption-codec';
import { DEFAULT_PICKUP_LEASE_MS } from '../config';
import type { Pool, PoolClient } from 'pg';
import { IdempotencyKeyTombstonedError, finishExternal, startExternal, tombstoneIdempotencyKey, withIdempotency } from '../db';
import { recordEndedSession } from '../db/ended-sessions';
import { inTransaction } from '../db/idempotency';
import { DEFAULT_KEY_RETENTION_MS, entityOwnerOf, lockEntity, markEntityExists, recordSagaEnd, reserveIntent, undoEntity } from '../gate';
import { confirmLease, withLease } from './lease';
import type { SagaMetrics } from '../metrics';
import { isSessionId, RmsValidationError, sessionTag, type Rms } from '../rms';
import {
  CompensationRefusedError,
  decodeEntityId,
  encodeEntityId,
  handlerOf,
  SagaInputError,
  StepRejectedError,
  isEntityOperation,
  isExternalStep,
  isSealedStart,
  parseSagaData,
  planSaga,
  sagaDefinition,
  stepIdempotencyKey,
  type ExternalStep,
  type ExternalStepContext,
  type SagaType,
  type SagaTypes,
} from '../sagas';
import { DEFAULT_OWNER, ErrorType, stepsUndoneBy, type ReservationAnswer, type SagaLimitCounters, type SagaPlan, type SagaTimings } from '../shared';

/** What the saga activities need. */
export interface SagaActivityDeps {
  rms: Rms;
  pool: Pool;
  /** Timings of a saga whose start names none (the worker's configuration). */
  timings: SagaTimings;
  /** The saga types this worker runs. */
  types: SagaTypes;
  /** The intent-key secret (the clients' own: INTENT_KEY_SECRET). */
  intentSecret: Uint8Array;
  /** How long an `entity_exists` marker lives (ENTITY_EXISTS_TTL_MS); none when undefined. */
  existsTtlMs?: number;
  /**
   * How long a saga that ended is remembered as its key's answer (IDEMPOTENCY_RETENTION_MS; see
   * `recordSagaEnd`). @default DEFAULT_KEY_RETENTION_MS
   */
  keyRetentionMs?: number;
  /**
   * How long a written row's lease is kept until finalise promotes it (PICKUP_LEASE_MS, the gate's).
   * @default DEFAULT_PICKUP_LEASE_MS
   */
  pickupLeaseMs?: number;
  /** Counts leases, read-repairs and the like (steps and sagas are counted by the worker's interceptors). @default none */
  metrics?: SagaMetrics;
  /**
   * The worker connection's workflow service: a saga started without the gate whose input reached
   * Temporal unencrypted is read from its history and deleted (see {@link refuseClearInput}).
   * @default none: such a start is not checked (tests of the activities alone)
   */
  workflowService?: HistoryService;
}

/** What the activities call of Temporal's workflow service (a connection's `workflowService` is one). */
export interface HistoryService {
  getWorkflowExecutionHistory(
    request: temporal.api.workflowservice.v1.IGetWorkflowExecutionHistoryRequest,
  ): Promise<temporal.api.workflowservice.v1.IGetWorkflowExecutionHistoryResponse>;
  deleteWorkflowExecution(request: temporal.api.workflowservice.v1.IDeleteWorkflowExecutionRequest): Promise<unknown>;
}

/** The holder of a reservation. */
export interface Owner {
  type: string;
  intentKey: string;
  sessionId: string;
  fencingToken: string;
}

/** What a step or compensation runs with. */
export interface StepRequest extends Owner {
  name: string;
  sagaKey: string;
  payload: unknown;
  /**
   * Set for the steps of an entity operation: its entity (each database step claims the entity's
   * row with the lock's token first), the earlier steps' results, and the lock's lease and how
   * often to extend it (the saga's timings; the worker's when absent).
   */
  operation?: { entityId: string; results: Record<string, unknown>; leaseMs: number; heartbeatIntervalMs?: number };
  /**
   * For a compensation: the steps it undoes, as the saga's plan pairs them (see stepsUndoneBy), so a
   * step renamed since (its old names kept in `retiredHandlers`) is still undone. Absent in requests
   * scheduled by earlier versions: the type's current steps are looked up then.
   */
  undoes?: string[];
  /**
   * For a compensation: the attempt from which a refusal (`CompensationRefusedError`) is final, the
   * saga's `compensationAttempts`; its other failures are retried by its retry policy. Absent in
   * requests scheduled by earlier versions: a refusal is retried by the policy too.
   */
  refusedAfter?: number;
  /**
   * Set for the steps and compensations of a creation: its entity's id as callers know it (the
   * handler gets the row id, StepContext.entity) and what the earlier steps returned. Absent in
   * requests scheduled by earlier versions.
   */
  created?: { entityId: string; results: Record<string, unknown> };
  /**
   * For the last step of a creation (write-registers): a step in our database also marks the row
   * COMPLETED, fenced, in its own transaction, and answers `completed`. Ignored by an external step,
   * whose effect no transaction of ours can take in: the saga completes the row after it.
   */
  completes?: boolean;
}

/** What a step answers: also its recorded result, for the steps after it. */
export interface OperationStepResult {
  replayed: boolean;
  response: unknown;
  /** The step marked the creation's row COMPLETED in its own transaction (see StepRequest.completes). */
  completed?: true;
}

/** Result of the fenced write. */
export type WriteOutcome = { status: 'WRITTEN'; entityId: string } | { status: 'DUPLICATE' };

function nonRetryable(type: string, message: string, cause?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, cause: cause instanceof Error ? cause : undefined });
}

/** Input errors are the caller's to fix: never retried. */
function refuseInput(err: unknown): never {
  if (err instanceof SagaInputError) throw nonRetryable(err.code, err.message, err);
  if (err instanceof RmsValidationError) throw nonRetryable(ErrorType.INVALID_INPUT, err.message, err);
  throw err;
}

/**
 * A plain Temporal client that starts a saga without the codec stores its input, a card number
 * say, in clear in the history. Such a start is refused before any step: its execution is deleted,
 * history and all, and the saga fails with UNENCRYPTED_INPUT. A start that SagaClient sent through
 * an encrypting Temporal client carries the gate's reservation sealed with the intent secret (see
 * `isSealedStart`) and is not read; every other start is.
 */
async function refuseClearInput(workflowService: NonNullable<SagaActivityDeps['workflowService']>, namespace: string, workflowId: string): Promise<void> {
  // This run only: a run started later with the id (through the codec) is not this one.
  const execution = { workflowId, runId: Context.current().info.workflowExecution?.runId };
  const { history } = await workflowService.getWorkflowExecutionHistory({ namespace, execution, maximumPageSize: 1 });
  const payloads = history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  if (payloads.every((payload) => isEncrypted(payload))) return;
  await workflowService.deleteWorkflowExecution({ namespace, workflowExecution: execution });
  throw nonRetryable(
    ErrorType.UNENCRYPTED_INPUT,
    `saga ${workflowId}: its input reached Temporal unencrypted, so its execution was deleted before any step; start it through the codec (the Temporal CLI's --codec-endpoint, or SAGA_CODEC_KEYS' codec in an SDK's data converter)`,
  );
}

/** Builds the saga activities. */
export function createSagaActivities({
  rms,
  pool,
  timings,
  types,
  intentSecret,
  existsTtlMs,
  keyRetentionMs,
  pickupLeaseMs = DEFAULT_PICKUP_LEASE_MS,
  metrics,
  workflowService,
}: SagaActivityDeps) {
  const gate = { rms, pool, existsTtlMs, keyRetentionMs, metrics };
  /** The tables that operations claim: they carry `created_by`. */
  const claimedTables = new Set(Object.values(types).filter(isEntityOperation).map((def) => def.table.table));
  const definition = (type: string) => sagaDefinition(type, types);
  /** The row id of a creation's entity, from the id its write handed out (encodeEntityId). */
  const rowIdOf = (def: SagaType<unknown>, entityId: string): string => {
    const id = decodeEntityId(intentSecret, def.table.table, entityId);
    if (id === undefined) throw nonRetryable(ErrorType.INVALID_INPUT, `the saga's entity id names no row of ${def.table.table}`);
    return id;
  };
  const resolve = (type: string, payload: unknown) => {
    try {
      const def = definition(type);
      return { def, input: parseSagaData(def, payload) };
    } catch (err) {
      refuseInput(err);
    }
  };
  /** A saga type that creates an entity (the activities of the fenced write and finalisation). */
  const creation = (type: string) => {
    const def = definition(type);
    if (isEntityOperation(def)) throw nonRetryable(ErrorType.UNKNOWN_SAGA_TYPE, `saga type ${type} is an operation on an existing entity; it creates none`);
    return def;
  };

  /**
   * The saga's write found its lease lost: another request may hold the intent already, and the saga
   * will end COMPENSATED (LEASE_LOST), holding its key's answer. It is recorded as ended now, not only
   * when its compensation ends it (that may take a while: a worker killed, a compensation retried),
   * so that a retry of its key meanwhile is answered from the saga, not CONFLICT from the new holder:
   *   A: SUCCESS; write; worker killed, A's lease ends     B: reserve: SUCCESS
   *   A: next attempt: LEASE_LOST; compensating...       A's key again: CONFLICT (A's SUCCESS taken back)
   * Best effort: the compensation records it again, and a failure here must not hide LEASE_LOST.
   */
  const endedWithoutLease = async (owner: Owner) => {
    try {
      const { retentionMs } = await recordSagaEnd(gate, owner.intentKey, owner.sessionId);
      await rms.rememberEnded({ intent: owner.intentKey, sessionTags: [sessionTag(owner.sessionId)], retentionMs });
    } catch {
      // Recorded by undoEntity, when the saga's compensation runs.
    }
  };

  /**
   * Finalise's second half, once the row is REGISTERED: the reservation is promoted to the entity's
   * marker. If the lease expired in between, PostgreSQL still says we own the entity, so Redis is repaired.
   */
  const promote = async (def: SagaType<unknown>, req: Owner) => {
    const finalized = await rms.finalize({ intent: req.intentKey, sessionId: req.sessionId, fencingToken: req.fencingToken, existsTtlMs });
    if (finalized.status === 'FREED') {
      // A late attempt: the saga was undone meanwhile (the row's undo refuses a second REGISTERED).
      throw nonRetryable(ErrorType.FENCED_OUT, 'the entity was undone and its intent freed before this attempt finalised');
    }
    if (finalized.status === 'LOST') {
      metrics?.leaseLost(req.intentKey);
      await markEntityExists(gate, def.table, req.intentKey, { fencingToken: req.fencingToken, sessionTag: sessionTag(req.sessionId) });
    }
  };

  /** Read-repair: PostgreSQL holds a registered entity; make Redis know it, and let go of our lock. */
  const repairDuplicate = async (owner: Owner, existing: { lastFencingToken: string; sessionId: string }) => {
    await markEntityExists(gate, creation(owner.type).table, owner.intentKey, entityOwnerOf(existing));
    await rms.release({ intent: owner.intentKey, sessionId: owner.sessionId, fencingToken: owner.fencingToken });
  };

  return {
    /**
     * Derives the saga's plan from what it was started with (a local activity: the workflow has no
     * crypto and no saga registry). Malformed or inconsistent input fails without retries.
     */
    async planSaga(req: { workflowId: string; namespace: string; start: unknown }): Promise<SagaPlan> {
      let plan: SagaPlan | undefined;
      let refused: unknown;
      try {
        plan = planSaga(req.start, { workflowId: req.workflowId, namespace: req.namespace, timings, types, intentSecret });
      } catch (err) {
        refused = err;
      }
      // Only a start whose reservation SagaClient sealed skips the read: any other, a forged or an
      // earlier version's reservation included, may have reached Temporal unencrypted.
      if (workflowService && !(plan && isSealedStart(req.start, plan, intentSecret))) await refuseClearInput(workflowService, req.namespace, req.workflowId);
      if (plan) return plan;
      refuseInput(refused);
    },

    /**
     * Reserves the intent (or confirms the session's reservation: the same session gets its token
     * back). On SUCCESS it also asks PostgreSQL, the truth, whether the entity already exists (Redis
     * may have lost its data): if so, Redis is repaired and the answer is DUPLICATE.
     */
    async reserveIntent(req: { type: string; intentKey: string; sessionId: string; leaseMs: number; entityId?: string; owner?: string; legacyIntentKey?: string; confirms?: string }): Promise<ReservationAnswer> {
      let answer;
      try {
        const request = { table: definition(req.type).table, intentKey: req.intentKey, sessionId: req.sessionId, leaseMs: req.leaseMs };
        if (req.entityId !== undefined) {
          // An entity operation: the entity's lock (see lockEntity).
          // A plan of an earlier version without an owner (a plain start that named none) is the default owner's.
          const locked = await lockEntity(gate, { ...request, entityId: req.entityId, owner: req.owner ?? DEFAULT_OWNER });
          if (locked.status === 'NOT_FOUND') throw nonRetryable(ErrorType.ENTITY_NOT_FOUND, `there is no such entity for ${req.type} (or its creating saga was undone, or it was released)`);
          answer = locked;
        } else {
          answer = await reserveIntent(gate, {
            ...request,
            ...(req.legacyIntentKey === undefined ? {} : { legacyIntentKey: req.legacyIntentKey }),
            ...(req.confirms === undefined ? {} : { confirms: req.confirms }),
          });
        }
      } catch (err) {
        refuseInput(err);
      }
      switch (answer.status) {
        case 'SUCCESS':
          return { status: 'SUCCESS', fencingToken: answer.fencingToken, expiresAt: answer.expiresAt };
        case 'DUPLICATE':
          return { status: 'DUPLICATE' };
        case 'ENDED':
          // Only a caller that asks (answerEnded) is told ENDED; the saga's own reservation never asks.
          throw new Error('reserveIntent: the gate answered ENDED to a saga\'s own reservation');
        default:
          return answer;
      }
    },

    /**
     * Writes the fenced row in one transaction that may run long. Every heartbeat extends the lease;
     * a lost lease (or a cancellation) aborts the work and rolls the transaction back.
     */
    async writeEntity(req: Owner & { payload: unknown; timings: SagaTimings; createdBy?: string; register?: boolean }): Promise<WriteOutcome> {
      const def = creation(req.type);
      const { input } = resolve(req.type, req.payload);
      const { workflowExecution, attempt } = Context.current().info;
      const sagaKey = workflowExecution?.workflowId;
      if (sagaKey === undefined) throw nonRetryable(ErrorType.INVALID_INPUT, 'writeEntity runs only as an activity of a saga');
      const lease = { intent: req.intentKey, sessionId: req.sessionId, fencingToken: req.fencingToken, leaseMs: req.timings.leaseMs };
      if (req.register === true && attempt > 1) {
        /* A retry of a write that registers: an earlier attempt may have committed the row REGISTERED
           and then lost its reply, or failed to promote the reservation. Its lease is gone by now
           (promoted, or run out), so the lease check below would refuse the saga's own entity:
             A: write + register, COMMIT; promote: Redis away      A: retry: LEASE_LOST, compensates
           Our token's registered row is ours: only the promotion is left to do (it repairs a lost lease). */
        const row = await def.table.find(pool, req.intentKey);
        if (row && row.lastFencingToken === req.fencingToken && (row.status === 'REGISTERED' || row.status === 'COMPLETED')) {
          await promote(def, req);
          return { status: 'WRITTEN', entityId: encodeEntityId(intentSecret, def.table.table, row.id) };
        }
      }
      // A retry after the lease expired must not write: withLease checks ownership before anything else.
      const outcome = await withLease(rms, lease, req.timings.heartbeatIntervalMs, async (signal): Promise<WriteOutcome> => {
        const tx = await pool.connect();
        let open = false;
        try {
          await tx.query('BEGIN');
          open = true;
          const written = await def.table.writeFenced(tx, {
            intentKey: req.intentKey,
            sessionId: req.sessionId,
            fencingToken: req.fencingToken,
            data: def.row(input, { sagaKey }),
            // Who the entity is for, in a table that operations claim (the only ones with the column):
            // a saga planned by an earlier version without an owner (a plain start) is the default owner's.
            ...(claimedTables.has(def.table.table) ? { createdBy: req.createdBy ?? DEFAULT_OWNER } : {}),
          });
          if (written.status === 'FENCED_OUT') throw nonRetryable(ErrorType.FENCED_OUT, 'a newer reservation owns the row');
          if (written.status === 'DUPLICATE') {
            await tx.query('ROLLBACK');
            open = false;
            const row = await def.table.find(pool, req.intentKey);
            await repairDuplicate(req, row!);
            return { status: 'DUPLICATE' };
          }
          await def.writeWork?.(tx, input, signal);
          if (req.register === true) {
            // Finalise's first half in the write's transaction: the row commits REGISTERED, never PROCESSING.
            const marked = await def.table.markRegistered(tx, req);
            if (marked.status !== 'OK') throw nonRetryable(ErrorType.FENCED_OUT, `the row could not be registered: ${marked.status}`);
          }
          // The last word before COMMIT: is the lease still ours? (The row's fence covers the rest.)
          signal.throwIfAborted();
          await confirmLease(rms, lease, { metrics });
          await tx.query('COMMIT');
          open = false;
          return { status: 'WRITTEN', entityId: encodeEntityId(intentSecret, def.table.table, written.id) };
        } finally {
          if (open) await tx.query('ROLLBACK').catch(() => undefined);
          tx.release();
        }
      }, { metrics }).catch(async (err: unknown) => {
        if (err instanceof ApplicationFailure && err.type === ErrorType.LEASE_LOST) await endedWithoutLease(req);
        throw err;
      });
      if (outcome.status === 'WRITTEN' && req.register === true) {
        // Registered: the reservation is promoted now, by the attempt that still holds the lease.
        await promote(def, req);
      } else if (outcome.status === 'WRITTEN') {
        /* Written, not yet finalised: no heartbeat keeps the lease until finalise promotes it, and a
           worker may take a while to run that (workers killed or paused right after the write). The
           lease is kept as long as the gate's pickup lease meanwhile, or another request could take
           the intent and the row (still PROCESSING) from a saga already told SUCCESS:
             A: write commits, its worker dies       (A's lease ends)    B: reserve, take the row over
             A: finalise: FENCED_OUT, compensates    A's SUCCESS taken back
           Lost already (Redis flushed), or Redis away: finalise repairs the marker from the row. */
        await rms.extend({ ...lease, leaseMs: Math.max(pickupLeaseMs, lease.leaseMs) }).catch(() => undefined);
      }
      return outcome;
    },

    /**
     * Finalises: the row becomes REGISTERED (fenced) first, then the reservation is promoted. If the
     * lease expired in between, PostgreSQL still says we own the entity, so Redis is repaired.
     */
    async finalizeEntity(req: Owner): Promise<void> {
      const def = creation(req.type);
      const marked = await def.table.markRegistered(pool, req);
      if (marked.status !== 'OK') throw nonRetryable(ErrorType.FENCED_OUT, `the row could not be registered: ${marked.status}`);
      await promote(def, req);
    },

    /** Marks the row COMPLETED (fenced). */
    async completeEntity(req: Owner): Promise<void> {
      const marked = await creation(req.type).table.markCompleted(pool, req);
      if (marked.status !== 'OK') throw nonRetryable(ErrorType.FENCED_OUT, `the row could not be completed: ${marked.status}`);
    },

    /** Runs a remaining step once per saga (idempotency key `<saga key>:<step>`). */
    async runStep(req: StepRequest): Promise<OperationStepResult> {
      return runRecorded(req, 'step');
    },

    /** Runs a compensation once per saga; a refused one fails (and is retried). */
    async runCompensation(req: StepRequest): Promise<{ replayed: boolean }> {
      const { replayed } = await runRecorded(req, 'compensation');
      return { replayed };
    },

    /**
     * Runs a step of an entity operation once per saga, under the entity's lock: a step in our
     * database claims the entity's row with the lock's token first (a newer holder's claim refuses it:
     * FENCED_OUT) and keeps the lock's lease (a lost lease aborts it: LEASE_LOST); an external step
     * extends the lease while it holds. Answers the step's recorded result too.
     */
    async runOperationStep(req: StepRequest): Promise<OperationStepResult> {
      return runRecorded(req, 'step');
    },

    /** Runs a compensation of an entity operation once per saga; a database one claims the row first. */
    async runOperationCompensation(req: StepRequest): Promise<OperationStepResult> {
      return runRecorded(req, 'compensation');
    },

    /** The saga ended: it stops counting against its caller's limits of sagas in flight (its starts stay counted). */
    async countOut(req: { limits: SagaLimitCounters; sessionId: string }): Promise<{ countedOut: boolean }> {
      const counted = await rms.countOut({ tag: req.limits.tag, counters: req.limits.counters, sessionId: req.sessionId });
      return { countedOut: counted.status === 'COUNTED_OUT' };
    },

    /**
     * Keeps the entity's lock while an operation waits in NEEDS_ATTENTION: extends its lease and
     * heartbeats every `heartbeatIntervalMs` until the saga cancels it (its wait is over); a lease
     * found lost ends it (LEASE_LOST: a newer holder may have the entity by now).
     */
    async holdLock(req: Owner & { leaseMs: number; heartbeatIntervalMs: number }): Promise<never> {
      const lease = { intent: req.intentKey, sessionId: req.sessionId, fencingToken: req.fencingToken, leaseMs: req.leaseMs };
      return withLease(
        rms,
        lease,
        req.heartbeatIntervalMs,
        // withLease hands over a signal not yet aborted (it throws a cancellation that came first).
        (signal) => new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })),
        { metrics },
      );
    },

    /**
     * Gives the lock or lease back (only while this holder has it) as the saga ends: the end of every
     * entity operation, and of a saga whose deadline passed before its write. The saga is recorded as
     * ended first (see `recordSagaEnd`): a retry of its key is answered from it.
     */
    async releaseLock(req: Owner): Promise<{ released: boolean }> {
      const ended = await recordSagaEnd(gate, req.intentKey, req.sessionId);
      const released = await rms.release({ intent: req.intentKey, sessionId: req.sessionId, fencingToken: req.fencingToken, ended });
      return { released: released.status === 'RELEASED' };
    },

    /**
     * Releases an operation's entity once its steps succeeded (`EntityOperation.releases`). First, in
     * one transaction of PostgreSQL, the truth: the row becomes RELEASED, fenced by the lock's token
     * as a claim is, and the saga that created it is recorded as ended (a retry of that saga's key is
     * answered from it, not from the intent's next entity). Then Redis: the marker becomes the
     * creating token's tombstone, and that saga's session joins the intent's ended record, in one
     * script. A retry finds the row RELEASED by the same token and frees again, which changes nothing.
     * Lost Redis data cannot make the entity live again: the gate reads the row.
     */
    async releaseEntity(req: Owner & { entityId: string }): Promise<{ released: true }> {
      const { table } = definition(req.type);
      const released = await inTransaction(
        pool,
        async (tx) => {
          const result = await table.release(tx, { id: req.entityId, fencingToken: req.fencingToken });
          if (result.status === 'RELEASED' && isSessionId(result.sessionId)) {
            await recordEndedSession(tx, { intentKey: result.intentKey, sessionTag: sessionTag(result.sessionId) });
          }
          return result;
        },
        'releaseEntity',
      );
      if (released.status === 'FENCED_OUT') throw nonRetryable(ErrorType.FENCED_OUT, "releaseEntity: a newer holder of the entity's lock has claimed it");
      if (released.status !== 'RELEASED') {
        throw nonRetryable(ErrorType.ENTITY_NOT_FOUND, `releaseEntity: the entity is ${released.status === 'NOT_FOUND' ? 'gone' : `${released.from}, not COMPLETED`}`);
      }
      const retentionMs = keyRetentionMs ?? DEFAULT_KEY_RETENTION_MS;
      await rms.free({
        intent: released.intentKey,
        fencingToken: released.lastFencingToken,
        existsTtlMs,
        ...(isSessionId(released.sessionId) ? { ended: { sessionId: released.sessionId, retentionMs } } : {}),
      });
      return { released: true };
    },

    /**
     * Undoes the entity: the row becomes COMPENSATED (fenced: a newer token's row is untouched), then,
     * by policy, the intent is freed (only the `entity_exists` carrying our token), and our lock, if
     * still held, is released.
     */
    async undoEntity(req: Owner & { freeIntent: boolean }): Promise<{ row: string }> {
      const marked = await undoEntity(gate, creation(req.type).table, req, req.freeIntent);
      if (marked.status === 'ILLEGAL_TRANSITION') {
        // A COMPLETED row is a finished order: undoing it is never a silent success.
        throw nonRetryable(ErrorType.COMPENSATION_REFUSED, `undoEntity: a ${marked.from} row cannot be undone`);
      }
      return { row: marked.status };
    },
  };

  async function runRecorded(req: StepRequest, kind: 'step' | 'compensation'): Promise<OperationStepResult> {
    const { def, input } = resolve(req.type, req.payload);
    const handler = handlerOf(def, req.name);
    if (!handler) throw nonRetryable(ErrorType.UNKNOWN_SAGA_TYPE, `saga type ${req.type} has no ${kind} ${req.name}`);
    // A step and its compensation key their records alike; the payload ties them to the holder.
    const recorded = (scope: 'step' | 'compensation', name: string) => ({
      scope: `${req.type}-${scope}`,
      key: stepIdempotencyKey(req.sagaKey, name),
      payload: { intentKey: req.intentKey, fencingToken: req.fencingToken },
    });
    const { operation } = req;
    if (operation && !isEntityOperation(def)) throw nonRetryable(ErrorType.UNKNOWN_SAGA_TYPE, `saga type ${req.type} is no entity operation`);
    // An operation's database step claims the entity's row, in the step's own transaction, before its handler runs.
    const claimed = operation
      ? async (tx: PoolClient) => {
          const claim = await def.table.claim(tx, { id: operation.entityId, fencingToken: req.fencingToken });
          if (claim.status === 'FENCED_OUT') throw nonRetryable(ErrorType.FENCED_OUT, `${req.name}: a newer holder of the entity's lock has claimed it`);
          if (claim.status !== 'CLAIMED') throw nonRetryable(ErrorType.ENTITY_NOT_FOUND, `${req.name}: the entity is ${claim.status === 'NOT_FOUND' ? 'gone' : claim.from}`);
        }
      : undefined;
    const lease = operation && { intent: req.intentKey, sessionId: req.sessionId, fencingToken: req.fencingToken, leaseMs: operation.leaseMs };
    // An operation's step keeps the lock's lease: a database step must hold it, an external one extends it while it holds.
    const keeping = <T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> =>
      lease && kind === 'step'
        ? withLease(rms, lease, operation.heartbeatIntervalMs ?? timings.heartbeatIntervalMs, work, { mustHold: !isExternalStep(handler), metrics })
        : withHeartbeats(timings.heartbeatIntervalMs, work);
    return keeping(async (signal) => {
      if (kind === 'compensation') {
        // First the step's own key, for good: an attempt of the step still in flight commits or rolls
        // back before this returns (a stalled one is ended by PostgreSQL's idle-transaction timeout),
        // and none can commit after. So the compensation below sees every effect of its step.
        let undoes = false;
        for (const step of req.undoes ?? stepsUndoneBy(def, req.name)) {
          const held = await tombstoneIdempotencyKey(pool, recorded('step', step));
          if (held === 'COMPLETED' || held === 'STARTED') undoes = true;
        }
        // An operation's step that never committed (nor reached the other service) left nothing to
        // undo, so its compensation claims nothing: a newer holder may own the entity by now.
        if (operation && !undoes) return { replayed: false, response: null };
      }
      const entity = operation ? { id: operation.entityId, results: operation.results } : req.created && { id: rowIdOf(def, req.created.entityId), results: req.created.results };
      const ctx = {
        sagaKey: req.sagaKey,
        intentKey: req.intentKey,
        fencingToken: req.fencingToken,
        input,
        signal,
        ...(entity ? { entity } : {}),
        ...(operation ? { operation: { entityId: operation.entityId, results: operation.results } } : {}),
      };
      const own = recorded(kind, req.name);
      try {
        if (isExternalStep(handler)) return await runExternal(own, handler, { ...ctx, idempotencyKey: own.key, keyOf: (step) => recorded('step', step).key });
        // The last step of a creation completes the row with its effect, fenced: both commit, or neither.
        const completes = kind === 'step' && req.completes === true && !operation;
        const { replayed, result } = await withIdempotency(pool, { ...own, signal }, async (tx) => {
          await claimed?.(tx);
          const result = await handler(tx, ctx);
          if (completes) {
            const marked = await def.table.markCompleted(tx, req);
            if (marked.status !== 'OK') throw nonRetryable(ErrorType.FENCED_OUT, `${req.name}: the row could not be completed: ${marked.status}`);
          }
          return result;
        });
        // A replayed step answers from its record alone: the saga completes the row itself (a no-op when done).
        return { replayed, response: result ?? null, ...(completes && !replayed ? { completed: true as const } : {}) };
      } catch (err) {
        if (err instanceof StepRejectedError) throw nonRetryable(ErrorType.STEP_REJECTED, `${req.name}: ${err.message} (${err.reason})`, err);
        if (err instanceof CompensationRefusedError) {
          // The other system's answer, not its outage: asked again a few times, never for the outage policy's minutes.
          const final = req.refusedAfter !== undefined && Context.current().info.attempt >= req.refusedAfter;
          throw ApplicationFailure.create({ type: ErrorType.COMPENSATION_REFUSED, message: `${req.name}: ${err.message}`, cause: err, nonRetryable: final });
        }
        if (err instanceof IdempotencyKeyTombstonedError) {
          throw nonRetryable(ErrorType.STEP_COMPENSATED, `${req.name}: its compensation has begun; this late attempt does nothing`, err);
        }
        throw err;
      }
    });
  }

  /**
   * An external step or compensation (see ExternalStep): STARTED is committed before the call, the
   * outcome after it; a retry of a STARTED record calls again with the same key, a recorded outcome
   * answers without calling. A business refusal is recorded, so every later attempt gets the same.
   */
  async function runExternal(
    record: { scope: string; key: string; payload: unknown },
    step: ExternalStep<unknown>,
    ctx: ExternalStepContext<unknown>,
  ): Promise<OperationStepResult> {
    const found = await startExternal(pool, record);
    if (found.status === 'COMPLETED') return { replayed: true, response: found.response };
    if (found.status === 'FAILED') throw refusalOf(found.response);
    let response: unknown;
    try {
      response = await step.run(ctx);
    } catch (err) {
      if (err instanceof StepRejectedError) {
        const outcome = await finishExternal(pool, { ...record, status: 'FAILED', response: { message: err.message, reason: err.reason } });
        if (outcome.status === 'TOMBSTONE') throw new IdempotencyKeyTombstonedError(record.scope, record.key);
        throw outcome.status === 'FAILED' ? refusalOf(outcome.response) : err;
      }
      // Anything else (the service out of reach, a timeout, a 409 while the key is in use): the record
      // stays STARTED and the retry calls again with the same key.
      throw err;
    }
    // Recorded even when the attempt was given up meanwhile: the effect happened at the service.
    const outcome = await finishExternal(pool, { ...record, status: 'COMPLETED', response: response ?? null });
    if (outcome.status === 'TOMBSTONE') throw new IdempotencyKeyTombstonedError(record.scope, record.key);
    if (outcome.status === 'FAILED') throw refusalOf(outcome.response);
    return { replayed: false, response: response ?? null };
  }
}

/** The StepRejectedError a FAILED external record holds. */
function refusalOf(response: unknown): StepRejectedError {
  const { message, reason } = (response ?? {}) as { message?: unknown; reason?: unknown };
  return new StepRejectedError(typeof message === 'string' ? message : 'refused', typeof reason === 'string' ? reason : 'REFUSED');
}

/**
 * Runs `work` while the activity heartbeats (every `intervalMs`, or more often when the activity's
 * heartbeat timeout asks for it), so a cancellation or a timeout reaches it: `work` gets the
 * activity's cancellation signal. Once that signal aborts, the beats stop: an attempt that does not
 * stop when told is then given up by its heartbeat timeout instead of being waited for. The timer
 * always stops when `work` settles.
 */
async function withHeartbeats<T>(intervalMs: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timeoutMs = ctx.info.heartbeatTimeoutMs;
  const every = timeoutMs ? Math.min(intervalMs, Math.max(1, Math.floor(timeoutMs / 3))) : intervalMs;
  // As in withLease: the first beat one interval in (each is a write on the Temporal server).
  const beat = setInterval(() => {
    if (!ctx.cancellationSignal.aborted) ctx.heartbeat();
  }, every);
  try {
    return await work(ctx.cancellationSignal);
  } catch (err) {
    // Given up (cancelled, timed out): report that, not whatever the interrupted work threw.
    throw ctx.cancellationSignal.aborted ? ctx.cancellationSignal.reason : err;
  } finally {
    clearInterval(beat);
  }
}

/** The saga activities' type, for `proxyActivities` in the workflow. */
export type SagaActivities = ReturnType<typeof createSagaActivities>;
