/** The outcomes of RMS commands: expected results are values, discriminated by `status`. */

/**
 * Outcome of `reserve`.
 * - `SUCCESS`: the caller holds the lease. `fencingToken` is a decimal string (compare as BigInt);
 *   `expiresAt` is when the lease ends, in epoch ms by the Redis server's clock. A repeated reserve
 *   by the holding session returns the same token and the current expiry, with `alreadyHeld` true.
 * - `DUPLICATE`: the entity already exists; `owner` is whom its marker records (the session is
 *   absent on markers written before owners were kept), so a retry of the same request can tell its
 *   own entity from another's.
 * - `CONFLICT`: another session holds the lease; it ends in at most `retryAfterMs`.
 * - `ENDED` (asked with `answerEnded` only): the session's saga ended holding its key's answer
 *   (recorded by `release` or `free` with `ended`): answer from that saga; nothing changed.
 * `endedCount` (on SUCCESS): how many sessions the intent's ended record holds in Redis.
 */
export type ReserveResult =
  | { status: 'SUCCESS'; sessionId: string; fencingToken: string; expiresAt: number; alreadyHeld: boolean; endedCount: number }
  | { status: 'DUPLICATE'; owner: EntityOwner }
  | { status: 'CONFLICT'; retryAfterMs: number }
  | { status: 'ENDED' };

/**
 * A saga ends holding its key's answer (see `Rms.release` and `Rms.free`): its session's tag is
 * recorded under the intent, kept `retentionMs` from now, so that its key is answered from it.
 */
export interface SessionEnded {
  /** The session whose saga ends (its tag is recorded). */
  sessionId: string;
  /** How long the record lives from now, ms: the key retention. */
  retentionMs: number;
}

/** Who created (or, by read-repair, was recorded for) an entity: what `entity_exists` holds. */
export interface EntityOwner {
  /**
   * The tag of the session of the saga that created it (its first characters, see `sessionTag`),
   * when the marker records one: enough to tell that saga's own retry from a duplicate.
   */
  sessionTag?: string;
  fencingToken: string;
}

/** Outcome of `extend`: `EXTENDED` until the new `expiresAt` (epoch ms, server clock), or `LOST`. */
export type ExtendResult = { status: 'EXTENDED'; expiresAt: number } | { status: 'LOST' };

/**
 * Outcome of `finalize`: `FINALIZED` (also on a retry after success), `LOST` (nothing written), or
 * `FREED` (nothing written: the marker is the tombstone of this token or a newer one, so the
 * caller's saga was already undone and this is a late attempt).
 */
export type FinalizeResult = { status: 'FINALIZED' } | { status: 'LOST' } | { status: 'FREED' };

/**
 * Outcome of `raise`: `RAISED` with the caller's new token (the lease keeps its end), or `LOST` when
 * the lease is not the caller's (nothing changed).
 */
export type RaiseResult = { status: 'RAISED'; fencingToken: string } | { status: 'LOST' };

/** Outcome of `release`: `RELEASED`, or `NOT_OWNER` when the lease is not the caller's (left intact). */
export type ReleaseResult = { status: 'RELEASED' } | { status: 'NOT_OWNER' };

/** Outcome of `free`: `FREED`, or `NOT_OWNER` when the marker is absent or records another token (left intact). */
export type FreeResult = { status: 'FREED' } | { status: 'NOT_OWNER' };

/**
 * Outcome of `markExists`: `MARKED` (a newer marker already in place is kept), or `FREED` when the
 * saga of this token (or a newer one) has freed the intent since: nothing is marked.
 */
export type MarkExistsResult = { status: 'MARKED' } | { status: 'FREED' };

/** What the RMS knows about one intent, read at one instant. */
export interface IntentInspection {
  /** The intent key inspected. */
  intent: string;
  /** The lease holder, when the intent is being processed. */
  holder?: { sessionId: string; fencingToken: string; remainingMs: number };
  /** Whether `entity_exists` is set. */
  exists: boolean;
  /** The token recorded in `entity_exists`, when set. */
  existsToken?: string;
  /** The session tag recorded in `entity_exists`, when set with one. */
  existsSessionTag?: string;
  /** The token whose saga freed the intent, when `entity_exists` is its tombstone. */
  freedToken?: string;
  /** How long `entity_exists` (marker or tombstone) lives on, when it is set with a TTL. */
  markerRemainingMs?: number;
}

/** Options of {@link Rms}. */
export interface RmsOptions {
  /**
   * Prefix of every key, e.g. `'rs:'`; isolates tenants and test runs. Letters, digits and `_ : . -`,
   * at most 64 characters.
   */
  keyPrefix: string;
  /**
   * Longest wait for one RMS command before it rejects with `RmsUnavailableError`. The client's own
   * `commandTimeout` covers a single instance; this deadline also covers commands a Redis Cluster client
   * queues while no node is reachable, which ioredis would otherwise hold indefinitely.
   * @default the client's `commandTimeout` option (set by `createRedis`), else 2000
   */
  commandTimeoutMs?: number;
}

/** The answer of `admit`: counted in (or counted already), or refused by a limit with how long to wait. */
export type AdmitResult =
  | { status: 'ADMITTED'; alreadyCounted: boolean }
  | { status: 'LIMITED'; retryAfterMs: number; limit: 'IN_FLIGHT' | 'RATE' };

/** The answer of `countOut`: the session counted in some counter (now in none), or in none. */
export type CountOutResult = { status: 'COUNTED_OUT' } | { status: 'NOT_COUNTED' };

/** One counter a saga is admitted against: its id and its limits (absent: none of that kind). */
export interface LimitCounter {
  /** `<rule index>` for the caller's, `<rule index>:<digest>` for a scope value's (see `limitCounterId`). */
  id: string;
  inFlight?: number;
  perSecond?: number;
}
