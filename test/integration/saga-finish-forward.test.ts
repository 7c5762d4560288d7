/**
 * Once every step has succeeded, a saga only goes forward: a PostgreSQL outage while it marks the
 * order COMPLETED (here: the row locked away from it, each attempt cut by the statement timeout)
 * delays the end, for longer than any retry budget, but never refunds a paid order. The order saga's
 * last step, in our database, completes the row in its own transaction (write-registers): both
 * commit or neither, and a refused completion is the step's failure, retried without a second
 * effect. `order-charged-last` charges last, at the provider: completing is then an activity of its own.
 */
import type { PoolClient } from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { defineSaga, defineSagaTypes, type SagaDefinition } from '../../src/sagas';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, sagaTypesFor } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga finish forward', {
    env: { DB_STATEMENT_TIMEOUT_MS: '300' },
    sagaTypes: (config, providerUrl) => {
      const types = sagaTypesFor(config, providerUrl);
      const { kind: _kind, ...order } = types.order as SagaDefinition<unknown>;
      return defineSagaTypes(...Object.values(types), defineSaga({ ...order, type: 'order-charged-last', steps: [...order.steps].reverse() }));
    },
  });
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
  const started = await h.client.start('order-charged-last', order({ simulate: { stepDelayMs: 1500 } }));
  await eventually(() => h.client.status(started.workflowId), (s) => s.state.stepsDone.includes('reserveStock'), 'the stock to be reserved');
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

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['reserveStock', 'chargePayment'], compensationsRun: [] });
  expect((await ordersTable.find(h.pool, started.intentKey))?.status).toBe('COMPLETED');
  expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: false }]);
});

it("retries the order's last step while its completion is refused, and completes both once: one stock reservation, no completeEntity", async () => {
  const started = await h.client.start('order', order({ simulate: { stepDelayMs: 1500 } }));
  await eventually(() => h.client.status(started.workflowId), (s) => s.state.stepsDone.includes('chargePayment'), 'the payment to be charged');
  // While the last step runs, take the order row's lock for a while: each attempt's completion waits
  // for it and is cut by the statement timeout, which rolls the stock it took back with it.
  const blocker: PoolClient = await h.pool.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM orders WHERE intent_key = $1 FOR UPDATE', [started.intentKey]);
    await eventually(
      async () => (await h.client.temporal.workflow.getHandle(started.workflowId).describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'runStep')?.attempt ?? 0,
      (attempt) => attempt >= 2,
      'a second attempt at the last step',
      30_000,
    );
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
  }

  const final = await h.client.result(started.workflowId);

  expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'], compensationsRun: [] });
  expect((await ordersTable.find(h.pool, started.intentKey))?.status).toBe('COMPLETED');
  // The refused attempts took no stock: only the one that committed with the completion did.
  const { rows } = await h.pool.query<{ quantity: string }>('SELECT quantity FROM stock_reservations WHERE saga_key = $1', [started.workflowId]);
  expect(rows.map((r) => Number(r.quantity)).sort()).toEqual([1, 2]);
  const history = await h.client.temporal.workflow.getHandle(started.workflowId).fetchHistory();
  const activities = (history.events ?? []).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter((n) => n !== undefined);
  expect(activities).toEqual(['writeEntity', 'runStep', 'runStep']);
});
