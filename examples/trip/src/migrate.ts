/**
 * The trip app's schema: the library's own tables (`migrate` of reservation-saga/worker), then the
 * app's migrations below, each applied once, in order, recorded in `trip_migrations`. Run as a
 * script (`npm run migrate`), it creates and migrates DATABASE_URL.
 *
 * The example's hotel and airline keep their tables in schemas `hotel` and `airline` of the same
 * database, so one command readies everything; real ones have databases of their own.
 */
import pg from 'pg';
import { ensureDatabase, fencedTableReleaseSql, fencedTableSql, migrate } from 'reservation-saga/worker';
import { AIRLINE_SCHEMA_SQL } from './services/airline';
import { HOTEL_SCHEMA_SQL } from './services/hotel';

/** The app's migrations, in order. Never edit one that has shipped: add the next. */
export const TRIP_MIGRATIONS: readonly { name: string; sql: string }[] = [
  {
    name: '001_trips',
    sql: [
      // The fenced table: the columns every fenced table needs (id, intent_key, unique among live
      // rows, status, last_fencing_token, session_id, created_at, updated_at), last_operation_token for the
      // operations that claim a row (trip-cancel), then the trip's own columns.
      fencedTableSql(
        'trips',
        `traveller     text   NOT NULL,
         hotel         text   NOT NULL,
         check_in      date   NOT NULL,
         check_out     date   NOT NULL,
         flight        text   NOT NULL,
         amount_cents  bigint NOT NULL CHECK (amount_cents > 0),
         room_hold_key text   NOT NULL,
         seat_hold_key text   NOT NULL,
         charge_key    text   NOT NULL,
         cancelled_at  timestamptz,
         cancelled_by  text`,
        { operations: true },
      ),
      // The card charges (the chargeCard step), keyed by the step's idempotency key.
      `CREATE TABLE IF NOT EXISTS charges (
         id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
         charge_key   text        NOT NULL UNIQUE,
         amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
         card_last4   text        NOT NULL CHECK (card_last4 ~ '^[0-9]{4}$'),
         status       text        NOT NULL CHECK (status IN ('CHARGED', 'REFUNDED')),
         refunded_by  text,
         created_at   timestamptz NOT NULL DEFAULT now(),
         refunded_at  timestamptz
       );`,
    ].join('\n'),
  },
  { name: '002_hotel_service', sql: HOTEL_SCHEMA_SQL },
  { name: '003_airline_service', sql: AIRLINE_SCHEMA_SQL },
  // Who each trip was created for (SagaClient's owner): trip-cancel finds only its owner's trips.
  // A database migrated before reservation-saga recorded owners gets the column here.
  { name: '004_trips_owner', sql: "ALTER TABLE trips ADD COLUMN IF NOT EXISTS created_by text NOT NULL DEFAULT '';" },
  // Trips from before owners have none (''), which no operation finds (`trips` does not opt in with
  // `legacy.ownerlessRows`): they become the default owner's, `app`, whose every trip they were.
  { name: '005_trips_owner_assigned', sql: "UPDATE trips SET created_by = 'app' WHERE created_by = '';" },
  // trip-cancel releases the trip (its row RELEASED, its intent free to book again): `trips` holds
  // released rows. A database migrated before gets the shape here (a new one has it from 001).
  { name: '006_trips_released', sql: fencedTableReleaseSql('trips') },
];

/** The advisory lock that makes concurrent runs apply each migration once. */
const MIGRATE_LOCK = '7301145002611401';

/** Applies the library's and the trip app's pending migrations; returns the names applied. */
export async function migrateTrip(databaseUrl: string, log: (line: string) => void = () => {}): Promise<string[]> {
  const library = await migrate(databaseUrl, undefined, log);
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS trip_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const { rows } = await client.query<{ name: string }>('SELECT name FROM trip_migrations');
    const done = new Set(rows.map((r) => r.name));
    const applied: string[] = [];
    for (const m of TRIP_MIGRATIONS.filter((m) => !done.has(m.name))) {
      await client.query(m.sql);
      await client.query('INSERT INTO trip_migrations (name) VALUES ($1)', [m.name]);
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
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/trip_example';
  ensureDatabase(url)
    .then(() => migrateTrip(url, (line) => process.stderr.write(`${line}\n`)))
    .then((applied) => process.stderr.write(`migrate: ${applied.length ? `applied ${applied.join(', ')}` : 'up to date'}\n`))
    .catch((err: unknown) => {
      process.stderr.write(`migrate: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
