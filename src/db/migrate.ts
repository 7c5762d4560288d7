/**
 * Applies numbered, forward-only SQL files with node-pg-migrate: the library's own (`migrations/`,
 * recorded in `reservation_saga_migrations`), or an app's folder with a table of its own.
 *
 * node-pg-migrate takes a *try* advisory lock and fails when another process holds it. We first take
 * the same advisory lock, blocking, on the connection we hand it: a second process waits for the
 * first to finish and then finds nothing left to apply. (Advisory locks are re-entrant per session,
 * so node-pg-migrate's own try-lock on that connection succeeds.)
 */
import path from 'node:path';
import pg from 'pg';
import { PG_MIGRATE_LOCK_ID, runner } from 'node-pg-migrate';
import { PROJECT_ROOT } from '../paths';

/** Folder of the library's SQL migrations. */
export const MIGRATIONS_DIR = path.join(PROJECT_ROOT, 'migrations');

/** Table that records the library's applied migrations (an app's own migrations keep their own table). */
export const MIGRATIONS_TABLE = 'reservation_saga_migrations';

/** Which migrations {@link migrate} applies. @default the library's own */
export interface MigrateOptions {
  /** A folder of `<timestamp>_<name>.sql` files (each starting `-- Up Migration`). */
  dir: string;
  /** The table that records them: one per folder, never the library's. */
  table: string;
}

/**
 * Creates the database named in `databaseUrl` when it does not exist yet (connecting to the
 * `postgres` maintenance database of the same server).
 */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const target = new URL(databaseUrl);
  const name = decodeURIComponent(target.pathname.slice(1));
  if (!/^[A-Za-z0-9_]{1,63}$/.test(name)) throw new Error(`database name ${JSON.stringify(name)} is not a plain identifier`);
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return false;
    try {
      await client.query(`CREATE DATABASE "${name}"`);
    } catch (err) {
      // 42P04 duplicate_database: another process created it between our check and our create.
      if ((err as { code?: string }).code !== '42P04') throw err;
      return false;
    }
    return true;
  } finally {
    await client.end();
  }
}

/**
 * Applies pending migrations (the library's, or `options.dir`'s); returns the names applied (empty
 * when up to date). Processes running it at once apply each migration once.
 */
export async function migrate(databaseUrl: string, options?: MigrateOptions, log: (line: string) => void = () => {}): Promise<string[]> {
  const dir = options?.dir ?? MIGRATIONS_DIR;
  const table = options?.table ?? MIGRATIONS_TABLE;
  if (options && table === MIGRATIONS_TABLE) throw new Error(`migrate: ${MIGRATIONS_TABLE} records the library's migrations; give the app's folder a table of its own`);
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [PG_MIGRATE_LOCK_ID]);
    try {
      const applied = await runner({
        dbClient: client,
        dir,
        migrationsTable: table,
        direction: 'up',
        singleTransaction: true,
        checkOrder: true,
        log: () => {},
        logger: { debug: () => {}, info: () => {}, warn: log, error: log },
      });
      return applied.map((m) => m.name);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [PG_MIGRATE_LOCK_ID]);
    }
  } finally {
    await client.end();
  }
}
