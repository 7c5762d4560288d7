/** The example payment provider's tables, in schema `payment_provider` of the configured database. */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';

/** The advisory lock (one bigint) that serialises {@link ensureProviderSchema} across processes. */
const SCHEMA_LOCK_ID = 7_301_145_002_611_293n;

/**
 * Creates schema `payment_provider` and its tables, idempotently:
 * - `charges`: one row per processed charge (succeeded or declined), with the card's last 4 digits
 *   only, never the number;
 * - `idempotency_keys`: one row per key: the stored answer (status, body, a keyed hash of the
 *   request) of a charge or refund, or a charge key voided by a refund that found no charge;
 * - `settings`: the random key of those request hashes, made once.
 *
 * Safe to call from several processes at once: `CREATE … IF NOT EXISTS` alone can still fail with a
 * unique violation when two sessions create the same object concurrently, so the statements run in
 * one transaction under a transaction-level advisory lock.
 */
export async function ensureProviderSchema(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_ID.toString()]);
    await client.query(`
      CREATE SCHEMA IF NOT EXISTS payment_provider;
      CREATE TABLE IF NOT EXISTS payment_provider.charges (
        id text PRIMARY KEY,
        idempotency_key text NOT NULL UNIQUE,
        status text NOT NULL CHECK (status IN ('succeeded', 'declined')),
        amount_cents bigint NOT NULL CHECK (amount_cents > 0),
        reference text,
        card_last4 text NOT NULL CHECK (card_last4 ~ '^[0-9]{4}$'),
        refunds_refused boolean NOT NULL DEFAULT false,
        refunded_at timestamptz,
        refund_idempotency_key text,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
      );
      CREATE INDEX IF NOT EXISTS charges_reference_idx ON payment_provider.charges (reference, created_at);
      CREATE TABLE IF NOT EXISTS payment_provider.idempotency_keys (
        key text PRIMARY KEY,
        operation text NOT NULL CHECK (operation IN ('charge', 'refund')),
        state text NOT NULL CHECK (state IN ('answered', 'voided')),
        request_hash text,
        response_status integer,
        response_body text,
        voided_by text,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CHECK (state = 'voided' OR (request_hash IS NOT NULL AND response_status IS NOT NULL AND response_body IS NOT NULL))
      );
      CREATE TABLE IF NOT EXISTS payment_provider.settings (
        name text PRIMARY KEY,
        value text NOT NULL
      );
    `);
    await client.query(`INSERT INTO payment_provider.settings (name, value) VALUES ('request_hash_key', $1) ON CONFLICT (name) DO NOTHING`, [
      randomBytes(32).toString('base64'),
    ]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
