-- Up Migration
-- order-return releases an order (its row RELEASED, kept; its cart free to be ordered again as a
-- new order): `orders` holds released rows, one live row per intent. The statements are what
-- reservation-saga's fencedTableReleaseSql('orders') writes; running them twice changes nothing.
CREATE UNIQUE INDEX IF NOT EXISTS "orders_live_intent_key" ON "orders" (intent_key) WHERE status <> 'RELEASED';
CREATE INDEX IF NOT EXISTS "orders_intent_key_token" ON "orders" (intent_key, last_fencing_token);
DO $release$
DECLARE c record;
BEGIN
  FOR c IN SELECT conname FROM pg_constraint
            WHERE conrelid = '"orders"'::regclass
              AND ((contype = 'u' AND conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = '"orders"'::regclass AND attname = 'intent_key')])
                OR (contype = 'c' AND conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = '"orders"'::regclass AND attname = 'status')] AND pg_get_constraintdef(oid) NOT LIKE '%RELEASED%'))
  LOOP
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '"orders"', c.conname);
  END LOOP;
  IF NOT EXISTS (SELECT FROM pg_constraint WHERE conrelid = '"orders"'::regclass AND contype = 'c' AND conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = '"orders"'::regclass AND attname = 'status')]) THEN
    ALTER TABLE "orders" ADD CHECK (status IN ('PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED', 'RELEASED'));
  END IF;
END
$release$;
