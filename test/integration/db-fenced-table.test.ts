/**
 * Fenced entity rows against the real PostgreSQL of the run. Every test works on intent keys of
 * its own (random suffix), so tests share the `orders` table without seeing each other.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencedTable, type FencedRow, type FencedStatus, type WriteFencedResult } from '../../src/db';
import { recordEndedSession } from '../../src/db/ended-sessions';

/** The generic layer over the example domain's table: `orders` and three of its data columns. */
const fencedOrders = new FencedTable({ table: 'orders', dataColumns: ['customer', 'items', 'amount_cents'] });
import { behindOpenTransaction, checkout, distinctTokens, maxToken, testPool, token, uniqueId, uniqueSchema } from '../helpers/db-fixtures';

let pool: pg.Pool;
beforeAll(() => {
  pool = testPool(4);
});
afterAll(async () => {
  await pool.end();
});

const data = (customer = 'Ada') => ({ customer, items: [{ sku: 'A-1', qty: 2 }], amount_cents: '1200' });

/** Brings a fresh intent's row to `status` under `owner` and returns it as stored. */
async function seed(intentKey: string, status: Exclude<FencedStatus, 'RELEASED'>, owner: string): Promise<FencedRow> {
  const fencingToken = owner;
  expect(await fencedOrders.writeFenced(pool, { intentKey, sessionId: `s-${owner}`, fencingToken, data: data('Owner') })).toMatchObject({
    status: 'WRITTEN',
  });
  const steps: Record<Exclude<FencedStatus, 'RELEASED'>, ((q: pg.Pool, i: { intentKey: string; fencingToken: string }) => Promise<unknown>)[]> = {
    PROCESSING: [],
    REGISTERED: [(q, i) => fencedOrders.markRegistered(q, i)],
    COMPLETED: [(q, i) => fencedOrders.markRegistered(q, i), (q, i) => fencedOrders.markCompleted(q, i)],
    FAILED: [(q, i) => fencedOrders.markFailed(q, i)],
    COMPENSATED: [(q, i) => fencedOrders.markCompensated(q, i)],
  };
  for (const step of steps[status]) expect(await step(pool, { intentKey, fencingToken })).toEqual({ status: 'OK' });
  const row = await fencedOrders.find(pool, intentKey);
  expect(row?.status).toBe(status);
  return row!;
}

async function rowCount(intentKey: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM orders WHERE intent_key = $1', [intentKey]);
  return Number(rows[0]!.n);
}

describe('writeFenced', () => {
  it('inserts a PROCESSING row for a new intent and reports it WRITTEN with its id', async () => {
    const intentKey = uniqueId('new');

    const result = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'session-1', fencingToken: token(1), data: data() });

    const row = await fencedOrders.find(pool, intentKey);
    expect(result).toEqual({ status: 'WRITTEN', id: row!.id });
    expect(row).toMatchObject({
      intentKey,
      status: 'PROCESSING',
      lastFencingToken: token(1),
      sessionId: 'session-1',
      data: data(),
    });
  });

  it('returns the same id and changes nothing when the same token writes again (an activity retry)', async () => {
    const intentKey = uniqueId('retry');
    const first = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'session-1', fencingToken: token(1), data: data('First') });
    const before = await fencedOrders.find(pool, intentKey);

    const again = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'session-1', fencingToken: token(1), data: data('Second') });

    expect(again).toEqual(first);
    expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
  });

  it.each(['REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED'] as const)(
    'reports WRITTEN with the same id and changes nothing when the same token writes again to its %s row',
    async (status) => {
      const intentKey = uniqueId('retry-status');
      const before = await seed(intentKey, status, token(5));

      const again = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'later', fencingToken: token(5), data: data('Other') });

      expect(again).toEqual({ status: 'WRITTEN', id: before.id });
      expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
    },
  );

  it.each(['PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED'] as const)(
    'reports FENCED_OUT and changes nothing when a lower token writes to a %s row',
    async (status) => {
      const intentKey = uniqueId('stale');
      const before = await seed(intentKey, status, token(10));

      const result = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'stale', fencingToken: token(9), data: data('Stale') });

      expect(result).toEqual({ status: 'FENCED_OUT' });
      expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
    },
  );

  it.each(['REGISTERED', 'COMPLETED'] as const)(
    'reports DUPLICATE with the id and changes nothing when a higher token meets a %s row',
    async (status) => {
      const intentKey = uniqueId('dup');
      const before = await seed(intentKey, status, token(10));

      const result = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'newer', fencingToken: token(11), data: data('Newer') });

      expect(result).toEqual({ status: 'DUPLICATE', id: before.id });
      expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
    },
  );

  it.each(['PROCESSING', 'FAILED', 'COMPENSATED'] as const)(
    'lets a higher token take over a %s row: same id, status PROCESSING, its token, session and data',
    async (status) => {
      const intentKey = uniqueId('takeover');
      const before = await seed(intentKey, status, token(10));

      const result = await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'newer', fencingToken: token(11), data: data('Newer') });

      expect(result).toEqual({ status: 'WRITTEN', id: before.id });
      const after = await fencedOrders.find(pool, intentKey);
      expect(after).toMatchObject({
        id: before.id,
        status: 'PROCESSING',
        lastFencingToken: token(11),
        sessionId: 'newer',
        data: data('Newer'),
        createdAt: before.createdAt,
      });
      expect(await rowCount(intentKey)).toBe(1);
    },
  );

  it('keeps one row carrying the highest of 50 concurrent tokens, each written in its own transaction on its own connection', async () => {
    const intentKey = uniqueId('race');
    const tokens = distinctTokens(50);
    const racePool = testPool(50);
    const clients = await checkout(racePool, 50);
    try {
      await Promise.all(clients.map((c) => c.query('BEGIN')));

      const results = await Promise.all(
        clients.map(async (client, i): Promise<WriteFencedResult> => {
          const result = await fencedOrders.writeFenced(client, { intentKey, sessionId: `session-${i}`, fencingToken: tokens[i]!, data: data(`C${i}`) });
          await client.query('COMMIT');
          return result;
        }),
      );

      const highest = maxToken(tokens);
      const winner = tokens.indexOf(highest);
      const row = await fencedOrders.find(pool, intentKey);
      expect(await rowCount(intentKey)).toBe(1);
      expect(row).toMatchObject({ lastFencingToken: highest, sessionId: `session-${winner}`, status: 'PROCESSING', data: data(`C${winner}`) });
      expect(results[winner]).toEqual({ status: 'WRITTEN', id: row!.id });
      results.forEach((result, i) => {
        if (result.status === 'FENCED_OUT') expect(BigInt(tokens[i]!)).toBeLessThan(BigInt(highest));
        else expect(result).toEqual({ status: 'WRITTEN', id: row!.id });
      });
    } finally {
      clients.forEach((c) => c.release());
      await racePool.end();
    }
  });

  it('classifies by the committed row it waited for, not by its own snapshot, when the row was inserted meanwhile', async () => {
    // B starts while A's insert is uncommitted; B's snapshot never contains A's row.
    const intentKey = uniqueId('wait-insert');

    const result = await behindOpenTransaction(
      pool,
      (a) => fencedOrders.writeFenced(a, { intentKey, sessionId: 'A', fencingToken: token(20), data: data('A') }),
      (b) => fencedOrders.writeFenced(b, { intentKey, sessionId: 'B', fencingToken: token(19), data: data('B') }),
      'COMMIT',
    );

    expect(result).toEqual({ status: 'FENCED_OUT' });
    expect(await fencedOrders.find(pool, intentKey)).toMatchObject({ lastFencingToken: token(20), sessionId: 'A' });
  });

  it('reports DUPLICATE when the PROCESSING row it would take over was registered by a transaction it waited for', async () => {
    // B's snapshot shows PROCESSING (takeover); the version it locks, after A commits, is REGISTERED.
    const intentKey = uniqueId('wait-register');
    const before = await seed(intentKey, 'PROCESSING', token(30));

    const result = await behindOpenTransaction(
      pool,
      (a) => fencedOrders.markRegistered(a, { intentKey, fencingToken: token(30) }),
      (b) => fencedOrders.writeFenced(b, { intentKey, sessionId: 'B', fencingToken: token(31), data: data('B') }),
      'COMMIT',
    );

    expect(result).toEqual({ status: 'DUPLICATE', id: before.id });
    expect(await fencedOrders.find(pool, intentKey)).toMatchObject({ status: 'REGISTERED', lastFencingToken: token(30), sessionId: before.sessionId });
  });

  it('inserts its own row when the transaction it waited for rolled back its insert', async () => {
    const intentKey = uniqueId('wait-rollback');

    const result = await behindOpenTransaction(
      pool,
      (a) => fencedOrders.writeFenced(a, { intentKey, sessionId: 'A', fencingToken: token(40), data: data('A') }),
      (b) => fencedOrders.writeFenced(b, { intentKey, sessionId: 'B', fencingToken: token(39), data: data('B') }),
      'ROLLBACK',
    );

    const row = await fencedOrders.find(pool, intentKey);
    expect(result).toEqual({ status: 'WRITTEN', id: row!.id });
    expect(row).toMatchObject({ lastFencingToken: token(39), sessionId: 'B' });
  });
});

describe('fenced transitions', () => {
  it('moves a row PROCESSING → REGISTERED → COMPLETED for the owning token', async () => {
    const intentKey = uniqueId('lifecycle');
    await seed(intentKey, 'PROCESSING', token(1));

    const registered = await fencedOrders.markRegistered(pool, { intentKey, fencingToken: token(1) });
    const completed = await fencedOrders.markCompleted(pool, { intentKey, fencingToken: 1_700_000_000_000_001n });

    expect([registered, completed]).toEqual([{ status: 'OK' }, { status: 'OK' }]);
    expect((await fencedOrders.find(pool, intentKey))?.status).toBe('COMPLETED');
  });

  it.each([
    ['markRegistered', 'REGISTERED'],
    ['markCompleted', 'COMPLETED'],
    ['markFailed', 'FAILED'],
    ['markCompensated', 'COMPENSATED'],
  ] as const)('answers OK and changes nothing when %s repeats on a %s row with the same token', async (method, status) => {
    const intentKey = uniqueId('repeat');
    const before = await seed(intentKey, status, token(2));

    const result = await fencedOrders[method](pool, { intentKey, fencingToken: token(2) });

    expect(result).toEqual({ status: 'OK' });
    expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
  });

  it.each(['markRegistered', 'markCompleted', 'markFailed', 'markCompensated'] as const)(
    'refuses %s from a stale token with FENCED_OUT and changes nothing',
    async (method) => {
      const intentKey = uniqueId('stale-transition');
      await seed(intentKey, 'PROCESSING', token(3));
      await fencedOrders.writeFenced(pool, { intentKey, sessionId: 'newer', fencingToken: token(4), data: data('Newer') });
      if (method === 'markCompleted') await fencedOrders.markRegistered(pool, { intentKey, fencingToken: token(4) });
      const before = await fencedOrders.find(pool, intentKey);

      const result = await fencedOrders[method](pool, { intentKey, fencingToken: token(3) });

      expect(result).toEqual({ status: 'FENCED_OUT' });
      expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
    },
  );

  it.each([
    ['markRegistered', 'COMPLETED'],
    ['markRegistered', 'FAILED'],
    ['markRegistered', 'COMPENSATED'],
    ['markCompleted', 'PROCESSING'],
    ['markCompleted', 'FAILED'],
    ['markCompleted', 'COMPENSATED'],
    ['markFailed', 'COMPLETED'],
    ['markFailed', 'COMPENSATED'],
    ['markCompensated', 'COMPLETED'],
    ['markCompensated', 'FAILED'],
  ] as const)('refuses %s on a %s row with ILLEGAL_TRANSITION naming that status, and changes nothing', async (method, from) => {
    const intentKey = uniqueId('illegal');
    const before = await seed(intentKey, from, token(5));

    const result = await fencedOrders[method](pool, { intentKey, fencingToken: token(5) });

    expect(result).toEqual({ status: 'ILLEGAL_TRANSITION', from });
    expect(await fencedOrders.find(pool, intentKey)).toEqual(before);
  });

  it('answers NOT_FOUND for an intent that has no row', async () => {
    const intentKey = uniqueId('missing');

    const result = await fencedOrders.markCompensated(pool, { intentKey, fencingToken: token(1) });

    expect(result).toEqual({ status: 'NOT_FOUND' });
    expect(await rowCount(intentKey)).toBe(0);
  });

  it('never lets a compensation touch a row that a newer token took over while it waited', async () => {
    // The compensation's snapshot shows its own PROCESSING row; the version it locks is the newer holder's.
    const intentKey = uniqueId('late-compensation');
    await seed(intentKey, 'PROCESSING', token(6));

    const result = await behindOpenTransaction(
      pool,
      (a) => fencedOrders.writeFenced(a, { intentKey, sessionId: 'newer', fencingToken: token(7), data: data('Newer') }),
      (b) => fencedOrders.markCompensated(b, { intentKey, fencingToken: token(6) }),
      'COMMIT',
    );

    expect(result).toEqual({ status: 'FENCED_OUT' });
    expect(await fencedOrders.find(pool, intentKey)).toMatchObject({ status: 'PROCESSING', lastFencingToken: token(7), sessionId: 'newer' });
  });
});

describe('findWithEnded', () => {
  it("answers find's row and the intent's ended sessions in one statement, and no row with none", async () => {
    const intentKey = uniqueId('with-ended');
    const row = await seed(intentKey, 'REGISTERED', token(3));
    await recordEndedSession(pool, { intentKey, sessionTag: 'tag-a' });
    await recordEndedSession(pool, { intentKey, sessionTag: 'tag-b' });
    const missing = uniqueId('with-ended-missing');

    const found = await fencedOrders.findWithEnded(pool, intentKey);
    const none = await fencedOrders.findWithEnded(pool, missing);

    expect(found.row).toEqual(row);
    expect([...found.ended].sort()).toEqual(['tag-a', 'tag-b']);
    expect(none).toEqual({ row: undefined, ended: [] });
  });
});

describe('hostile input', () => {
  const hostile = `Robert'); DROP TABLE orders; -- "quoted" \\ back\\slash ; ü ñ 漢字 🧪 e\u0301 \u202e rtl \u0001\u0007\b\t\n\r\u001f\u007f $1 %s`;

  it('stores and reads back hostile text, keys and a 1 MiB JSON document exactly', async () => {
    const intentKey = `${uniqueId('hostile')}:${hostile}`;
    const sessionId = `session ${hostile}`;
    const bigItems = Array.from({ length: 4096 }, (_, i) => ({ sku: `${hostile}-${i}`, [`k ${hostile} ${i}`]: [i, i / 3 - 1, true, null, { nested: hostile }] }));
    const document = { customer: hostile, items: bigItems, amount_cents: '9223372036854775807' };
    expect(JSON.stringify(bigItems).length).toBeGreaterThan(1024 * 1024);

    const result = await fencedOrders.writeFenced(pool, { intentKey, sessionId, fencingToken: '9223372036854775807', data: document });

    const row = await fencedOrders.find(pool, intentKey);
    expect(result).toEqual({ status: 'WRITTEN', id: row!.id });
    expect(row).toMatchObject({ intentKey, sessionId, lastFencingToken: '9223372036854775807' });
    expect(row!.data).toEqual(document);
  });

  it('stores a JSON string in a jsonb column as a string, not as parsed JSON', async () => {
    const intentKey = uniqueId('json-string');
    const document = { customer: 'c', items: '[1,2,"not parsed"]', amount_cents: 0n };

    await fencedOrders.writeFenced(pool, { intentKey, sessionId: 's', fencingToken: token(1), data: document });

    expect((await fencedOrders.find(pool, intentKey))!.data).toEqual({ customer: 'c', items: '[1,2,"not parsed"]', amount_cents: '0' });
  });
});

describe('FencedTable on another table', () => {
  const schema = uniqueSchema('fenced');
  beforeAll(async () => {
    await pool.query(`CREATE SCHEMA ${schema}`);
    await pool.query(`CREATE TABLE ${schema}.shipments (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      intent_key text NOT NULL UNIQUE,
      status text NOT NULL,
      last_fencing_token bigint NOT NULL,
      session_id text NOT NULL,
      carrier text NOT NULL,
      weight_grams integer,
      label jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  });

  it('writes, fences and reads a schema-qualified table with its own data columns', async () => {
    const shipments = new FencedTable({ table: `${schema}.shipments`, dataColumns: ['carrier', 'weight_grams', 'label'] });
    const intentKey = uniqueId('shipment');

    const written = await shipments.writeFenced(pool, { intentKey, sessionId: 's1', fencingToken: token(1), data: { carrier: 'DHL', weight_grams: null, label: { to: 'Ada' } } });
    const stale = await shipments.writeFenced(pool, { intentKey, sessionId: 's0', fencingToken: token(0), data: { carrier: 'UPS', weight_grams: 5, label: {} } });
    const registered = await shipments.markRegistered(pool, { intentKey, fencingToken: token(1) });

    expect(written.status).toBe('WRITTEN');
    expect(stale).toEqual({ status: 'FENCED_OUT' });
    expect(registered).toEqual({ status: 'OK' });
    expect(await shipments.find(pool, intentKey)).toMatchObject({
      status: 'REGISTERED',
      sessionId: 's1',
      data: { carrier: 'DHL', weight_grams: null, label: { to: 'Ada' } },
    });
  });
});
