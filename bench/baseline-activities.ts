/**
 * The activities of the hand-written baseline (bench/baseline-workflow.ts): the order example's
 * business effects as a team would write them on plain Temporal, without reservation-saga. One
 * activity per effect, each safe to retry:
 * - `createOrder`: the order row, guarded by a unique index on the intent (the customer and the
 *   cart), as seed 001 guards its work with a unique idempotency key; a second order of a live cart
 *   gets the unique violation (23505) as a DUPLICATE answer;
 * - `chargePayment` / `refundPayment`: the example payment provider, over HTTP, with idempotency keys
 *   derived from the order's key;
 * - `reserveStock` / `releaseStock`: the stock, keyed by the order, in one transaction each;
 * - `completeOrder` / `failOrder`: the order's status.
 * No gate, no fencing, no lease. Business outcomes are non-retryable ApplicationFailures with a type
 * from {@link BaselineFailure}; anything else is retried by Temporal.
 */
import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type pg from 'pg';
import { PaymentDeclinedError, RefundRefusedError, type PaymentProviderClient } from '../examples/orders/src/provider/client';
import { BaselineFailure, type BaselineOrder } from './baseline-shared';

/**
 * The baseline's tables, in a database of its own (bench/lib/baseline.ts): `orders` (one row per
 * order, its key the workflow's id; one live order per intent), and `stock` and `stock_reservations`
 * as the order example has them (examples/orders/migrations), with the same example stock.
 */
export const BASELINE_SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS orders (
  id           text        PRIMARY KEY,
  intent_key   text        NOT NULL,
  status       text        NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED')),
  customer     text        NOT NULL,
  items        jsonb       NOT NULL,
  amount_cents bigint      NOT NULL CHECK (amount_cents >= 0),
  payment_key  text        NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
-- One live order per intent: a failed order frees its cart to be ordered again.
CREATE UNIQUE INDEX IF NOT EXISTS orders_live_intent_key ON orders (intent_key) WHERE status <> 'FAILED';

CREATE TABLE IF NOT EXISTS stock (
  sku        text   PRIMARY KEY,
  available  bigint NOT NULL CHECK (available >= 0)
);
INSERT INTO stock (sku, available) VALUES
  ('widget', 1000000000), ('gadget', 1000000000), ('gizmo', 1000000000), ('rare-coin', 1)
  ON CONFLICT (sku) DO NOTHING;

CREATE TABLE IF NOT EXISTS stock_reservations (
  order_id   text        NOT NULL,
  sku        text        NOT NULL REFERENCES stock (sku),
  quantity   bigint      NOT NULL CHECK (quantity > 0),
  status     text        NOT NULL CHECK (status IN ('RESERVED', 'RELEASED')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (order_id, sku)
);
`;

/** What the activities use: the worker's pool on the baseline's database, and the provider's client. */
export interface BaselineDeps {
  pool: pg.Pool;
  payments: PaymentProviderClient;
}

const UNIQUE_VIOLATION = '23505';

/** The cart's lines in SKU order (code units: the same on every host). */
const bySku = <T extends { sku: string }>(items: readonly T[]) => [...items].sort((a, b) => (a.sku < b.sku ? -1 : a.sku > b.sku ? 1 : 0));

/** The intent: the customer and what they order, whatever the order of the lines or the prices. */
function intentKeyOf(order: BaselineOrder): string {
  const cart = bySku(order.items).map(({ sku, quantity }) => [sku, quantity]);
  return createHash('sha256').update(JSON.stringify([order.customer, cart])).digest('hex');
}

const amountOf = (order: BaselineOrder) => order.items.reduce((sum, i) => sum + i.quantity * i.priceCents, 0);

/** The idempotency keys of an order's charge and refund at the provider: the same on every attempt. */
export const chargeKeyOf = (orderId: string) => `${orderId}:charge`;
const refundKeyOf = (orderId: string) => `${orderId}:refund`;

/** Runs `fn` in a transaction on a pooled connection: committed when it returns, rolled back when it throws. */
async function inTransaction<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const tx = await pool.connect();
  try {
    await tx.query('BEGIN');
    const result = await fn(tx);
    await tx.query('COMMIT');
    return result;
  } catch (err) {
    await tx.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    tx.release();
  }
}

/** Builds the baseline's activities. */
export function createBaselineActivities({ pool, payments }: BaselineDeps) {
  return {
    /**
     * Inserts the order PENDING. A retry of this activity finds its own row (same id) and carries on;
     * another order of the same live intent violates the unique index: DUPLICATE.
     */
    async createOrder(orderId: string, order: BaselineOrder): Promise<void> {
      try {
        await pool.query(
          `INSERT INTO orders (id, intent_key, status, customer, items, amount_cents, payment_key)
           VALUES ($1, $2, 'PENDING', $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
          [orderId, intentKeyOf(order), order.customer, JSON.stringify(order.items), amountOf(order), chargeKeyOf(orderId)],
        );
      } catch (err) {
        if ((err as { code?: string }).code === UNIQUE_VIOLATION) {
          throw ApplicationFailure.nonRetryable('a live order of this customer and cart exists', BaselineFailure.DUPLICATE);
        }
        throw err;
      }
    },

    /** Charges the order's total at the provider, under the order's charge key. */
    async chargePayment(orderId: string, order: BaselineOrder): Promise<{ chargeId: string }> {
      try {
        const charge = await payments.charge(
          { idempotencyKey: chargeKeyOf(orderId), amountCents: amountOf(order), card: order.payment.card, reference: orderId },
          Context.current().cancellationSignal,
        );
        return { chargeId: charge.id };
      } catch (err) {
        if (err instanceof PaymentDeclinedError) throw ApplicationFailure.nonRetryable('the card was declined', BaselineFailure.PAYMENT_DECLINED);
        throw err;
      }
    },

    /**
     * Refunds whatever the charge key charged: the provider voids a key it never charged, so this is
     * safe after a charge whose answer was lost, or that never reached it.
     */
    async refundPayment(orderId: string): Promise<string> {
      try {
        const refund = await payments.refund({ idempotencyKey: refundKeyOf(orderId), chargeIdempotencyKey: chargeKeyOf(orderId) }, Context.current().cancellationSignal);
        return refund.status;
      } catch (err) {
        if (err instanceof RefundRefusedError) throw ApplicationFailure.nonRetryable('the card network refused the refund', BaselineFailure.REFUND_REFUSED);
        throw err;
      }
    },

    /**
     * Takes the order's lines from the stock, in SKU order (so concurrent orders cannot deadlock), and
     * records each: a retry after a commit finds the records and takes nothing again.
     */
    async reserveStock(orderId: string, order: BaselineOrder): Promise<void> {
      await inTransaction(pool, async (tx) => {
        for (const item of bySku(order.items)) {
          const recorded = await tx.query(
            `INSERT INTO stock_reservations (order_id, sku, quantity, status) VALUES ($1, $2, $3, 'RESERVED') ON CONFLICT (order_id, sku) DO NOTHING`,
            [orderId, item.sku, item.quantity],
          );
          if (recorded.rowCount === 0) return; // an earlier attempt committed the whole reservation
          const taken = await tx.query('UPDATE stock SET available = available - $2 WHERE sku = $1 AND available >= $2', [item.sku, item.quantity]);
          if (taken.rowCount !== 1) throw ApplicationFailure.nonRetryable(`not enough stock of ${item.sku}`, BaselineFailure.OUT_OF_STOCK);
        }
      });
    },

    /** Gives back what the order reserved, once. Returns how many lines it released. */
    async releaseStock(orderId: string): Promise<number> {
      return inTransaction(pool, async (tx) => {
        const { rows } = await tx.query<{ sku: string; quantity: string }>(
          `UPDATE stock_reservations SET status = 'RELEASED', updated_at = now() WHERE order_id = $1 AND status = 'RESERVED' RETURNING sku, quantity`,
          [orderId],
        );
        for (const r of bySku(rows)) await tx.query('UPDATE stock SET available = available + $2 WHERE sku = $1', [r.sku, r.quantity]);
        return rows.length;
      });
    },

    /** Marks the order COMPLETED. */
    async completeOrder(orderId: string): Promise<void> {
      await pool.query(`UPDATE orders SET status = 'COMPLETED', updated_at = now() WHERE id = $1 AND status = 'PENDING'`, [orderId]);
    },

    /** Marks the order FAILED, which frees its intent. */
    async failOrder(orderId: string): Promise<void> {
      await pool.query(`UPDATE orders SET status = 'FAILED', updated_at = now() WHERE id = $1 AND status = 'PENDING'`, [orderId]);
    },
  };
}

/** The baseline's activities' type, for `proxyActivities`. */
export type BaselineActivities = ReturnType<typeof createBaselineActivities>;
