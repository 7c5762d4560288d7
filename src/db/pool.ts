/** The PostgreSQL pool, configured once from {@link Config}. */
import pg from 'pg';
import type { Config } from '../config';

/** Options of {@link createPool}: the `db` part of the config. */
export type PoolOptions = Config['db'];

/**
 * Creates a pool whose every connection carries the statement and idle-transaction timeouts, and whose idle-client errors
 * (a restarted server) are logged instead of crashing the process.
 */
export function createPool(options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolMax,
    connectionTimeoutMillis: options.connectTimeoutMs,
    statement_timeout: options.statementTimeoutMs,
    // A transaction left idle (a paused or hung process) must not keep its locks, nor a step's claim, for ever.
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs,
    idleTimeoutMillis: 30_000,
    application_name: 'reservation-saga',
  });
  pool.on('error', (err) => {
    process.stderr.write(`postgres: idle client error: ${err.message}\n`);
  });
  // A checked-out client whose connection drops (server restart, network cut) emits 'error' besides
  // failing its query; without a listener that event would crash the process.
  pool.on('connect', (client) => {
    client.on('error', (err) => process.stderr.write(`postgres: connection lost: ${err.message}\n`));
  });
  return pool;
}
