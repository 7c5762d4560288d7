-- Up Migration
-- The library's own table: the step idempotency store. A step's record commits in the same
-- transaction as its effect (src/db/idempotency.ts); an external step's record goes STARTED
-- (committed before it calls the other service) → COMPLETED with the response, or FAILED with the
-- refusal; a compensation takes the step's key as a TOMBSTONE so no late attempt of the step can
-- commit after it. PENDING exists only inside the claiming transaction; a committed COMPLETED record
-- always carries its response (JSON null included).
--
-- IF NOT EXISTS: a database made before the library kept its migrations apart from the app's
-- (table schema_migrations) already has this table, in this shape.
CREATE TABLE IF NOT EXISTS idempotency_store (
  scope        text        NOT NULL,
  key          text        NOT NULL,
  request_hash text        NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
  status       text        NOT NULL,
  response     jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key),
  CHECK (status <> 'COMPLETED' OR response IS NOT NULL)
);
ALTER TABLE idempotency_store DROP CONSTRAINT IF EXISTS idempotency_store_status_check;
ALTER TABLE idempotency_store ADD CONSTRAINT idempotency_store_status_check
  CHECK (status IN ('PENDING', 'STARTED', 'COMPLETED', 'FAILED', 'TOMBSTONE'));
CREATE INDEX IF NOT EXISTS idempotency_store_updated_at ON idempotency_store (updated_at);
