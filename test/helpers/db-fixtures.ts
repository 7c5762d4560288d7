/**
 * Helpers for the db tests: pools on the run's database, per-test unique names, distinct fencing
 * tokens, and a way to know that a session is blocked on a lock (instead of sleeping).
 */
import { randomBytes, randomInt } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

/** A pool on the run's database (migrated by global-setup). Callers end it. */
export function testPool(max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: inject('databaseUrl'),
    max,
    connectionTimeoutMillis: 10_000,
    statement_timeout: 60_000,
    application_name: 'reservation-saga-db-test',
  });
  pool.on('error', () => {});
  return pool;
}

/** A name no other test (or run) uses: `<label>-<random hex>`; safe as a key and, lower-cased, as an identifier suffix. */
export function uniqueId(label: string): string {
  return `${label}-${randomBytes(6).toString('hex')}`;
}

/** A schema name of the test's own: `db_<label>_<random hex>`. */
export function uniqueSchema(label: string): string {
  return `db_${label.replace(/[^a-z0-9_]/g, '_')}_${randomBytes(4).toString('hex')}`;
}

/** A fencing token shaped like the real ones (a microsecond timestamp, about 1.7e15) plus `offset`. */
export function token(offset: number | bigint = 0): string {
  return (1_700_000_000_000_000n + BigInt(offset)).toString();
}

/** `count` distinct random tokens near 1.7e15, as decimal strings. */
export function distinctTokens(count: number): string[] {
  const seen = new Set<string>();
  while (seen.size < count) seen.add(token(randomInt(1, 2 ** 40)));
  return [...seen];
}

/** The numerically largest of some decimal tokens (compared as bigints, never as JS numbers). */
export function maxToken(tokens: readonly string[]): string {
  return tokens.reduce((a, b) => (BigInt(a) >= BigInt(b) ? a : b));
}

/** Checks out `count` clients at once, so that each caller really has a connection of its own. */
export async function checkout(pool: pg.Pool, count: number): Promise<pg.PoolClient[]> {
  return Promise.all(Array.from({ length: count }, () => pool.connect()));
}

/** The backend pid of a connection, to watch it from another one. */
export async function backendPid(client: pg.PoolClient): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}

/**
 * Resolves once the backend `pid` waits for a lock (pg_stat_activity), i.e. once the statement it
 * runs is blocked behind another transaction, or once `until.settled` is set (the statement ended
 * without waiting). Polls; fails the test if neither happens.
 */
export async function untilBlockedOnLock(observer: pg.Pool, pid: number, until?: { settled: boolean }): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    // The statement answered without waiting: nothing to wait for.
    if (until?.settled) return;
    const { rows } = await observer.query<{ wait_event_type: string | null }>(
      'SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1',
      [pid],
    );
    if (rows[0]?.wait_event_type === 'Lock') return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`backend ${pid} never waited for a lock`);
}

/**
 * Drives one interleaving deterministically: session A opens a transaction and runs `hold`; session
 * B then starts `blocked`, which must wait for A's locks; once B is seen waiting, A ends with `end`;
 * B's result is returned. A's transaction is always ended and both clients released.
 */
export async function behindOpenTransaction<T>(
  pool: pg.Pool,
  hold: (a: pg.PoolClient) => Promise<unknown>,
  blocked: (b: pg.PoolClient) => Promise<T>,
  end: 'COMMIT' | 'ROLLBACK',
  options: {
    /** B may also answer without waiting (its snapshot decides): A ends as soon as B answers or waits. */
    mayNotWait?: boolean;
  } = {},
): Promise<T> {
  const [a, b] = await checkout(pool, 2);
  let pending: Promise<T> | undefined;
  try {
    await a!.query('BEGIN');
    await hold(a!);
    const bPid = await backendPid(b!);
    pending = blocked(b!);
    const progress = { settled: false };
    pending.then(
      () => (progress.settled = true),
      () => (progress.settled = true),
    );
    await untilBlockedOnLock(pool, bPid, options.mayNotWait ? progress : undefined);
    await a!.query(end);
    return await pending;
  } finally {
    await a!.query('ROLLBACK').catch(() => {});
    await pending?.catch(() => {});
    a!.release();
    b!.release();
  }
}
