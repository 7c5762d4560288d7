/**
 * Bench-only workflows, bundled into the bench worker (bench/bare-worker.ts) on a task queue of its
 * own. Like src/workflows, they run in Temporal's sandbox: no Node built-ins, no I/O.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { BenchActivities } from './activities';

// The saga's activity options (src/workflows/reservation-saga.ts), so both pay the same per activity.
const { noop } = proxyActivities<BenchActivities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 8 },
});

/** Returns at once: a workflow start and one workflow task, nothing else. */
export async function emptyWorkflow(): Promise<void> {}

/** Runs `count` no-op activities one after another: the Temporal ceiling for a saga of as many steps. */
export async function noopActivitiesWorkflow(count: number): Promise<number> {
  for (let i = 0; i < count; i++) await noop();
  return count;
}
