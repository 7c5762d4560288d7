/**
 * Defect 2 of the hardening issue: a step attempt that outlives its timeout must never take effect
 * after its compensation ran. The adversary is a hung call: the step has claimed its key and charged
 * nothing yet when it waits on a call that never answers, and it ignores its AbortSignal (as a
 * careless handler, or a library without a timeout, would). The saga is cancelled, the attempt is
 * given up, the saga compensates; then the call answers and the attempt carries on where it stopped.
 */
import type { PoolClient } from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { defineSagaTypes, type StepHandler } from '../../src/sagas';
import { order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, orderSaga, type OrderInput } from '../fixtures/orders';

/** The hung call: chargePayment's attempts wait on it (after their claim, before their charge). */
let called!: () => void;
const isCalled = new Promise<void>((resolve) => (called = resolve));
let answer!: () => void;
const answered = new Promise<void>((resolve) => (answer = resolve));
/** Settles when the first attempt's transaction has ended (its COMMIT or ROLLBACK has run, or failed). */
let firstAttemptEnded: Promise<void> | undefined;

/** Calls `onEnd` once a COMMIT or ROLLBACK sent on `tx` has settled. */
function watchEnd(tx: PoolClient, onEnd: () => void): void {
  const query = tx.query.bind(tx) as (...args: unknown[]) => Promise<unknown>;
  Object.assign(tx, {
    query: (...args: unknown[]) => {
      const sent = query(...args);
      if (args[0] === 'COMMIT' || args[0] === 'ROLLBACK') {
        Reflect.deleteProperty(tx, 'query');
        void sent.then(onEnd, onEnd);
      }
      return sent;
    },
  });
}

/** A charge in our own database (a step in the transaction that records its key), after the hung call. */
const chargeAfterHungCall: StepHandler<OrderInput> = async (tx, { sagaKey, intentKey, input }) => {
  if (!firstAttemptEnded) firstAttemptEnded = new Promise((resolve) => watchEnd(tx, resolve));
  called();
  await answered; // deaf to ctx.signal
  await tx.query(
    `INSERT INTO payments (saga_key, intent_key, customer, amount_cents, card_last4, status) VALUES ($1, $2, $3, 100, $4, 'CHARGED')`,
    [sagaKey, intentKey, input.customer, input.payment.card.slice(-4)],
  );
  return { charged: true };
};

/** Its compensation, in the same database: what it finds charged, it refunds. */
const refundInDatabase: StepHandler<OrderInput> = async (tx, { sagaKey }) => {
  const { rowCount } = await tx.query(`UPDATE payments SET status = 'REFUNDED', updated_at = now() WHERE saga_key = $1 AND status = 'CHARGED'`, [sagaKey]);
  return { refunded: rowCount };
};

const types = defineSagaTypes({ ...orderSaga, handlers: { ...orderSaga.handlers, chargePayment: chargeAfterHungCall, refundPayment: refundInDatabase } });

let h: SagaHarness;
beforeAll(async () => {
  // Idle transactions end after 2 s: a stalled attempt's claim cannot hold up its compensation longer.
  h = await startHarness('saga zombie step', { sagaTypes: types, env: { DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '2000' } });
});
afterAll(async () => {
  answer();
  await h?.stop();
});

it('a step attempt hung past its timeout, answered after the saga compensated, commits nothing', { timeout: 240_000 }, async () => {
  const started = await h.client.start('order', order());
  expect(started.reservation.status).toBe('SUCCESS');
  await isCalled;

  // The customer gives up while the step hangs; the saga compensates.
  await h.client.cancel(started.workflowId);
  const final = await h.client.result(started.workflowId);
  expect(final).toMatchObject({ outcome: 'COMPENSATED', stepsDone: [], compensationsRun: ['refundPayment', 'undoEntity'] });

  // The call answers at last; the attempt goes on to charge and commit, and is let to finish.
  answer();
  await firstAttemptEnded;

  // Nothing of it took effect: no charge on a compensated order.
  const payments = await h.pool.query('SELECT status FROM payments WHERE saga_key = $1', [started.workflowId]);
  expect(payments.rows).toEqual([]);
  // The step's key is held by a tombstone: no later attempt can run it either.
  const record = await h.pool.query(`SELECT status FROM idempotency_store WHERE scope = 'order-step' AND key = $1`, [`${started.workflowId}:chargePayment`]);
  expect(record.rows).toEqual([{ status: 'TOMBSTONE' }]);
  expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'COMPENSATED' });
});
