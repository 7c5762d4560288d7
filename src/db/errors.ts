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

/** Connection-level failures (node errors and PostgreSQL's connection/operator-intervention classes). */
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN']);

/** True when `err` says the database is out of reach rather than that a statement was wrong. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE_CODES.has(code)) return true;
    // 08xxx connection exceptions, 57P01-57P03 admin shutdown / cannot connect now.
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
  }
  return /timeout exceeded when trying to connect|Connection terminated|connection timeout/i.test(err.message);
}

/** Re-throws `err` as a {@link DbUnavailableError} when it is a connection failure, else unchanged. */
export function translateDbError(err: unknown, what: string): never {
  if (isUnavailable(err)) {
    throw new DbUnavailableError(`PostgreSQL unavailable during ${what}: ${(err as Error).message}`, { cause: err });
  }
  throw err;
}
