/**
 * The PostgreSQL-only design the RMS is compared with: no reservation service, the entity write
 * itself is the check. A second request for an intent learns "duplicate" from the UNIQUE intent_key
 * of `orders` (error 23505) inside the multi-table write transaction.
 */
import type pg from 'pg';

/**
 * The entity write, in one transaction: the order row (UNIQUE intent_key, status REGISTERED), the
 * payment and a stock reservation. Rejects with the driver's error, 23505 for a duplicate intent.
 */
export async function writeOrder(pool: pg.Pool, intent: string, sagaKey: string): Promise<void> {
  const client = await pool.connect();
  let open = false;
  try {
    await client.query('BEGIN');
    open = true;
    await client.query(
      `INSERT INTO orders (intent_key, status, last_fencing_token, session_id, customer, items, amount_cents)
       VALUES ($1, 'REGISTERED', 1, $2, $3, $4, 1000)`,
      [intent, sagaKey, `customer-${sagaKey}`, JSON.stringify([{ sku: 'widget', quantity: 1, priceCents: 1000 }])],
    );
    await client.query(
      `INSERT INTO payments (saga_key, intent_key, customer, amount_cents, card_last4, status) VALUES ($1, $2, $3, 1000, '4242', 'CHARGED')`,
      [sagaKey, intent, `customer-${sagaKey}`],
    );
    await client.query(`INSERT INTO stock_reservations (saga_key, sku, quantity, status) VALUES ($1, 'widget', 1, 'RESERVED')`, [sagaKey]);
    await client.query('COMMIT');
    open = false;
  } finally {
    if (open) await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}

const isUniqueViolation = (err: unknown) => (err as { code?: unknown }).code === '23505';

/**
 * One request of the PostgreSQL-only design: `'created'` when this call wrote the entity,
 * `'duplicate'` when PostgreSQL answered 23505 (the transaction rolled back). Other errors propagate.
 */
export async function submitPgOnly(pool: pg.Pool, intent: string, sagaKey: string): Promise<'created' | 'duplicate'> {
  try {
    await writeOrder(pool, intent, sagaKey);
    return 'created';
  } catch (err) {
    if (isUniqueViolation(err)) return 'duplicate';
    throw err;
  }
}
