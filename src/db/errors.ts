/** Errors of the PostgreSQL layer. Constraint outcomes are values, not errors; these are failures. */

/** Base class of every error thrown by `src/db`. */
export class DbError extends Error {
  override readonly name: string = 'DbError';
}

/** PostgreSQL could not be reached, refused the connection, or timed out. Retryable. */
export class DbUnavailableError extends DbError {
  override readonly name = 'DbUnavailableError';
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
  }
}

/**
 * Thrown before any SQL runs when a caller passes something the layer cannot use: a table or column
 * name outside the strict identifier pattern, a fencing token that is not a positive bigint, data
 * that does not match the table's data columns, a payload that is not JSON. A programming error:
 * retrying cannot help.
 */
export class InvalidArgumentError extends DbError {
  override readonly name = 'InvalidArgumentError';
  /** The argument at fault, e.g. `dataColumns[2]` or `fencingToken`. */
  readonly argument: string;
  constructor(argument: string, message: string) {
    super(`${argument}: ${message}`);
    this.argument = argument;
  }
}

/**
 * Thrown by `withIdempotency` when a key already recorded in a scope comes back with a different
 * request payload (its request hash differs). Nothing was run. Not retryable: the caller reused a key.
 */
export class IdempotencyKeyReuseError extends DbError {
  override readonly name = 'IdempotencyKeyReuseError';
  /** Scope of the reused key. */
  readonly scope: string;
  /** The reused idempotency key. */
  readonly key: string;
  constructor(scope: string, key: string) {
    super(`idempotency key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)} was already used with a different payload`);
    this.scope = scope;
    this.key = key;
  }
}

/**
 * Thrown by `withIdempotency` when the committed record of a key is not one it can replay (status
 * FAILED or PENDING, which `withIdempotency` itself never commits: another writer recorded it).
 */
export class IdempotencyRecordStateError extends DbError {
  override readonly name = 'IdempotencyRecordStateError';
  /** Scope of the key. */
  readonly scope: string;
  /** The idempotency key. */
  readonly key: string;
  /** The status found in the record. */
  readonly status: string;
  constructor(scope: string, key: string, status: string) {
    super(`idempotency record ${JSON.stringify(key)} in scope ${JSON.stringify(scope)} has status ${status}, which cannot be replayed`);
    this.scope = scope;
    this.key = key;
    this.status = status;
  }
}

/**
 * Thrown by `withIdempotency` when the key is held by a tombstone (`tombstoneIdempotencyKey`): the
 * work it keys was compensated (or otherwise given up) and must never run now.
 */
export class IdempotencyKeyTombstonedError extends DbError {
  override readonly name = 'IdempotencyKeyTombstonedError';
  /** Scope of the key. */
  readonly scope: string;
  /** The idempotency key. */
  readonly key: string;
  constructor(scope: string, key: string) {
    super(`idempotency key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)} is tombstoned: its work was given up and never runs`);
    this.scope = scope;
    this.key = key;
  }
}

/** Connection-level failures (node errors and PostgreSQL's connection/operator-intervention classes). */
const UNAVAILABLE_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'EAI_AGAIN',
]);

/** PostgreSQL SQLSTATEs that mean "not now" rather than "wrong statement". */
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, recovering)
  '53300', // too_many_connections
]);

/** True when `err` says the database is out of reach rather than that a statement was wrong. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE_CODES.has(code)) return true;
    // 08xxx connection exceptions.
    if (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code)) return true;
  }
  return /timeout exceeded when trying to connect|Connection terminated|connection timeout|connection error and is not queryable/i.test(
    err.message,
  );
}

/** Re-throws `err` as a {@link DbUnavailableError} when it is a connection failure, else unchanged. */
export function translateDbError(err: unknown, what: string): never {
  if (isUnavailable(err)) {
    // A refused connection to a host with several addresses is an AggregateError with an empty message.
    const detail = (err as Error).message || String((err as { code?: unknown }).code);
    throw new DbUnavailableError(`PostgreSQL unavailable during ${what}: ${detail}`, { cause: err });
  }
  throw err;
}
