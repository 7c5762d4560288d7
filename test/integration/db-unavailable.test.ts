/**
 * PostgreSQL out of reach: every entry point of the db layer says so with DbUnavailableError
 * (cause kept), distinct from statement outcomes.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, DbUnavailableError, FencedTable, purgeIdempotencyRecords, withIdempotency } from '../../src/db';

/** The generic layer over the example domain's table: `orders` and three of its data columns. */
const fencedOrders = new FencedTable({ table: 'orders', dataColumns: ['customer', 'items', 'amount_cents'] });
import { testPool, token, uniqueId } from '../helpers/db-fixtures';

describe('PostgreSQL unreachable', () => {
  // Nothing listens on port 1; the small connect timeout bounds the wait if something filters it.
  let pool: pg.Pool;
  beforeAll(() => {
    pool = createPool({ url: 'postgres://postgres@127.0.0.1:1/none', poolMax: 2, statementTimeoutMs: 1000, connectTimeoutMs: 1000, idleInTransactionTimeoutMs: 1000 });
  });
  afterAll(async () => {
    await pool.end();
  });

  const calls: [string, (p: pg.Pool) => Promise<unknown>][] = [
    ['writeFenced', (p) => fencedOrders.writeFenced(p, { intentKey: 'k', sessionId: 's', fencingToken: token(1), data: { customer: 'c', items: [], amount_cents: '1' } })],
    ['markRegistered', (p) => fencedOrders.markRegistered(p, { intentKey: 'k', fencingToken: token(1) })],
    ['find', (p) => fencedOrders.find(p, 'k')],
    ['findWithEnded', (p) => fencedOrders.findWithEnded(p, 'k')],
    ['withIdempotency', (p) => withIdempotency(p, { scope: 's', key: 'k', payload: {} }, async () => 'never')],
    ['purgeIdempotencyRecords', (p) => purgeIdempotencyRecords(p, { olderThanMs: 0 })],
  ];

  it.each(calls)('makes %s fail with DbUnavailableError that keeps the connection error as its cause', async (_name, call) => {
    const failure = call(pool);

    await expect(failure).rejects.toBeInstanceOf(DbUnavailableError);
    await expect(failure).rejects.toMatchObject({ cause: expect.objectContaining({ code: 'ECONNREFUSED' }) as unknown });
  });
});

describe('connection lost mid-transaction', () => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = testPool(3);
  });
  afterAll(async () => {
    await pool.end();
  });

  it('reports DbUnavailableError, not a statement error, when the server ends the session under a transaction', async () => {
    const client = await pool.connect();
    client.on('error', () => {}); // the driver also emits the termination as an event
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await terminate(pool, rows[0]!.pid);

      const failure = fencedOrders.writeFenced(client, {
        intentKey: uniqueId('terminated'),
        sessionId: 's',
        fencingToken: token(1),
        data: { customer: 'c', items: [], amount_cents: '1' },
      });

      await expect(failure).rejects.toBeInstanceOf(DbUnavailableError);
    } finally {
      client.release(true);
    }
  });

  it('reports DbUnavailableError from withIdempotency when its session is ended while fn runs, and records nothing', async () => {
    const scope = uniqueId('terminated');

    const failure = withIdempotency(pool, { scope, key: 'k', payload: {} }, async (tx) => {
      tx.on('error', () => {});
      const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await terminate(pool, rows[0]!.pid);
      return 'effect';
    });

    await expect(failure).rejects.toBeInstanceOf(DbUnavailableError);
    const { rowCount } = await pool.query('SELECT 1 FROM idempotency_store WHERE scope = $1', [scope]);
    expect(rowCount).toBe(0);
  });
});

/** Ends a session from another one and waits until it is gone (PostgreSQL 14+: the timeout argument). */
async function terminate(pool: pg.Pool, pid: number): Promise<void> {
  const { rows } = await pool.query<{ ended: boolean }>('SELECT pg_terminate_backend($1, 10000) AS ended', [pid]);
  expect(rows[0]!.ended).toBe(true);
}
