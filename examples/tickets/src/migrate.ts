/**
 * The tickets app's schema: the library's own tables (`migrate` of reservation-saga/worker), then
 * the app's migrations below, each applied once, in order, recorded in `ticket_migrations`. Run as a
 * script (`npm run migrate`), it creates and migrates DATABASE_URL.
 *
 * The example's payment service keeps its tables in schema `payments` of the same database, so one
 * command readies everything; a real one has a database of its own.
 */
import pg from 'pg';
import { ensureDatabase, fencedTableSql, migrate } from 'reservation-saga/worker';
import { PAYMENTS_SCHEMA_SQL } from './services/payments';

/** The app's migrations, in order. Never edit one that has shipped: add the next. */
export const TICKET_MIGRATIONS: readonly { name: string; sql: string }[] = [
  {
    name: '001_tickets',
    // The fenced table: the columns every fenced table needs (id, intent_key, unique among live rows,
    // status, last_fencing_token, session_id, created_at, updated_at), last_operation_token and
    // created_by for the operations that claim a row (ticket-refund), then the ticket's own columns.
    sql: fencedTableSql(
      'tickets',
      `event          text   NOT NULL,
       seat           text   NOT NULL,
       buyer          text   NOT NULL,
       amount_cents   bigint NOT NULL CHECK (amount_cents > 0),
       payment_key    text   NOT NULL,
       payment_intent text,
       ticket_code    text,
       issued_at      timestamptz,
       refunded_at    timestamptz,
       refunded_by    text`,
      { operations: true },
    ),
  },
  { name: '002_payment_service', sql: PAYMENTS_SCHEMA_SQL },
];

/** The advisory lock that makes concurrent runs apply each migration once. */
const MIGRATE_LOCK = '7301145002611402';

/** Applies the library's and the tickets app's pending migrations; returns the names applied. */
export async function migrateTickets(databaseUrl: string, log: (line: string) => void = () => {}): Promise<string[]> {
  const library = await migrate(databaseUrl, undefined, log);
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS ticket_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const { rows } = await client.query<{ name: string }>('SELECT name FROM ticket_migrations');
    const done = new Set(rows.map((r) => r.name));
    const applied: string[] = [];
    for (const m of TICKET_MIGRATIONS.filter((m) => !done.has(m.name))) {
      await client.query(m.sql);
      await client.query('INSERT INTO ticket_migrations (name) VALUES ($1)', [m.name]);
      log(`migrate: applied ${m.name}`);
      applied.push(m.name);
    }
    await client.query('COMMIT');
    return [...library, ...applied];
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}

if (require.main === module) {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tickets_example';
  ensureDatabase(url)
    .then(() => migrateTickets(url, (line) => process.stderr.write(`${line}\n`)))
    .then((applied) => process.stderr.write(`migrate: ${applied.length ? `applied ${applied.join(', ')}` : 'up to date'}\n`))
    .catch((err: unknown) => {
      process.stderr.write(`migrate: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
