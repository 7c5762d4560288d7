/**
 * The Temporal Schedules the project keeps: today one, the hourly purge of the step idempotency
 * store. Made idempotently (at worker start): an existing schedule is left as it is.
 */
import { isDeepStrictEqual } from 'node:util';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import type { Config } from './config';
import type { PurgeRequest } from './workflows/purge';

/** The purge schedule's id: one per task queue, so each deployment (and test run) purges on its own workers. */
export function purgeScheduleId(taskQueue: string): string {
  return `idempotency-purge-${taskQueue}`;
}

/** Records per batch, and batches per run, of the purge. */
const PURGE_BATCH = { batchSize: 1000, maxBatches: 500 } as const;

/** What {@link ensurePurgeSchedule} did. */
export interface ScheduleOutcome {
  scheduleId: string;
  /**
   * `created` now; `updated`: its purge request differed from the config's; `unchanged`: as the
   * config says; `differs`: it differs, and was left as it is (`update: false`).
   */
  action: 'created' | 'updated' | 'unchanged' | 'differs';
  /** Whether it was made now (`action === 'created'`). */
  created: boolean;
}

/**
 * Makes the schedule that runs `purgeIdempotencyStore` every hour on the config's task queue; when it
 * exists, sets its retention to the config's if it differs, unless `update` is false: the schedule
 * has one owner, `saga setup`, and a worker only makes it when it is missing. Overlapping runs are
 * skipped.
 */
export async function ensurePurgeSchedule(client: Client, config: Config, options?: { update?: true }): Promise<ScheduleOutcome & { action: Exclude<ScheduleOutcome['action'], 'differs'> }>;
export async function ensurePurgeSchedule(client: Client, config: Config, options: { update: false }): Promise<ScheduleOutcome>;
export async function ensurePurgeSchedule(client: Client, config: Config, options: { update?: boolean } = {}): Promise<ScheduleOutcome> {
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
    return { scheduleId, action: 'created', created: true };
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    const handle = client.schedule.getHandle(scheduleId);
    const current = await handle.describe();
    if (current.action.type === 'startWorkflow' && isDeepStrictEqual(current.action.args, [request])) return { scheduleId, action: 'unchanged', created: false };
    if (options.update === false) return { scheduleId, action: 'differs', created: false };
    await handle.update((previous) => (previous.action.type === 'startWorkflow' ? { ...previous, action: { ...previous.action, args: [request] } } : previous));
    return { scheduleId, action: 'updated', created: false };
  }
}
