import { proxyActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type { SmokeResult } from '../shared';

const { smokeCheck } = proxyActivities<ReturnType<typeof createActivities>>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 3 },
});

/** A trivial workflow whose one activity touches Redis and PostgreSQL. */
export async function smokeWorkflow(name: string): Promise<SmokeResult> {
  return await smokeCheck(name);
}
