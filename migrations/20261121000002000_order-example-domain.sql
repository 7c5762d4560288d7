-- Up Migration
-- The example domain's remaining steps: payments (chargePayment/refundPayment) and stock
-- (reserveStock/releaseStock). Each effect is keyed by the saga, so a step runs at most once.
CREATE TABLE stock (
  sku        text   PRIMARY KEY,
  available  bigint NOT NULL CHECK (available >= 0)
);
-- Example data: plenty of everything but one rare item, so a short-stock order is easy to make.
INSERT INTO stock (sku, available) VALUES
  ('widget', 1000000000), ('gadget', 1000000000), ('gizmo', 1000000000), ('rare-coin', 1);

CREATE TABLE payments (
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

CREATE TABLE stock_reservations (
  saga_key   text        NOT NULL,
  sku        text        NOT NULL REFERENCES stock (sku),
  quantity   bigint      NOT NULL CHECK (quantity > 0),
  status     text        NOT NULL CHECK (status IN ('RESERVED', 'RELEASED')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (saga_key, sku)
);
