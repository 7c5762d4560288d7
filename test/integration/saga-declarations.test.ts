/**
 * What an app declares and owns: a fenced table made by fencedTableSql is one a worker starts on, and
 * a worker refuses to start, naming the table and the column, when a registered type's table lacks a
 * column it needs (before it polls: no saga of that type ever runs half-way). Real PostgreSQL and
 * Temporal; each test makes its tables in a schema of its own.
 */
import { NativeConnection } from '@temporalio/worker';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkFencedTable, fencedTableSql, FencedTableSchemaError } from '../../src/db';
import { defineOperation, defineSaga, fencedTable, type SagaType } from '../../src/sagas';
import { createWorker } from '../../src/worker';
import { testConfig } from '../helpers/context';
import { testPool, uniqueSchema } from '../helpers/db-fixtures';

let pool: pg.Pool;
let connection: NativeConnection;
const schemas: string[] = [];
const config = testConfig('saga declarations');

beforeAll(async () => {
  pool = testPool(2);
  connection = await NativeConnection.connect({ address: config.temporal.address });
});
afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool?.end();
  await connection?.close();
});

/** A schema of the test's own, with `sql` run in it. */
async function schemaWith(sql: string): Promise<string> {
  const schema = uniqueSchema('decl');
  schemas.push(schema);
  await pool.query(`CREATE SCHEMA ${schema}; SET search_path TO ${schema}; ${sql}; RESET search_path`);
  return schema;
}

const booking = (table: string): SagaType =>
  defineSaga({
    type: 'booking',
    scope: 'booking',
    schema: z.object({ room: z.string(), guest: z.string() }),
    intent: (input) => ({ room: input.room }),
    table: fencedTable(table, ['room', 'guest']),
    row: (input) => ({ room: input.room, guest: input.guest }),
    steps: [{ step: 'hold', compensation: 'release' }],
    handlers: { hold: async () => null, release: async () => null },
  });

const rebook = (table: string): SagaType =>
  defineOperation({
    type: 'booking-move',
    scope: 'booking',
    schema: z.object({ booking: z.string() }),
    entity: (input) => input.booking,
    table: fencedTable(table, ['room', 'guest']),
    steps: [{ step: 'move' }],
    handlers: { move: async () => null },
  });

const startWorker = (sagas: SagaType[]) => createWorker({ sagas, config, connection });

describe('fencedTableSql', () => {
  it('makes a table the check accepts, with last_operation_token when operations claim its rows', async () => {
    const schema = await schemaWith(fencedTableSql('bookings', 'room text NOT NULL, guest text NOT NULL', { operations: true }));
    const table = fencedTable(`${schema}.bookings`, ['room', 'guest']);

    await expect(checkFencedTable(pool, table, { operations: true })).resolves.toBeUndefined();
    // A second run changes nothing (IF NOT EXISTS): an app may run its migration at every start.
    await pool.query(`SET search_path TO ${schema}; ${fencedTableSql('bookings', 'room text NOT NULL, guest text NOT NULL', { operations: true })}; RESET search_path`);
    await expect(checkFencedTable(pool, table, { operations: true })).resolves.toBeUndefined();
  });

  it('refuses a table name that is not a plain identifier, before any SQL', () => {
    expect(() => fencedTableSql('bookings; DROP TABLE x', 'room text')).toThrow(/not an identifier/);
  });
});

describe('a worker', () => {
  it('starts on the tables its saga types need', async () => {
    const schema = await schemaWith(fencedTableSql('bookings', 'room text NOT NULL, guest text NOT NULL', { operations: true }));
    const app = await startWorker([booking(`${schema}.bookings`), rebook(`${schema}.bookings`)]);
    // Polls, then shuts down at once: a Worker never run would keep its hold on the connection.
    await app.worker.runUntil(async () => {});
    await app.close();
  });

  it('refuses to start when a data column is missing, naming the saga type, the table and the column', async () => {
    const schema = await schemaWith(fencedTableSql('bookings', 'room text NOT NULL'));

    const refusal = await startWorker([booking(`${schema}.bookings`)]).then(
      () => undefined,
      (err: unknown) => err,
    );

    expect(refusal).toBeInstanceOf(FencedTableSchemaError);
    expect((refusal as Error).message).toBe(`saga type "booking": table "${schema}.bookings" lacks column "guest"`);
  });

  it('refuses to start when operations claim a table without last_operation_token and created_by', async () => {
    const schema = await schemaWith(fencedTableSql('bookings', 'room text NOT NULL, guest text NOT NULL'));

    await expect(startWorker([booking(`${schema}.bookings`), rebook(`${schema}.bookings`)])).rejects.toThrow(
      `table "${schema}.bookings" lacks columns "last_operation_token", "created_by"`,
    );
  });

  it('refuses to start on a table from before owners were recorded, naming created_by; the documented ALTER readies it', async () => {
    const schema = await schemaWith(`${fencedTableSql('bookings', 'room text NOT NULL, guest text NOT NULL', { operations: true })}; ALTER TABLE bookings DROP COLUMN created_by`);

    await expect(startWorker([booking(`${schema}.bookings`), rebook(`${schema}.bookings`)])).rejects.toThrow(`table "${schema}.bookings" lacks column "created_by"`);
    await pool.query(`ALTER TABLE ${schema}.bookings ADD COLUMN IF NOT EXISTS created_by text NOT NULL DEFAULT ''`);
    await expect(checkFencedTable(pool, fencedTable(`${schema}.bookings`, ['room', 'guest']), { operations: true })).resolves.toBeUndefined();
  });

  it('refuses to start when the table does not exist, naming it', async () => {
    const schema = await schemaWith('SELECT 1');

    await expect(startWorker([booking(`${schema}.bookings`)])).rejects.toThrow(`saga type "booking": table "${schema}.bookings" does not exist`);
  });

  it('refuses to start with no saga types', async () => {
    await expect(startWorker([])).rejects.toThrow(/a worker needs saga types/);
  });
});
