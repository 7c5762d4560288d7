/**
 * Bench-only workflows, bundled into the bench worker (bench/bare-worker.ts) on a task queue of its
 * own. Like src/workflows, they run in Temporal's sandbox: no Node built-ins, no I/O.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { BenchActivities } from './activities';

// The saga's activity options (src/workflows/saga/proxies.ts), so both pay the same per activity.
const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5s' } as const;
const { noop } = proxyActivities<BenchActivities>({ startToCloseTimeout: '10s', retry: { ...RETRY, maximumAttempts: 8 } });
const local = proxyLocalActivities<BenchActivities>({ startToCloseTimeout: '10s', retry: { ...RETRY, maximumAttempts: 4 } });

/** Returns at once: a workflow start and one workflow task, nothing else. */
export async function emptyWorkflow(): Promise<void> {}

/**
 * Runs `localCount` no-op local activities, then `count` no-op activities, one after another: the
 * Temporal ceiling for a saga of as many (the saga plans and confirms its reservation in local
 * activities, then runs its write, finalisation, steps and completion as activities).
 */
export async function noopActivitiesWorkflow(count: number, localCount = 0): Promise<number> {
  for (let i = 0; i < localCount; i++) await local.noop();
  for (let i = 0; i < count; i++) await noop();
  return localCount + count;
}
