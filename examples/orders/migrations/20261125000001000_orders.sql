-- Up Migration
-- The order app's tables. `orders` is its fenced table: the columns every fenced table needs
-- (id, intent_key UNIQUE, status, last_fencing_token, session_id, created_at, updated_at; see
-- fencedTableSql in reservation-saga/worker), last_operation_token for the operations that claim a
-- row (order-cancel, order-amend), then its own data columns. payment_key names the order's live
-- charge at the payment provider (its idempotency key); cancelled_at and cancelled_by are set by a
-- cancellation (its compensation reinstates only its own).
CREATE TABLE IF NOT EXISTS orders (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  intent_key           text        NOT NULL UNIQUE,
  status               text        NOT NULL
                       CHECK (status IN ('PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED')),
  last_fencing_token   bigint      NOT NULL CHECK (last_fencing_token > 0),
  session_id           text        NOT NULL,
  last_operation_token bigint      CHECK (last_operation_token > 0),
  customer             text        NOT NULL,
  items                jsonb       NOT NULL,
  amount_cents         bigint      NOT NULL CHECK (amount_cents >= 0),
  payment_key          text,
  cancelled_at         timestamptz,
  cancelled_by         text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Stock: reserveStock/releaseStock move it, keyed by the saga, so a step runs at most once.
CREATE TABLE IF NOT EXISTS stock (
  sku        text   PRIMARY KEY,
  available  bigint NOT NULL CHECK (available >= 0)
);
-- Example data: plenty of everything but one rare item, so a short-stock order is easy to make.
INSERT INTO stock (sku, available) VALUES
  ('widget', 1000000000), ('gadget', 1000000000), ('gizmo', 1000000000), ('rare-coin', 1)
  ON CONFLICT (sku) DO NOTHING;

-- A ledger of local payments (tests and the PostgreSQL-only benchmark write it; the saga's own
-- payment steps go to the payment provider).
CREATE TABLE IF NOT EXISTS payments (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  saga_key     text        NOT NULL UNIQUE,
  intent_key   text        NOT NULL,
  customer     text        NOT NULL,
  amount_cents bigint      NOT NULL CHECK (amount_cents >= 0),
  card_last4   text        NOT NULL,
  status       text        NOT NULL CHECK (status IN ('CHARGED', 'REFUNDED')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS stock_reservations (
  saga_key   text        NOT NULL,
  sku        text        NOT NULL REFERENCES stock (sku),
  quantity   bigint      NOT NULL CHECK (quantity > 0),
  status     text        NOT NULL CHECK (status IN ('RESERVED', 'RELEASED')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (saga_key, sku)
);

-- One row per order-amend saga that applied its amendment: what the order was before and became, so
-- that its compensation restores exactly that (and the stock it moved).
CREATE TABLE IF NOT EXISTS order_amendments (
  saga_key   text        PRIMARY KEY,
  order_id   bigint      NOT NULL REFERENCES orders (id),
  before     jsonb       NOT NULL,
  after      jsonb       NOT NULL,
  status     text        NOT NULL CHECK (status IN ('APPLIED', 'REVERTED')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS order_amendments_order_id ON order_amendments (order_id);
