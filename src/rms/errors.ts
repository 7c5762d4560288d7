/**
 * Errors of the RMS. Expected outcomes (DUPLICATE, CONFLICT, LOST, NOT_OWNER) are values, not errors;
 * these classes are failures: bad input, Redis out of reach, or a reply the RMS cannot read.
 */

/** Base class of every error thrown by `src/rms`. */
export class RmsError extends Error {
  override readonly name: string = 'RmsError';
}

/**
 * Thrown when an argument is malformed, before any Redis call is made: nothing has been written.
 * Not retryable: the same input fails the same way.
 */
export class RmsValidationError extends RmsError {
  override readonly name = 'RmsValidationError';
  /** The argument at fault, e.g. `intent`, `sessionId`, `fencingToken`, `data`. */
  readonly field: string;
  constructor(field: string, message: string) {
    super(`${field}: ${message}`);
    this.field = field;
  }
}

/**
 * Thrown when Redis could not be reached or did not answer in time. Retryable; the command may or may
 * not have run (a reply can be lost after the script ran), which is why every RMS command is safe to
 * repeat with the same arguments.
 */
export class RmsUnavailableError extends RmsError {
  override readonly name = 'RmsUnavailableError';
  /** The RMS command that failed, e.g. `reserve`. */
  readonly command: string;
  constructor(command: string, message: string, options: { cause: unknown }) {
    super(`Redis unavailable during ${command}: ${message}`, options);
    this.command = command;
  }
}

/**
 * Thrown when Redis answered with an error, or with a reply the RMS does not understand: a bug, or a
 * foreign value stored under an RMS key. Not retryable.
 */
export class RmsReplyError extends RmsError {
  override readonly name = 'RmsReplyError';
  /** The RMS command whose reply was refused. */
  readonly command: string;
  constructor(command: string, message: string, options?: { cause: unknown }) {
    super(`unexpected Redis reply to ${command}: ${message}`, options);
    this.command = command;
  }
}

/** Socket-level failures: the server is not there or went away. */
const UNAVAILABLE_CODES = new Set([
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

/** ioredis error classes that mean "no server answered" (matched by name: they are not exported). */
const UNAVAILABLE_NAMES = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);

/** ioredis messages for commands that never reached a server or never came back. */
const UNAVAILABLE_MESSAGES = [
  /^Command timed out$/,
  /^Connection is closed\.$/,
  /^Stream isn't writeable/,
  /^Cluster isn't ready/,
  /^None of startup nodes is available$/,
  /^Failed to refresh slots cache/,
  /^Too many Cluster redirections/,
];

/**
 * Redis error replies that mean "try again later": dataset loading after a restart, cluster down or
 * resharding, a replica promoted or demoted, a long script running.
 */
const UNAVAILABLE_REPLIES = /^(LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|READONLY|BUSY|NOREPLICAS)\b/;

/** True when `err` says Redis is out of reach (or temporarily refusing work) rather than that a command was wrong. */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  if (UNAVAILABLE_NAMES.has(err.name)) return true;
  if (UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(err.message))) return true;
  return UNAVAILABLE_REPLIES.test(err.message);
}

/**
 * Turns any error raised by an ioredis call into an {@link RmsError}: {@link RmsUnavailableError} when
 * Redis is out of reach, {@link RmsReplyError} otherwise. RMS errors pass through unchanged.
 */
export function toRmsError(err: unknown, command: string): RmsError {
  if (err instanceof RmsError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (isRedisUnavailable(err)) return new RmsUnavailableError(command, message, { cause: err });
  return new RmsReplyError(command, message, { cause: err });
}
