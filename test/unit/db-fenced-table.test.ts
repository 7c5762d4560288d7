/**
 * FencedTable without a database: names are validated at construction, input before any SQL, and
 * values only ever travel as parameters. A fake Queryable records what would have been sent.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { FencedTable, InvalidArgumentError, type Queryable } from '../../src/db';

/** The generic layer over the example domain's table: `orders` and three of its data columns. */
const fencedOrders = new FencedTable({ table: 'orders', dataColumns: ['customer', 'items', 'amount_cents'] });
import { buildStatements, isRowId, normaliseToken } from '../../src/db/fenced-table';

interface Sent {
  text: string;
  values: unknown[];
}

/** A Queryable that records statements and answers with `rows`. */
function fakeQueryable(rows: unknown[] = []): { q: Queryable; sent: Sent[] } {
  const sent: Sent[] = [];
  const q = {
    query: (text: string | { text: string; values: unknown[] }, values?: unknown[]) => {
      sent.push(typeof text === 'string' ? { text, values: values ?? [] } : { text: text.text, values: text.values });
      return Promise.resolve({ rows, rowCount: rows.length });
    },
  } as unknown as pg.Pool;
  return { q, sent };
}

const validInput = () => ({
  intentKey: 'orders:abc',
  sessionId: 'session-1',
  fencingToken: '1700000000000001',
  data: { customer: 'Ada', items: [], amount_cents: '0' },
});

describe('FencedTable construction', () => {
  it.each([
    'orders; DROP TABLE orders',
    'orders"',
    '"orders"',
    'Orders',
    'ord ers',
    '1orders',
    '',
    'a.b.c',
    'public.',
    '.orders',
    'orders--',
    'ordérs',
    'a'.repeat(64),
  ])('rejects the table name %j', (table) => {
    expect(() => new FencedTable({ table, dataColumns: ['customer'] })).toThrow(InvalidArgumentError);
  });

  it.each(['customer"; --', 'customer name', 'Customer', '', 'x)', "cust'omer", 'a'.repeat(64)])('rejects the data column %j', (column) => {
    expect(() => new FencedTable({ table: 'orders', dataColumns: ['items', column] })).toThrow(InvalidArgumentError);
  });

  it.each(['id', 'intent_key', 'status', 'last_fencing_token', 'session_id', 'created_at', 'updated_at'])(
    'rejects the fencing column %s as a data column',
    (column) => {
      expect(() => new FencedTable({ table: 'orders', dataColumns: [column] })).toThrow(/fencing column/);
    },
  );

  it('rejects a data column listed twice', () => {
    expect(() => new FencedTable({ table: 'orders', dataColumns: ['items', 'items'] })).toThrow(/twice/);
  });

  it('accepts a schema-qualified table and quotes every identifier it writes into SQL', () => {
    const sql = buildStatements({ table: 'sales.orders_2026', dataColumns: ['customer', 'amount_cents'] });

    expect(sql.writeFenced).toContain('INSERT INTO "sales"."orders_2026" AS cur');
    expect(sql.writeFenced).toContain('NULL::"sales"."orders_2026"');
    expect(sql.writeFenced).toContain('d."customer", d."amount_cents"');
    expect(sql.find).toContain('FROM "sales"."orders_2026"');
    expect(sql.transition).toContain('UPDATE "sales"."orders_2026" AS cur');
  });
});

describe('isRowId', () => {
  it('takes positive decimal integers up to bigint\'s largest, and nothing else', () => {
    expect(['1', '42', '9223372036854775807'].map(isRowId)).toEqual([true, true, true]);
    expect(['9223372036854775808', '9999999999999999999', '0', '01', '-1', '1.0', ' 1', '', 1, undefined].map(isRowId)).toEqual(Array(10).fill(false));
  });
});

describe('FencedTable input checks', () => {
  it('sends hostile values only as parameters, never inside the SQL text', async () => {
    const { q, sent } = fakeQueryable([{ id: '1', outcome: 'WRITTEN' }]);
    const hostile = "x'); DROP TABLE orders; --";

    await fencedOrders.writeFenced(q, { ...validInput(), intentKey: hostile, sessionId: hostile, data: { customer: hostile, items: [hostile], amount_cents: '1' } });

    expect(sent).toHaveLength(1);
    expect(sent[0]!.text).toBe(buildStatements({ table: 'orders', dataColumns: ['customer', 'items', 'amount_cents'] }).writeFenced);
    expect(sent[0]!.text).not.toContain('DROP');
    expect(sent[0]!.values).toEqual([hostile, '1700000000000001', hostile, JSON.stringify({ customer: hostile, items: [hostile], amount_cents: '1' })]);
  });

  it.each([
    ['zero', '0'],
    ['a negative number', '-5'],
    ['a leading zero', '01'],
    ['whitespace', ' 1'],
    ['a decimal point', '1.0'],
    ['an exponent', '1e15'],
    ['more than bigint', '9223372036854775808'],
    ['a JS number', 1700000000000001],
    ['a negative bigint', -1n],
    ['a bigint above 2^63-1', 9223372036854775808n],
  ])('refuses a fencing token with %s before sending anything', async (_what, fencingToken) => {
    const { q, sent } = fakeQueryable();

    await expect(fencedOrders.writeFenced(q, { ...validInput(), fencingToken: fencingToken as string })).rejects.toThrow(InvalidArgumentError);
    await expect(fencedOrders.markCompensated(q, { intentKey: 'k', fencingToken: fencingToken as string })).rejects.toThrow(InvalidArgumentError);
    expect(sent).toHaveLength(0);
  });

  it('sends a bigint token as its exact decimal text', async () => {
    const { q, sent } = fakeQueryable([{ status: 'REGISTERED', owned: true }]);

    await fencedOrders.markRegistered(q, { intentKey: 'k', fencingToken: 9223372036854775807n });

    expect(sent[0]!.values[1]).toBe('9223372036854775807');
    expect(normaliseToken('1700000000000001')).toBe('1700000000000001');
  });

  it.each([
    ['an unknown column', { customer: 'a', items: [], amount_cents: '1', id: '7' }],
    ['a missing column', { customer: 'a', items: [] }],
    ['an undefined value', { customer: 'a', items: undefined, amount_cents: '1' }],
    ['a NUL character', { customer: 'a\u0000b', items: [], amount_cents: '1' }],
    ['a NUL character in a nested key', { customer: 'a', items: [{ 'k\u0000': 1 }], amount_cents: '1' }],
    ['a cycle', (() => { const items: unknown[] = []; items.push(items); return { customer: 'a', items, amount_cents: '1' }; })()],
    ['an array instead of an object', ['a']],
  ])('refuses data with %s before sending anything', async (_what, data) => {
    const { q, sent } = fakeQueryable();

    await expect(fencedOrders.writeFenced(q, { ...validInput(), data: data as Record<string, unknown> })).rejects.toThrow(InvalidArgumentError);
    expect(sent).toHaveLength(0);
  });

  it.each([
    ['an empty intent key', { intentKey: '' }],
    ['a NUL in the intent key', { intentKey: 'a\u0000' }],
    ['an empty session id', { sessionId: '' }],
  ])('refuses %s before sending anything', async (_what, override) => {
    const { q, sent } = fakeQueryable();

    await expect(fencedOrders.writeFenced(q, { ...validInput(), ...override })).rejects.toThrow(InvalidArgumentError);
    expect(sent).toHaveLength(0);
  });

  it('maps the transition statement reply to the outcome union', async () => {
    const outcome = (rows: unknown[]) => fencedOrders.markCompleted(fakeQueryable(rows).q, { intentKey: 'k', fencingToken: '1' });

    await expect(outcome([])).resolves.toEqual({ status: 'NOT_FOUND' });
    await expect(outcome([{ status: 'COMPLETED', owned: false }])).resolves.toEqual({ status: 'FENCED_OUT' });
    await expect(outcome([{ status: 'COMPLETED', owned: true }])).resolves.toEqual({ status: 'OK' });
    await expect(outcome([{ status: 'FAILED', owned: true }])).resolves.toEqual({ status: 'ILLEGAL_TRANSITION', from: 'FAILED' });
  });
});
