-- Up Migration
-- Operations on an existing order (order-cancel, order-amend: src/sagas/order-operations.ts) hold the
-- order's lock in the RMS, and its token fences their updates of the row: last_operation_token, apart
-- from last_fencing_token (which fences the creating saga's own writes, and the gate's truth check).
-- payment_key names the order's live charge at the payment provider (its idempotency key);
-- cancelled_at is set by a cancellation. Rows written before this migration have no payment_key.
ALTER TABLE orders
  ADD COLUMN last_operation_token bigint CHECK (last_operation_token > 0),
  ADD COLUMN payment_key text,
  ADD COLUMN cancelled_at timestamptz;

-- Which order-cancel saga cancelled the order: its compensation reinstates only its own cancellation.
ALTER TABLE orders ADD COLUMN cancelled_by text;

-- One row per order-amend saga that applied its amendment: what the order was before and became, so
-- that its compensation restores exactly that (and the stock it moved).
CREATE TABLE order_amendments (
  saga_key   text        PRIMARY KEY,
  order_id   bigint      NOT NULL REFERENCES orders (id),
  before     jsonb       NOT NULL,
  after      jsonb       NOT NULL,
  status     text        NOT NULL CHECK (status IN ('APPLIED', 'REVERTED')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX order_amendments_order_id ON order_amendments (order_id);
