/**
 * Activities are created from their dependencies, so tests and the worker wire real clients the same
 * way; workflows proxy their types only.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import type { SagaMetrics } from '../metrics';
import type { Rms } from '../rms';
import type { SagaTypes } from '../sagas';
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
  /** The worker's metrics (leases, read-repairs). @default none */
  metrics?: SagaMetrics;
  /** The worker connection's workflow service: starts that reached Temporal unencrypted are deleted. */
  workflowService?: SagaActivityDeps['workflowService'];
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
     * below the retention: step records, and beside them the record of ended sagas' keys (see
     * `recordSagaEnd`). Answers the larger of the two counts, so the run goes on while either is full.
     */
    async purgeIdempotencyBatch(input: { olderThanMs: number; batchSize: number }): Promise<number> {
      const olderThanMs = Number.isSafeInteger(input.olderThanMs) ? Math.max(input.olderThanMs, deps.retentionFloorMs) : input.olderThanMs;
      const steps = await purgeIdempotencyBatch(deps.pool, { ...input, olderThanMs });
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
