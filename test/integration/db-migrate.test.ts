/**
 * The migrations runner on a throwaway database of this file's own (created fresh, dropped after).
 */
import { readdirSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { ensureDatabase, migrate, MIGRATIONS_DIR, MIGRATIONS_TABLE } from '../../src/db';
import { uniqueSchema } from '../helpers/db-fixtures';

const migrationNames = readdirSync(MIGRATIONS_DIR)
  .filter((f) => f.endsWith('.sql'))
  .map((f) => f.slice(0, -'.sql'.length))
  .sort();

const databaseName = uniqueSchema('migrate');
const url = new URL(inject('databaseUrl'));
url.pathname = `/${databaseName}`;
const databaseUrl = url.toString();

async function onAdmin<T>(fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const adminUrl = new URL(databaseUrl);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

describe('migrate', () => {
  beforeAll(async () => {
    expect(await ensureDatabase(databaseUrl)).toBe(true);
  });
  afterAll(async () => {
    await onAdmin((admin) => admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`));
  });

  it('applies each migration once when two callers migrate a fresh database at the same time', async () => {
    const [first, second] = await Promise.all([migrate(databaseUrl), migrate(databaseUrl)]);

    expect([...first, ...second].sort()).toEqual(migrationNames);
    expect([first, second]).toContainEqual([]);
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string; n: string }>(`SELECT name, count(*) AS n FROM ${MIGRATIONS_TABLE} GROUP BY name ORDER BY name`);
      expect(rows).toEqual(migrationNames.map((name) => ({ name, n: '1' })));
    } finally {
      await client.end();
    }
  });

  it('applies nothing when run again on a migrated database', async () => {
    const applied = await migrate(databaseUrl);

    expect(applied).toEqual([]);
  });
});
