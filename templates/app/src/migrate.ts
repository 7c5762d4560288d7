/**
 * The app's schema: the library's tables, then the app's own fenced table. Run as a script
 * (`npm run migrate`), it migrates DATABASE_URL, creating the database when missing.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadConfig } from 'reservation-saga';
import { ensureDatabase, fencedTableSql, migrate } from 'reservation-saga/worker';

/** `signups`: the fencing columns every fenced table needs, then the app's own columns. */
export const SIGNUPS_SQL = fencedTableSql('signups', 'email text NOT NULL, plan text NOT NULL, activated_at timestamptz');

export async function migrateApp(databaseUrl: string): Promise<void> {
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(SIGNUPS_SQL);
  } finally {
    await client.end();
  }
}

// Run as a script (not imported by the test).
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  migrateApp(loadConfig(process.env).db.url).then(
    () => console.log('migrate: done'),
    (err: unknown) => {
      console.error(`migrate: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
