-- Up Migration
-- Who each order was created for (SagaClient's owner; `http:<client id>` for an order placed through
-- `saga serve`): order-cancel and order-amend find only their own owner's orders, and another
-- owner's order is answered as a missing one. Orders placed before this column have none ('') and
-- stay open to every owner's operations, as they were.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS created_by text NOT NULL DEFAULT '';
