/**
 * The Temporal Schedules the project keeps: today one, the hourly purge of the step idempotency
 * store. Made idempotently (at worker start): an existing schedule is left as it is.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import type { Config } from './config';
import type { PurgeRequest } from './workflows/purge';

/** The purge schedule's id: one per task queue, so each deployment (and test run) purges on its own workers. */
export function purgeScheduleId(taskQueue: string): string {
  return `idempotency-purge-${taskQueue}`;
}

/** Records per batch, and batches per run, of the purge. */
const PURGE_BATCH = { batchSize: 1000, maxBatches: 500 } as const;

/**
 * Makes the schedule that runs `purgeIdempotencyStore` every hour on the config's task queue; when it
 * exists, sets its retention to the config's (the config is the one source). Returns whether it was
 * made now. Overlapping runs are skipped.
 */
export async function ensurePurgeSchedule(client: Client, config: Config): Promise<{ scheduleId: string; created: boolean }> {
  const scheduleId = purgeScheduleId(config.temporal.taskQueue);
  const request: PurgeRequest = { olderThanMs: config.idempotencyRetentionMs, ...PURGE_BATCH };
  try {
    await client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: '1 hour' }] },
      action: { type: 'startWorkflow', workflowType: 'purgeIdempotencyStore', taskQueue: config.temporal.taskQueue, args: [request] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      memo: { purpose: 'purges step idempotency records older than IDEMPOTENCY_RETENTION_MS' },
    });
    return { scheduleId, created: true };
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await client.schedule.getHandle(scheduleId).update((previous) =>
      previous.action.type === 'startWorkflow' ? { ...previous, action: { ...previous.action, args: [request] } } : previous,
    );
    return { scheduleId, created: false };
  }
}
