/**
 * The order app's schema: the library's tables (`migrate`), then the app's own migrations
 * (migrations/, recorded in `orders_migrations`), and the payment provider's schema. Run as a
 * script, it migrates DATABASE_URL.
 */
import path from 'node:path';
import { ensureDatabase, migrate } from 'reservation-saga/worker';

/** Folder of the order app's SQL migrations. */
export const ORDER_MIGRATIONS_DIR = path.join(__dirname, '..', 'migrations');

/** Applies the library's and the order app's pending migrations; returns the names applied. */
export async function migrateOrders(databaseUrl: string, log?: (line: string) => void): Promise<string[]> {
  const library = await migrate(databaseUrl, undefined, log);
  const app = await migrate(databaseUrl, { dir: ORDER_MIGRATIONS_DIR, table: 'orders_migrations' }, log);
  return [...library, ...app];
}

if (require.main === module) {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/reservation_saga';
  ensureDatabase(url)
    .then(() => migrateOrders(url, (line) => process.stderr.write(`${line}\n`)))
    .then((applied) => process.stderr.write(`migrate: ${applied.length ? `applied ${applied.join(', ')}` : 'up to date'}\n`))
    .catch((err: unknown) => {
      process.stderr.write(`migrate: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
