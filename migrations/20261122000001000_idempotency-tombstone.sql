-- Up Migration
-- A step's compensation takes the step's own idempotency key as a TOMBSTONE (waiting for an attempt
-- in flight), so that no late attempt of the step can ever commit after its compensation ran.
ALTER TABLE idempotency_store DROP CONSTRAINT idempotency_store_status_check;
ALTER TABLE idempotency_store ADD CONSTRAINT idempotency_store_status_check
  CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'TOMBSTONE'));
