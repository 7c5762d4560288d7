/**
 * Argument checks of the RMS. Each runs before any Redis call and throws {@link RmsValidationError}
 * naming the argument, so no malformed Redis key or value can ever be built.
 */
import { RmsValidationError } from './errors';

/** What a scope may look like: lower-case letters, digits, `_` and `-`, 1 to 64 characters. */
export const SCOPE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** What an intent key looks like: a scope, a colon, and 43 base64url characters (a SHA-256 digest). */
export const INTENT_KEY_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}:[A-Za-z0-9_-]{43}$/;

/** Longest session id accepted. */
export const MAX_SESSION_ID_LENGTH = 128;

/** Longest lease accepted (24 h), in milliseconds. */
export const MAX_LEASE_MS = 24 * 60 * 60 * 1000;

/** Largest fencing token: PostgreSQL's bigint maximum, 2^63 - 1. */
export const MAX_FENCING_TOKEN = 9_223_372_036_854_775_807n;

/** What a key prefix may look like: letters, digits and `_ : . -`, at most 64 characters (no hash-tag braces). */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_:.-]{0,64}$/;

/** A session id: no `:` (the lock value's separator), no braces (hash tags), no whitespace or control characters. */
const SESSION_ID_PATTERN = /^[^\s:{}\p{Cc}]+$/u;

/** A fencing token: the decimal form of a positive integer, no sign, no leading zero. */
const FENCING_TOKEN_PATTERN = /^[1-9][0-9]{0,18}$/;

/** Checks an intent key as produced by `intentKey()`. */
export function assertIntent(intent: unknown, field = 'intent'): asserts intent is string {
  if (typeof intent !== 'string' || !INTENT_KEY_PATTERN.test(intent)) {
    throw new RmsValidationError(field, `must be an intent key <scope>:<43 base64url characters> as made by intentKey() (got ${preview(intent)})`);
  }
}

/** True for a session id the RMS accepts (see {@link assertSessionId}). */
export function isSessionId(sessionId: unknown): sessionId is string {
  return typeof sessionId === 'string' && sessionId.length > 0 && sessionId.length <= MAX_SESSION_ID_LENGTH && SESSION_ID_PATTERN.test(sessionId);
}

/** Checks a session id: 1 to 128 characters, none of them `:`, `{`, `}`, whitespace or control characters. */
export function assertSessionId(sessionId: unknown, field = 'sessionId'): asserts sessionId is string {
  if (!isSessionId(sessionId)) {
    throw new RmsValidationError(
      field,
      `must be 1 to ${MAX_SESSION_ID_LENGTH} characters without ':', '{', '}', whitespace or control characters (got ${preview(sessionId)})`,
    );
  }
}

/** Checks a fencing token: the decimal string of a positive integer that fits a PostgreSQL bigint. */
export function assertFencingToken(token: unknown, field = 'fencingToken'): asserts token is string {
  if (typeof token !== 'string' || !FENCING_TOKEN_PATTERN.test(token) || BigInt(token) > MAX_FENCING_TOKEN) {
    throw new RmsValidationError(field, `must be the decimal string of an integer from 1 to ${MAX_FENCING_TOKEN} (got ${preview(token)})`);
  }
}

/** Checks a duration in milliseconds: a positive integer no larger than `max`. */
export function assertDurationMs(value: unknown, field: string, max = Number.MAX_SAFE_INTEGER): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw new RmsValidationError(field, `must be a whole number of milliseconds from 1 to ${max} (got ${preview(value)})`);
  }
}

/** Checks a key prefix against {@link KEY_PREFIX_PATTERN}. */
export function assertKeyPrefix(prefix: unknown, field = 'keyPrefix'): asserts prefix is string {
  if (typeof prefix !== 'string' || !KEY_PREFIX_PATTERN.test(prefix)) {
    throw new RmsValidationError(field, `may hold only letters, digits and _ : . - (64 at most) (got ${preview(prefix)})`);
  }
}

/** A short, printable rendering of a refused argument for error messages (long strings are cut). */
export function preview(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 80 ? `${JSON.stringify(value.slice(0, 80))}… (${value.length} characters)` : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  return typeof value;
}

/** Most sagas in flight a limit may allow. */
export const MAX_LIMIT_IN_FLIGHT = 1_000_000;

/** Most starts per second a limit may allow: each start of the last second is one entry in Redis. */
export const MAX_LIMIT_PER_SECOND = 10_000;

/** Most counters one saga is admitted against (its caller's limits and its scope values'). */
export const MAX_LIMIT_COUNTERS = 8;

/** The tag of a caller's counters, as made by `limitTag`. */
const LIMIT_TAG_PATTERN = /^[A-Za-z0-9_-]{16}$/;

/** A counter's id: a rule's index, with the digest of a scope value for a rule per value. */
export const LIMIT_COUNTER_PATTERN = /^[0-9](?::[A-Za-z0-9_-]{22})?$/;

/** Checks a caller's limit tag (see `limitTag`). */
export function assertLimitTag(tag: unknown): asserts tag is string {
  if (typeof tag !== 'string' || !LIMIT_TAG_PATTERN.test(tag)) throw new RmsValidationError('tag', `must be 16 base64url characters as made by limitTag() (got ${preview(tag)})`);
}

/** Checks the ids of a saga's counters: 1 to {@link MAX_LIMIT_COUNTERS}, each matching {@link LIMIT_COUNTER_PATTERN}, none twice. */
export function assertLimitCounters(ids: unknown): asserts ids is readonly string[] {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_LIMIT_COUNTERS) throw new RmsValidationError('counters', `must be 1 to ${MAX_LIMIT_COUNTERS} counters`);
  for (const id of ids) {
    if (typeof id !== 'string' || !LIMIT_COUNTER_PATTERN.test(id)) throw new RmsValidationError('counters', `each must match ${String(LIMIT_COUNTER_PATTERN)} (got ${preview(id)})`);
  }
  if (new Set(ids).size !== ids.length) throw new RmsValidationError('counters', 'must not name a counter twice');
}

/** Checks a limit: absent, or a whole number from 1 to `max`. */
export function assertLimit(value: unknown, field: string, max: number): asserts value is number | undefined {
  if (value !== undefined && !(typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 && value <= max)) {
    throw new RmsValidationError(field, `must be a whole number from 1 to ${max} (got ${preview(value)})`);
  }
}
