-- Up Migration
-- Fenced entity rows of the example domain. The UNIQUE intent_key is the last failsafe against
-- duplicates (and the conflict target of FencedTable.writeFenced); last_fencing_token lets a newer
-- reservation holder take over a row whose holder lost its lease, and stops a stale holder from
-- overwriting a newer one. src/db/fenced-table.ts lists the columns any fenced table needs.
CREATE TABLE orders (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  intent_key         text        NOT NULL UNIQUE,
  status             text        NOT NULL
                     CHECK (status IN ('PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED')),
  last_fencing_token bigint      NOT NULL CHECK (last_fencing_token > 0),
  session_id         text        NOT NULL,
  customer           text        NOT NULL,
  items              jsonb       NOT NULL,
  amount_cents       bigint      NOT NULL CHECK (amount_cents >= 0),
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Step idempotency: the record of a step commits in the same transaction as the step's effect
-- (src/db/idempotency.ts). PENDING exists only inside the claiming transaction; a committed
-- COMPLETED record always carries its response (JSON null included).
CREATE TABLE idempotency_store (
  scope        text        NOT NULL,
  key          text        NOT NULL,
  request_hash text        NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
  status       text        NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED')),
  response     jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key),
  CHECK (status <> 'COMPLETED' OR response IS NOT NULL)
);
CREATE INDEX idempotency_store_updated_at ON idempotency_store (updated_at);
