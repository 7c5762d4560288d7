import { proxyActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';

const { purgeIdempotencyBatch } = proxyActivities<ReturnType<typeof createActivities>>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 5 },
});

/** What one purge run is asked to do. */
export interface PurgeRequest {
  /** Records last updated longer ago than this are deleted. */
  olderThanMs: number;
  /** Records per batch (one short statement each). */
  batchSize: number;
  /** Batches at most in this run; the next run goes on. */
  maxBatches: number;
}

/** What one purge run did. */
export interface PurgeResult {
  deleted: number;
  batches: number;
}

/**
 * Purges the step idempotency store of records older than the retention, one batch per activity, so
 * no statement holds many locks or runs long; started by the schedule `ensurePurgeSchedule` creates.
 */
export async function purgeIdempotencyStore(request: PurgeRequest): Promise<PurgeResult> {
  let deleted = 0;
  let batches = 0;
  while (batches < request.maxBatches) {
    const n = await purgeIdempotencyBatch({ olderThanMs: request.olderThanMs, batchSize: request.batchSize });
    deleted += n;
    batches++;
    if (n < request.batchSize) break;
  }
  return { deleted, batches };
}
