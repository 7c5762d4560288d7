/**
 * Once every step has succeeded, a saga only goes forward: a PostgreSQL outage while it marks the
 * order COMPLETED (here: the row locked away from it, each attempt cut by the statement timeout)
 * delays the end, for longer than any retry budget, but never refunds a paid order.
 */
import type { PoolClient } from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga finish forward', { env: { DB_STATEMENT_TIMEOUT_MS: '300' } });
});
afterAll(async () => {
  await h?.stop();
});

/** Attempts of the saga's pending completeEntity, or 0 when none is pending. */
async function completeAttempts(workflowId: string): Promise<number> {
  const { raw } = await h.client.temporal.workflow.getHandle(workflowId).describe();
  return raw.pendingActivities?.find((a) => a.activityType?.name === 'completeEntity')?.attempt ?? 0;
}

it('keeps marking the order COMPLETED past the old 8 attempts while PostgreSQL refuses, then completes: nothing is refunded', async () => {
  const started = await h.client.start('order', order({ simulate: { stepDelayMs: 1500 } }));
  await eventually(() => h.client.status(started.workflowId), (s) => s.state.stepsDone.includes('chargePayment'), 'the payment to be charged');
  // While the last step runs, take the order row's lock: every completeEntity attempt now waits for it
  // and is cut by the 300 ms statement timeout.
  const blocker: PoolClient = await h.pool.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM orders WHERE intent_key = $1 FOR UPDATE', [started.intentKey]);

    // Before the fix the 8th failed attempt started the compensations (a refund of a paid order).
    const seen = await eventually(
      async () => ({ attempts: await completeAttempts(started.workflowId), phase: (await h.client.status(started.workflowId)).state.phase }),
      (s) => s.attempts >= 9 || s.phase !== 'RUNNING_STEPS',
      'a ninth attempt at completing, or the saga leaving RUNNING_STEPS',
      60_000,
    );
    expect(seen.phase).toBe('RUNNING_STEPS');
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
  }

  const final = await h.client.result(started.workflowId);

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'], compensationsRun: [] });
  expect((await ordersTable.find(h.pool, started.intentKey))?.status).toBe('COMPLETED');
  expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: false }]);
});
