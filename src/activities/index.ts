/**
 * Activities are created from their dependencies, so tests and the worker wire real clients the same
 * way; workflows proxy their types only.
 */
import { Context } from '@temporalio/activity';
import type { WorkflowService } from '@temporalio/client';
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import type { SagaMetrics } from '../metrics';
import type { Rms } from '../rms';
import { sagaKeyOfStepKey, type SagaTypes } from '../sagas';
import { SMOKE_COUNTER_TTL_MS, type SagaTimings, type SmokeResult } from '../shared';
import { purgeIdempotencyBatch } from '../db';
import { purgeEndedSessionsBatch } from '../db/ended-sessions';
import { createSagaActivities, type SagaActivityDeps } from './saga';

/** What the activities need. */
export interface ActivityDeps {
  redis: Redis | Cluster;
  rms: Rms;
  pool: Pool;
  /** Prefix of every Redis key written. */
  keyPrefix: string;
  /** Timings of a saga whose start names none. */
  timings: SagaTimings;
  /** The saga types the worker runs. */
  types: SagaTypes;
  /** The intent-key secret (the clients' own: INTENT_KEY_SECRET). */
  intentSecret: Uint8Array;
  /** How long an `entity_exists` marker lives (ENTITY_EXISTS_TTL_MS); none when undefined. */
  existsTtlMs?: number;
  /** How long a saga that ended is remembered as its key's answer (IDEMPOTENCY_RETENTION_MS). */
  keyRetentionMs?: number;
  /** How long a written row's lease is kept until finalise (PICKUP_LEASE_MS). */
  pickupLeaseMs?: number;
  /** The worker's metrics (leases, read-repairs). @default none */
  metrics?: SagaMetrics;
  /**
   * The worker connection's workflow service: starts that reached Temporal unencrypted are deleted,
   * and the purge asks it which sagas still run (their records are kept).
   */
  workflowService: NonNullable<SagaActivityDeps['workflowService']> & Pick<WorkflowService, 'listWorkflowExecutions'>;
  /**
   * The worker's IDEMPOTENCY_RETENTION_MS: no purge it runs deletes a younger record, whatever its
   * request says. A tombstone younger than that is what stops a late step from committing after its
   * compensation, and any Temporal client can start the purge workflow.
   */
  retentionFloorMs: number;
}

/** Builds every activity the worker registers. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createSagaActivities(deps),
    /**
     * One batch of the idempotency store's purge (see the `purgeIdempotencyStore` workflow), never
     * below the retention, and never a record of a saga that still runs (invariant 9): a saga may wait
     * longer than any retention (in NEEDS_ATTENTION, redrive after redrive), and its redrive needs its
     * records. Temporal out of reach fails the batch (it is retried): nothing is deleted unasked.
     * Beside them, by age alone, the record of ended sagas' keys (see `recordSagaEnd`: those sagas
     * have ended). Answers the larger of the two counts, so the run goes on while either is full.
     */
    async purgeIdempotencyBatch(input: { olderThanMs: number; batchSize: number }): Promise<number> {
      const olderThanMs = Number.isSafeInteger(input.olderThanMs) ? Math.max(input.olderThanMs, deps.retentionFloorMs) : input.olderThanMs;
      const { namespace } = Context.current().info;
      const steps = await purgeIdempotencyBatch(deps.pool, { ...input, olderThanMs, keep: (keys) => keysOfRunningSagas(deps.workflowService, namespace, keys) });
      const ended = await purgeEndedSessionsBatch(deps.pool, { ...input, olderThanMs });
      return Math.max(steps, ended);
    },
    /** Increments a Redis counter (which expires an hour after its last run) and reads the migration count from PostgreSQL. */
    async smokeCheck(name: string): Promise<SmokeResult> {
      const key = `${deps.keyPrefix}smoke:{${name}}`;
      // One transaction: a counter is never left without its expiry.
      const replies = (await deps.redis.multi().incr(key).pexpire(key, SMOKE_COUNTER_TTL_MS).exec()) ?? [];
      const failed = replies.find(([error]) => error);
      if (replies.length !== 2 || failed) throw failed?.[0] ?? new Error('the smoke counter\'s transaction was discarded');
      const redisCounter = Number(replies[0]![1]);
      const { rows } = await deps.pool.query<{ n: string }>('SELECT count(*) AS n FROM reservation_saga_migrations');
      return { redisCounter, migrationsApplied: Number(rows[0]!.n) };
    },
  };
}

/** Workflow ids per visibility query of {@link keysOfRunningSagas}. */
const IDS_PER_QUERY = 100;

/** A workflow id that can stand in a visibility query's quotes as it is (every saga's: `<type>-<idempotency key>`). */
const QUOTABLE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

/**
 * The idempotency keys, among `keys`, of steps of sagas that run now in `namespace`: one visibility
 * list per 100 sagas. A key that names no saga's step (another user of the store) is not among them.
 */
async function keysOfRunningSagas(service: Pick<WorkflowService, 'listWorkflowExecutions'>, namespace: string, keys: readonly string[]): Promise<Set<string>> {
  const sagaOf = new Map<string, string>();
  for (const key of keys) {
    const saga = sagaKeyOfStepKey(key);
    if (saga !== undefined && QUOTABLE_ID.test(saga)) sagaOf.set(key, saga);
  }
  const ids = [...new Set(sagaOf.values())];
  const running = new Set<string>();
  for (let i = 0; i < ids.length; i += IDS_PER_QUERY) {
    const query = `ExecutionStatus = "Running" AND WorkflowId IN (${ids.slice(i, i + IDS_PER_QUERY).map((id) => `"${id}"`).join(', ')})`;
    let nextPageToken: Uint8Array | undefined;
    do {
      const page = await service.listWorkflowExecutions({ namespace, query, pageSize: IDS_PER_QUERY, ...(nextPageToken ? { nextPageToken } : {}) });
      for (const { execution } of page.executions ?? []) if (execution?.workflowId) running.add(execution.workflowId);
      nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
    } while (nextPageToken);
  }
  return new Set([...sagaOf].filter(([, saga]) => running.has(saga)).map(([key]) => key));
}
