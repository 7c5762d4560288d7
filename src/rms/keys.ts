/**
 * The Redis keys of one intent: `<prefix>p{<tag>}` (the lease), `<prefix>e{<tag>}` (the entity
 * marker) and `<prefix>d{<tag>}` (the sessions that ended). All share the hash tag `{<tag>}`, so every
 * script touches one slot and runs unchanged on Redis Cluster.
 *
 * The tag is a 96-bit digest of the intent key (16 base64url characters), not the key itself: a
 * reservation then costs about one Redis key of the smallest size class (bench/redis-memory.ts).
 * Two intents share a tag with probability at most n²/2⁹⁷ among n intents held in Redis at once
 * (leases and markers within their retention): below 10⁻¹³ at 10⁸. A shared tag can only refuse a
 * request wrongly (CONFLICT or DUPLICATE for another intent's key); it never admits a duplicate, since
 * PostgreSQL keeps the whole intent key UNIQUE and every write is fenced there.
 */
import { hash } from 'node:crypto';

/** The keys of one intent under a prefix. */
export interface IntentKeys {
  /** `<prefix>p{<tag>}`: the lease, value `<sessionId>:<fencingToken>`, expires with the lease. */
  processing: string;
  /**
   * `<prefix>e{<tag>}`: the entity exists, value `<session tag>:<fencingToken>` of the saga that
   * created it (or that read-repair found in PostgreSQL; see {@link sessionTag});
   * `{freed}:<fencingToken>` once that saga freed it.
   * Lives as long as the configured marker retention.
   */
  entityExists: string;
  /**
   * `<prefix>d{<tag>}`: a set of the session tags (see {@link sessionTag}) of the sagas that ended
   * holding their key's answer without holding the marker or the lease (undone, expired, an
   * operation done), so that a retry of such a key is answered from its own saga. Lives as long as
   * the key retention given when a member is added; PostgreSQL keeps the same record.
   */
  endedSessions: string;
}

/**
 * The hash tag of `intent`: base64url of the first 96 bits of its SHA-256. 96 bits are 16 whole
 * base64url characters, so the digest's own base64url is cut there (no Buffer made: a third of the cost).
 */
export function intentTag(intent: string): string {
  return hash('sha256', intent, 'base64url').slice(0, 16);
}

/**
 * The keys of `intent` under `prefix`. Callers validate both first (see `assertIntent`,
 * `assertKeyPrefix`): the prefix may not contain a brace, or the hash tag would be wrong.
 */
export function intentKeys(prefix: string, intent: string): IntentKeys {
  const tag = `{${intentTag(intent)}}`;
  return { processing: `${prefix}p${tag}`, entityExists: `${prefix}e${tag}`, endedSessions: `${prefix}d${tag}` };
}

/**
 * Characters of a session id an `entity_exists` marker keeps: 66 bits of a saga's 22-character digest
 * (sagaSessionId). The marker's owner only tells a retry of the creating request (same session) from
 * a duplicate; tokens, unique per intent, name the owner for everything else (finalize, free, repair).
 * Two sessions of one intent share a tag with probability 2⁻⁶⁶ per pair: then the duplicate is taken
 * for a retry and its caller gets an error (its own saga does not exist), never a second entity. With
 * the token, the value fits Redis's 48-byte allocation (bench/redis-memory.ts).
 */
export const SESSION_TAG_LENGTH = 11;

/** The tag of `sessionId` a marker records: its first {@link SESSION_TAG_LENGTH} characters. */
export function sessionTag(sessionId: string): string {
  return sessionId.slice(0, SESSION_TAG_LENGTH);
}

/** The value of an `entity_exists` marker: `<session tag>:<fencingToken>`. */
export function markerValue(sessionId: string, fencingToken: string): string {
  return `${sessionTag(sessionId)}:${fencingToken}`;
}

/** The lock value stored in `processing`: `<sessionId>:<fencingToken>`. */
export function lockValue(sessionId: string, fencingToken: string): string {
  return `${sessionId}:${fencingToken}`;
}

/**
 * The hash tag of a caller's limit counters (see {@link limitKeys}): base64url of the first 96 bits of
 * the SHA-256 of the saga type and the caller (an owner, bounded to 64 characters, no personal data).
 * Every counter of one caller shares it, so admitting a saga against all of them is one script on one
 * slot; it is another slot than the intent's, so a SUCCESS pays one more round trip for it.
 */
export function limitTag(type: string, caller: string): string {
  return hash('sha256', `limits\u0000${type}\u0000${caller}`, 'base64url').slice(0, 16);
}

/** The keys of one limit counter of a caller. */
export interface LimitKeys {
  /** `<prefix>f{<tag>}<counter>`: the sagas in flight, member = session id, score = when the entry stops counting. */
  inFlight: string;
  /** `<prefix>s{<tag>}<counter>`: the last second's starts, member = `<µs>:<session id>`, score = epoch ms. */
  starts: string;
}

/** The keys of `counter` of the caller tagged `tag` (see {@link limitTag}) under `prefix`. */
export function limitKeys(prefix: string, tag: string, counter: string): LimitKeys {
  return { inFlight: `${prefix}f{${tag}}${counter}`, starts: `${prefix}s{${tag}}${counter}` };
}
