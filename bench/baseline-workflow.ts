/**
 * The hand-written baseline of saga-throughput: the order example's business effects as one plain
 * Temporal workflow, the way a team would write it without reservation-saga: create the order (a
 * unique index on the intent answers a duplicate), charge the card, reserve the stock, complete the
 * order; on a failure, undo what was attempted in reverse order and mark the order FAILED. No gate,
 * no fencing, no lease. Bundled by the baseline worker (bench/baseline-worker.ts). Like
 * src/workflows, it runs in Temporal's sandbox: no Node built-ins, no I/O.
 */
import { ActivityFailure, ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { BaselineActivities } from './baseline-activities';
import { BaselineFailure, type BaselineOrder, type BaselineResult } from './baseline-shared';

// The saga's retry options (src/workflows/saga/proxies.ts): infrastructure errors are retried,
// business outcomes are non-retryable failures.
const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5s' } as const;
const effects = proxyActivities<BaselineActivities>({ startToCloseTimeout: '60s', retry: { ...RETRY, maximumAttempts: 8 } });
// A compensation is retried until it succeeds or is refused (a non-retryable failure).
const compensations = proxyActivities<BaselineActivities>({ startToCloseTimeout: '60s', retry: RETRY });

/** The type of the business failure behind `err` (an activity's non-retryable ApplicationFailure), if any. */
function failureTypeOf(err: unknown): string | undefined {
  return err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? (err.cause.type ?? undefined) : undefined;
}

/** What `err` says, the activity's own message rather than Temporal's wrapper. */
function messageOf(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) return err.cause.message;
  return err instanceof Error ? err.message : String(err);
}

/** Places `order`; its id (the order's key at the provider and in the database) is the workflow's id. */
export async function baselineOrderWorkflow(order: BaselineOrder): Promise<BaselineResult> {
  const orderId = workflowInfo().workflowId;
  try {
    await effects.createOrder(orderId, order);
  } catch (err) {
    if (failureTypeOf(err) === BaselineFailure.DUPLICATE) return { outcome: 'DUPLICATE', reason: messageOf(err) };
    throw err;
  }
  // Each effect's undo is registered before the effect is attempted: an attempt whose answer was lost
  // may have taken effect (the provider voids a charge key it never charged; releaseStock finds nothing).
  const undo: { name: string; run: () => Promise<string> }[] = [];
  try {
    undo.push({ name: 'refundPayment', run: () => compensations.refundPayment(orderId) });
    await effects.chargePayment(orderId, order);
    undo.push({ name: 'releaseStock', run: async () => `${await compensations.releaseStock(orderId)} line(s)` });
    await effects.reserveStock(orderId, order);
    await effects.completeOrder(orderId);
    return { outcome: 'COMPLETED' };
  } catch (err) {
    // Every compensation runs, even after one fails; each outcome is recorded in the result.
    const done: string[] = [];
    for (const step of undo.reverse()) {
      try {
        done.push(`${step.name}: ${await step.run()}`);
      } catch (compensationErr) {
        done.push(`${step.name} failed: ${messageOf(compensationErr)}`);
      }
    }
    await compensations.failOrder(orderId);
    return { outcome: 'FAILED', reason: messageOf(err), failure: failureTypeOf(err), compensations: done };
  }
}
