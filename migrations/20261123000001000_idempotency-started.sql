-- Up Migration
-- External steps (effects in another service) record STARTED, committed before they call the service,
-- then COMPLETED with the response or FAILED with the refusal (src/db/idempotency.ts). A FAILED record
-- carries its refusal as the response.
ALTER TABLE idempotency_store DROP CONSTRAINT idempotency_store_status_check;
ALTER TABLE idempotency_store ADD CONSTRAINT idempotency_store_status_check
  CHECK (status IN ('PENDING', 'STARTED', 'COMPLETED', 'FAILED', 'TOMBSTONE'));
