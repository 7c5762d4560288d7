/**
 * Released rows against the real PostgreSQL of the run: an entity an operation released stays as a
 * RELEASED row, its intent free for a new row with a higher token, and never for a stale one. Each
 * test works in a table of a schema of its own, created by `fencedTableSql` as an app creates one;
 * the last tests migrate a table of the earlier shape (`intent_key UNIQUE`).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkFencedTable, fencedTableReleaseSql, fencedTableSql, FencedTable, FencedTableSchemaError, type FencedStatus } from '../../src/db';
import { behindOpenTransaction, checkout, distinctTokens, maxToken, testPool, token, uniqueId, uniqueSchema } from '../helpers/db-fixtures';

let pool: pg.Pool;
const schema = uniqueSchema('released');
const rentals = new FencedTable({ table: `${schema}.rentals`, dataColumns: ['copy'] });

beforeAll(async () => {
  pool = testPool(8);
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(fencedTableSql(`${schema}.rentals`, 'copy text NOT NULL', { operations: true }));
});
afterAll(async () => {
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await pool.end();
});

/** A COMPLETED rental of `intentKey` written by token `t`: what a creating saga leaves. */
async function completed(table: FencedTable, intentKey: string, t: string): Promise<string> {
  const written = await table.writeFenced(pool, { intentKey, sessionId: `s-${t}`, fencingToken: t, data: { copy: `copy-${t}` }, createdBy: 'app' });
  if (written.status !== 'WRITTEN') throw new Error(`seed: ${written.status}`);
  expect(await table.markRegistered(pool, { intentKey, fencingToken: t })).toEqual({ status: 'OK' });
  expect(await table.markCompleted(pool, { intentKey, fencingToken: t })).toEqual({ status: 'OK' });
  return written.id;
}

async function rowsOf(table: string, intentKey: string): Promise<{ id: string; status: FencedStatus; token: string }[]> {
  const { rows } = await pool.query<{ id: string; status: FencedStatus; token: string }>(
    `SELECT id, status, last_fencing_token::text AS token FROM ${table} WHERE intent_key = $1 ORDER BY id`,
    [intentKey],
  );
  return rows;
}

describe('release', () => {
  it('turns a COMPLETED row RELEASED for the operation token that claims it, and a repeat is RELEASED again', async () => {
    const intentKey = uniqueId('release');
    const id = await completed(rentals, intentKey, token(10));

    const first = await rentals.release(pool, { id, fencingToken: token(500) });
    const repeat = await rentals.release(pool, { id, fencingToken: token(500) });

    const expected = { status: 'RELEASED', intentKey, sessionId: `s-${token(10)}`, lastFencingToken: token(10) };
    expect(first).toEqual(expected);
    expect(repeat).toEqual(expected);
    expect(await rentals.findById(pool, id)).toMatchObject({ status: 'RELEASED', lastOperationToken: token(500) });
  });

  it('leaves the row alone for an operation older than its last claim (FENCED_OUT), a row not COMPLETED, and a missing id', async () => {
    const intentKey = uniqueId('release-refused');
    const id = await completed(rentals, intentKey, token(10));
    expect(await rentals.claim(pool, { id, fencingToken: token(600) })).toEqual({ status: 'CLAIMED' });

    expect(await rentals.release(pool, { id, fencingToken: token(599) })).toEqual({ status: 'FENCED_OUT' });
    expect((await rentals.findById(pool, id))?.status).toBe('COMPLETED');

    const processing = uniqueId('release-processing');
    const written = await rentals.writeFenced(pool, { intentKey: processing, sessionId: 's', fencingToken: token(1), data: { copy: 'c' }, createdBy: 'app' });
    expect(await rentals.release(pool, { id: (written as { id: string }).id, fencingToken: token(700) })).toEqual({ status: 'NOT_COMPLETED', from: 'PROCESSING' });
    expect(await rentals.release(pool, { id: '9223372036854775807', fencingToken: token(700) })).toEqual({ status: 'NOT_FOUND' });
  });
});

describe('an intent whose entity was released', () => {
  it('takes a new row for a higher token, keeps the released one as it was, and find shows the new one', async () => {
    const intentKey = uniqueId('again');
    const oldId = await completed(rentals, intentKey, token(10));
    await rentals.release(pool, { id: oldId, fencingToken: token(500) });
    const released = await rentals.findById(pool, oldId);

    const written = await rentals.writeFenced(pool, { intentKey, sessionId: 's-new', fencingToken: token(20), data: { copy: 'again' }, createdBy: 'app' });

    expect(written).toMatchObject({ status: 'WRITTEN' });
    expect((written as { id: string }).id).not.toBe(oldId);
    expect(await rentals.findById(pool, oldId)).toEqual(released);
    expect(await rentals.find(pool, intentKey)).toMatchObject({ id: (written as { id: string }).id, status: 'PROCESSING', lastFencingToken: token(20) });
    expect(await rowsOf(`${schema}.rentals`, intentKey)).toEqual([
      { id: oldId, status: 'RELEASED', token: token(10) },
      { id: (written as { id: string }).id, status: 'PROCESSING', token: token(20) },
    ]);
  });

  it('is found as its released row while no new one exists: the highest token the intent has had', async () => {
    const intentKey = uniqueId('found');
    const id = await completed(rentals, intentKey, token(10));
    await rentals.release(pool, { id, fencingToken: token(500) });

    expect(await rentals.find(pool, intentKey)).toMatchObject({ id, status: 'RELEASED', lastFencingToken: token(10) });
  });

  it('refuses a stale holder: a token at or below the released row\'s writes nothing (FENCED_OUT)', async () => {
    const intentKey = uniqueId('stale');
    const id = await completed(rentals, intentKey, token(10));
    await rentals.release(pool, { id, fencingToken: token(500) });

    const older = await rentals.writeFenced(pool, { intentKey, sessionId: 's-old', fencingToken: token(9), data: { copy: 'stale' }, createdBy: 'app' });
    const same = await rentals.writeFenced(pool, { intentKey, sessionId: `s-${token(10)}`, fencingToken: token(10), data: { copy: 'retry' }, createdBy: 'app' });

    expect(older).toEqual({ status: 'FENCED_OUT' });
    expect(same).toEqual({ status: 'FENCED_OUT' });
    expect(await rowsOf(`${schema}.rentals`, intentKey)).toEqual([{ id, status: 'RELEASED', token: token(10) }]);
  });

  it('refuses a stale holder that writes while the release commits: its snapshot still shows the entity', async () => {
    // B's snapshot shows the COMPLETED row. Were B to wait on that row's lock, it would find it gone
    // from the live index once the release commits, and insert a live row below the released one:
    // the token check on B's snapshot refuses it first, without waiting.
    const intentKey = uniqueId('stale-concurrent');
    const id = await completed(rentals, intentKey, token(10));

    const result = await behindOpenTransaction(
      pool,
      (a) => rentals.release(a, { id, fencingToken: token(500) }),
      (b) => rentals.writeFenced(b, { intentKey, sessionId: 's-old', fencingToken: token(9), data: { copy: 'stale' }, createdBy: 'app' }),
      'COMMIT',
      { mayNotWait: true },
    );

    expect(result).toEqual({ status: 'FENCED_OUT' });
    expect(await rowsOf(`${schema}.rentals`, intentKey)).toEqual([{ id, status: 'RELEASED', token: token(10) }]);
  });

  it('lets a newer holder whose write waited for the release in: it inserts the new entity', async () => {
    const intentKey = uniqueId('newer-concurrent');
    const id = await completed(rentals, intentKey, token(10));

    const result = await behindOpenTransaction(
      pool,
      (a) => rentals.release(a, { id, fencingToken: token(500) }),
      (b) => rentals.writeFenced(b, { intentKey, sessionId: 's-new', fencingToken: token(11), data: { copy: 'new' }, createdBy: 'app' }),
      'COMMIT',
    );

    expect(result).toMatchObject({ status: 'WRITTEN' });
    expect((await rowsOf(`${schema}.rentals`, intentKey)).map((r) => [r.status, r.token])).toEqual([
      ['RELEASED', token(10)],
      ['PROCESSING', token(11)],
    ]);
  });

  it('keeps one live row, of the highest token, when 24 holders write it at once after the release', async () => {
    const intentKey = uniqueId('race');
    const id = await completed(rentals, intentKey, token(10));
    await rentals.release(pool, { id, fencingToken: token(500) });
    const tokens = distinctTokens(24).map((t) => (BigInt(t) + 100n).toString());
    const racePool = testPool(24);
    const clients = await checkout(racePool, 24);
    try {
      const results = await Promise.all(
        clients.map(async (c, i) => {
          await c.query('BEGIN');
          const r = await rentals.writeFenced(c, { intentKey, sessionId: `s-${i}`, fencingToken: tokens[i]!, data: { copy: `c${i}` }, createdBy: 'app' });
          await c.query('COMMIT');
          return r;
        }),
      );
      const live = (await rowsOf(`${schema}.rentals`, intentKey)).filter((r) => r.status !== 'RELEASED');
      expect(live).toEqual([expect.objectContaining({ status: 'PROCESSING', token: maxToken(tokens) })]);
      expect(results.filter((r) => r.status === 'WRITTEN' && r.id === live[0]!.id).length).toBeGreaterThanOrEqual(1);
      expect(results.every((r) => r.status !== 'DUPLICATE')).toBe(true);
    } finally {
      clients.forEach((c) => c.release());
      await racePool.end();
    }
  });

  it("leaves the released row to no transition of its creating saga's token", async () => {
    const intentKey = uniqueId('late-transition');
    const id = await completed(rentals, intentKey, token(10));
    await rentals.release(pool, { id, fencingToken: token(500) });

    expect(await rentals.markCompensated(pool, { intentKey, fencingToken: token(10) })).toEqual({ status: 'NOT_FOUND' });
    expect((await rentals.findById(pool, id))?.status).toBe('RELEASED');
  });
});

describe('a table of the earlier shape (intent_key UNIQUE)', () => {
  const legacy = `${schema}.loans`;
  const loans = new FencedTable({ table: legacy, dataColumns: ['copy'] });
  beforeAll(async () => {
    // What fencedTableSql wrote before releases, and what the order example's migration still writes.
    await pool.query(`CREATE TABLE ${legacy} (
      id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      intent_key           text        NOT NULL UNIQUE,
      status               text        NOT NULL CHECK (status IN ('PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED')),
      last_fencing_token   bigint      NOT NULL CHECK (last_fencing_token > 0),
      session_id           text        NOT NULL,
      last_operation_token bigint      CHECK (last_operation_token > 0),
      created_by           text        NOT NULL DEFAULT '',
      copy                 text        NOT NULL,
      created_at           timestamptz NOT NULL DEFAULT now(),
      updated_at           timestamptz NOT NULL DEFAULT now()
    )`);
  });

  it('writes and fences as before, and its check names what a releasing operation needs', async () => {
    const intentKey = uniqueId('legacy');
    const id = await completed(loans, intentKey, token(10));
    expect(await loans.writeFenced(pool, { intentKey, sessionId: 's', fencingToken: token(11), data: { copy: 'x' }, createdBy: 'app' })).toEqual({ status: 'DUPLICATE', id });
    await expect(checkFencedTable(pool, loans, { operations: true })).resolves.toBeUndefined();

    const refused = await checkFencedTable(pool, loans, { operations: true, releases: true, sagaType: 'loan-return' }).catch((e: unknown) => e);

    expect(refused).toBeInstanceOf(FencedTableSchemaError);
    expect((refused as Error).message).toBe(
      `saga type "loan-return": table "${legacy}" cannot hold released rows: its intent_key is UNIQUE over every row; it has no unique index on intent_key WHERE status <> 'RELEASED'; its status CHECK has no 'RELEASED' (migrate it with fencedTableReleaseSql, see docs)`,
    );
  });

  it('is migrated by fencedTableReleaseSql, keeping its rows, and then releases and takes a new entity', async () => {
    const intentKey = uniqueId('migrated');
    const id = await completed(loans, intentKey, token(10));

    await pool.query(fencedTableReleaseSql(legacy));
    await pool.query(fencedTableReleaseSql(legacy)); // a second run changes nothing

    await expect(checkFencedTable(pool, loans, { operations: true, releases: true })).resolves.toBeUndefined();
    expect(await loans.release(pool, { id, fencingToken: token(500) })).toMatchObject({ status: 'RELEASED' });
    expect(await loans.writeFenced(pool, { intentKey, sessionId: 's', fencingToken: token(11), data: { copy: 'y' }, createdBy: 'app' })).toMatchObject({ status: 'WRITTEN' });
    const second = await loans.writeFenced(pool, { intentKey: `${intentKey}-other`, sessionId: 's', fencingToken: token(1), data: { copy: 'z' }, createdBy: 'app' });
    expect(second).toMatchObject({ status: 'WRITTEN' });
    // Still one live row per intent.
    await expect(pool.query(`INSERT INTO ${legacy} (intent_key, status, last_fencing_token, session_id, copy) VALUES ($1, 'PROCESSING', 5, 's', 'dup')`, [intentKey])).rejects.toThrow(/duplicate key/);
  });
});
