/**
 * The gate: one reservation of an intent, answered by Redis, with PostgreSQL asked only on SUCCESS.
 * Used by `SagaClient.start` (before any workflow exists) and by the saga's own first step (to
 * confirm a reservation the client took, or to reserve when a plain Temporal client started it).
 */
import type { Pool } from 'pg';
import type { FencedTable, TransitionResult } from './db';
import { endedSessions, recordEndedSession } from './db/ended-sessions';
import type { ClaimableRow } from './db/fenced-table';
import { isRowId } from './db/fenced-table';
import type { SagaMetrics } from './metrics';
import { isSessionId, sessionTag, type EntityOwner, type Rms } from './rms';

/** What the gate answers. */
export type GateAnswer =
  | {
      status: 'SUCCESS';
      fencingToken: string;
      expiresAt: number;
      /** The session already held this lease (a retry of the same saga): same token, not lengthened. */
      alreadyHeld: boolean;
    }
  /** The entity exists; `owner` says whose saga created it (the caller's own, on a retry). */
  | { status: 'DUPLICATE'; owner: EntityOwner }
  | { status: 'CONFLICT'; retryAfterMs: number }
  /**
   * Asked with `answerEnded` only: the session's own saga ended holding its key's answer (undone,
   * expired, an operation done; see {@link recordSagaEnd}): the caller answers from that saga,
   * whoever holds the intent now. No lease is held.
   */
  | { status: 'ENDED' };

/** One reservation request. */
export interface GateRequest {
  /** The table of the saga type's entity rows: the truth check looks the intent up there. */
  table: FencedTable;
  intentKey: string;
  sessionId: string;
  leaseMs: number;
  /**
   * Look first for the session's own saga having ended here (ENDED): the gate of a caller that
   * answers a retry of its key from that key's saga. @default false (the saga's own reservation)
   */
  answerEnded?: boolean;
  /**
   * The key earlier versions gave the same intent (its text not in NFC; see SagaInput): an entity or
   * a holder under it answers DUPLICATE or CONFLICT as one under `intentKey` would.
   */
  legacyIntentKey?: string;
  /**
   * The fencing token this session's gate answered SUCCESS with, after its truth check (a saga
   * confirming SagaClient's reservation): while the session still holds that very lease, nothing
   * PostgreSQL could say has changed the answer, and the check is not repeated. A row registered
   * since by an older holder's late finalise is found by the saga's fenced write (DUPLICATE), as it
   * would be here. A lease taken anew (it ended, Redis lost it) is checked as any. @default none
   */
  confirms?: string;
}

/**
 * What the gate and the read-repair work with: the RMS, PostgreSQL, and how long a marker they write
 * lives (ENTITY_EXISTS_TTL_MS; none when undefined).
 */
export interface GateDeps {
  rms: Rms;
  pool: Pool;
  existsTtlMs?: number;
  /**
   * How long a saga that ended is remembered as the answer of its key (IDEMPOTENCY_RETENTION_MS): its
   * record in Redis and PostgreSQL (see {@link recordSagaEnd}). @default {@link DEFAULT_KEY_RETENTION_MS}
   */
  keyRetentionMs?: number;
  /** Counts the leases taken and lost here, and the read-repairs. @default none */
  metrics?: Pick<SagaMetrics, 'leaseTaken' | 'leaseLost' | 'readRepaired'>;
}

/** How long a key is answered from its ended saga when {@link GateDeps.keyRetentionMs} is not given: 7 days. */
export const DEFAULT_KEY_RETENTION_MS = 604_800_000;

/**
 * Reserves `intentKey` for `sessionId`: one Lua call in Redis; on SUCCESS, one point lookup in
 * PostgreSQL, the truth, which Redis may have forgotten (a restart, a flush, an expired marker). A
 * REGISTERED or COMPLETED row of another token makes the answer DUPLICATE: Redis is repaired (the
 * marker records the row's owner) and the lease just taken is given back, unless that entity's saga
 * freed the intent meanwhile (then the SUCCESS stands). Any other row whose token is at or above the
 * new one gets the new token raised above it (`Rms.raise`): the row's token is the one Redis forgot. Errors are the RMS's and PostgreSQL's own; a lease taken before a failed lookup is given back.
 */
export function reserveIntent(deps: GateDeps, req: GateRequest): Promise<GateAnswer> {
  // One key (an intent in NFC, nearly every one): its answer as it comes, with no promise of ours around it.
  return req.legacyIntentKey === undefined ? reserveKey(deps, req) : reserveKeys(deps, req, req.legacyIntentKey);
}

/** {@link reserveIntent} of an intent with an earlier key too. */
async function reserveKeys(deps: GateDeps, req: GateRequest, legacyIntentKey: string): Promise<GateAnswer> {
  const answer = await reserveKey(deps, req);
  if (answer.status !== 'SUCCESS') return answer;
  // Only a lease this call took goes back: one already held is a running saga's.
  const giveBack = async () => {
    if (!answer.alreadyHeld) await deps.rms.release({ intent: req.intentKey, sessionId: req.sessionId, fencingToken: answer.fencingToken });
  };
  let earlier: GateAnswer | undefined;
  try {
    earlier = await underLegacyKey(deps, req.table, legacyIntentKey, req.sessionId);
  } catch (err) {
    await giveBack().catch(() => undefined);
    throw err;
  }
  if (earlier === undefined) return answer;
  // The intent is taken under its earlier key: the lease on the new one goes back.
  await giveBack();
  return earlier;
}

/** Who created the entity of `row`, as a marker records it: its token and, when it has one, its session's tag. */
export function entityOwnerOf(row: { lastFencingToken: string; sessionId: string }): EntityOwner {
  return { fencingToken: row.lastFencingToken, ...(isSessionId(row.sessionId) ? { sessionTag: sessionTag(row.sessionId) } : {}) };
}

/**
 * What the intent's earlier key holds, for an intent whose text was not in NFC (keyed as it came by
 * earlier versions): an entity (in Redis, or a REGISTERED or COMPLETED row in PostgreSQL) is a
 * DUPLICATE, a lease or a row being written a CONFLICT; undefined when it holds nothing, or when
 * the holder is `sessionId` itself (a retry of that saga's own key: the caller answers from the
 * saga). Paid only by such intents: one Redis call and one point lookup.
 */
async function underLegacyKey(deps: GateDeps, table: FencedTable, legacyKey: string, sessionId: string): Promise<GateAnswer | undefined> {
  const held = await deps.rms.inspect(legacyKey);
  if (held.exists) return { status: 'DUPLICATE', owner: { fencingToken: held.existsToken ?? '0', ...(held.existsSessionTag ? { sessionTag: held.existsSessionTag } : {}) } };
  if (held.holder) return held.holder.sessionId === sessionId ? undefined : { status: 'CONFLICT', retryAfterMs: held.holder.remainingMs };
  const row = await table.find(deps.pool, legacyKey);
  if (row && (row.status === 'REGISTERED' || row.status === 'COMPLETED')) {
    return { status: 'DUPLICATE', owner: entityOwnerOf(row) };
  }
  // A row under way whose lease Redis no longer shows: its saga may still finalise it.
  if (row && row.status === 'PROCESSING') return { status: 'CONFLICT', retryAfterMs: CREATION_RUNNING_RETRY_MS };
  return undefined;
}

/** {@link reserveIntent} of one key. */
async function reserveKey(deps: GateDeps, req: GateRequest): Promise<GateAnswer> {
  const { rms } = deps;
  const reserved = await rms.reserve({ intent: req.intentKey, sessionId: req.sessionId, leaseMs: req.leaseMs, answerEnded: req.answerEnded === true });
  if (reserved.status !== 'SUCCESS') return reserved;
  if (!reserved.alreadyHeld) deps.metrics?.leaseTaken(req.intentKey);
  else if (req.confirms === reserved.fencingToken) return { status: 'SUCCESS', fencingToken: reserved.fencingToken, expiresAt: reserved.expiresAt, alreadyHeld: true };
  const lease = { intent: req.intentKey, sessionId: req.sessionId, fencingToken: reserved.fencingToken };
  let row;
  try {
    const found = await req.table.findWithEnded(deps.pool, req.intentKey);
    const { ended } = found;
    row = found.row;
    await restoreEnded(deps, req.intentKey, reserved.endedCount, ended);
    if (endedHere(req, ended)) {
      if (!reserved.alreadyHeld) await rms.release(lease);
      return { status: 'ENDED' };
    }
  } catch (err) {
    // Nothing will use a lease this call took; one that was already held belongs to a running saga.
    if (!reserved.alreadyHeld) await rms.release(lease).catch(() => undefined);
    throw err;
  }
  if (row && (row.status === 'REGISTERED' || row.status === 'COMPLETED') && row.lastFencingToken !== reserved.fencingToken) {
    const owner = entityOwnerOf(row);
    const repaired = await markEntityExists(deps, req.table, req.intentKey, owner, { endedRestored: true });
    // FREED: that entity's saga was undone and freed the intent after the lookup; the lease stands,
    // and its write will take over the undone row with a higher token.
    if (repaired === 'MARKED') {
      await rms.release(lease);
      return { status: 'DUPLICATE', owner };
    }
  }
  if (row && !reserved.alreadyHeld && BigInt(row.lastFencingToken) >= BigInt(reserved.fencingToken)) {
    // The row holds a token Redis no longer knows of, at or above the new one: the clock that issued
    // it is behind the one that issued the row's (stepped back, or a failover). Raise the new token
    // above the row's, or the saga's fenced write would lose to a row it should take over.
    return raiseAbove(deps, lease, row.lastFencingToken, reserved.expiresAt);
  }
  return { status: 'SUCCESS', fencingToken: reserved.fencingToken, expiresAt: reserved.expiresAt, alreadyHeld: reserved.alreadyHeld };
}

/**
 * Restores in Redis the ended sessions PostgreSQL recorded for the intent (`ended`) when Redis holds
 * fewer (`inRedis`: it lost them), before this call's lease or a read-repair can answer a retry of
 * one of their keys from another request's hold.
 */
async function restoreEnded(deps: GateDeps, intentKey: string, inRedis: number, ended: readonly string[]): Promise<void> {
  if (ended.length > inRedis) await deps.rms.rememberEnded({ intent: intentKey, sessionTags: ended, retentionMs: deps.keyRetentionMs ?? DEFAULT_KEY_RETENTION_MS });
}

/** Whether the caller asked `answerEnded` and its own session's saga ended here (a retry of its key, whose record Redis had lost). */
function endedHere(req: { sessionId: string; answerEnded?: boolean }, ended: readonly string[]): boolean {
  return req.answerEnded === true && ended.includes(sessionTag(req.sessionId));
}

/**
 * Records that the saga of `sessionId` ends holding its key's answer while it lets go of `intentKey`
 * (undone, expired before its write, an entity operation done): first in PostgreSQL, the truth, then
 * in Redis, in the same script that lets go (`free` or `release` with `ended`), so that no other
 * request can take the intent before a retry of this saga's key is answered from it.
 */
export async function recordSagaEnd(deps: GateDeps, intentKey: string, sessionId: string): Promise<{ retentionMs: number }> {
  await recordEndedSession(deps.pool, { intentKey, sessionTag: sessionTag(sessionId) });
  return { retentionMs: deps.keyRetentionMs ?? DEFAULT_KEY_RETENTION_MS };
}

/**
 * How long the caller of an operation is told to wait (CONFLICT) while the entity's creating saga
 * still runs: its row is not COMPLETED yet, and an operation never interleaves with that saga.
 */
export const CREATION_RUNNING_RETRY_MS = 1000;

/** What {@link lockEntity} answers: the gate's SUCCESS, CONFLICT or ENDED, or that there is no such entity. */
export type LockAnswer = Extract<GateAnswer, { status: 'SUCCESS' | 'CONFLICT' | 'ENDED' }> | { status: 'NOT_FOUND' };

/** One request for an entity's lock (an EntityOperation's gate). */
export interface LockRequest {
  /** The entity's table. */
  table: FencedTable;
  /** The entity's row id. */
  entityId: string;
  /** The lock's key (`<scope>-lock:…`, see prepareSaga). */
  intentKey: string;
  sessionId: string;
  leaseMs: number;
  /** As {@link GateRequest.answerEnded}. @default false */
  answerEnded?: boolean;
  /**
   * Who asks (the saga's owner): only an entity created for this owner is found (and one created for
   * no one, where its table opts in: `legacy.ownerlessRows`); any other is NOT_FOUND, as a missing
   * one is.
   */
  owner: string;
}

/**
 * Takes the lock of an entity for `sessionId`. First one point lookup of the entity's row, before
 * Redis is touched: no row, another owner's, or one whose creating saga was undone → NOT_FOUND,
 * holding nothing. Then a lease on the lock key, as `reserveIntent` takes one (one Lua call; the same
 * session gets its token back): a lock someone holds → CONFLICT; on SUCCESS the row is read again
 * under the lock (it may have changed), and must be COMPLETED and still the owner's: else NOT_FOUND
 * (a released entity too, once the reservation found no retry of the operation that released it),
 * or CONFLICT for a row whose creating saga still runs (retry after {@link CREATION_RUNNING_RETRY_MS}),
 * the lock just taken given back. A row already claimed with a token at or above the new one (Redis
 * forgot the lock, and the clock issuing the new token is behind) gets the new token raised above it,
 * as the truth check of a reservation does.
 */
export async function lockEntity(deps: GateDeps, req: LockRequest): Promise<LockAnswer> {
  const { rms } = deps;
  // An id no row can have (past bigint, say) is a missing entity, answered before any lease is taken.
  if (!isRowId(req.entityId)) return { status: 'NOT_FOUND' };
  // Whose the entity is, asked before the lease: a caller that may not see it takes no lease at all,
  // so its requests, however many, never hold the lock while its owner asks (a CONFLICT to the owner),
  // and it learns nothing of the owner's work on it (a held lock would be its CONFLICT).
  if (!visibleTo(await req.table.findById(deps.pool, req.entityId), req.owner, req.table)) return { status: 'NOT_FOUND' };
  const reserved = await rms.reserve({ intent: req.intentKey, sessionId: req.sessionId, leaseMs: req.leaseMs, answerEnded: req.answerEnded === true });
  if (reserved.status === 'ENDED') return reserved;
  if (reserved.status !== 'SUCCESS') {
    // A lock is never finalised, so its key never has an entity marker (a shared tag is 2⁻⁹⁶ unlikely).
    return reserved.status === 'CONFLICT' ? reserved : { status: 'CONFLICT', retryAfterMs: CREATION_RUNNING_RETRY_MS };
  }
  if (!reserved.alreadyHeld) deps.metrics?.leaseTaken(req.intentKey);
  const lease = { intent: req.intentKey, sessionId: req.sessionId, fencingToken: reserved.fencingToken };
  const giveBack = async () => {
    if (!reserved.alreadyHeld) await rms.release(lease).catch(() => undefined);
  };
  let row;
  try {
    const [found, ended] = await Promise.all([req.table.findById(deps.pool, req.entityId), endedSessions(deps.pool, req.intentKey)]);
    row = found;
    await restoreEnded(deps, req.intentKey, reserved.endedCount, ended);
    if (endedHere(req, ended)) {
      await giveBack();
      return { status: 'ENDED' };
    }
  } catch (err) {
    await giveBack();
    throw err;
  }
  // The row as it is under the lock: another owner's entity is answered as a missing one.
  if (!visibleTo(row, req.owner, req.table)) {
    await giveBack();
    return { status: 'NOT_FOUND' };
  }
  // Released: no operation runs on it again (a retry of the one that released it was answered ENDED).
  if (row.status === 'RELEASED') {
    await giveBack();
    return { status: 'NOT_FOUND' };
  }
  if (row.status !== 'COMPLETED') {
    await giveBack();
    return { status: 'CONFLICT', retryAfterMs: CREATION_RUNNING_RETRY_MS };
  }
  if (row.lastOperationToken !== null && !reserved.alreadyHeld && BigInt(row.lastOperationToken) >= BigInt(reserved.fencingToken)) {
    return raiseAbove(deps, lease, row.lastOperationToken, reserved.expiresAt);
  }
  return { status: 'SUCCESS', fencingToken: reserved.fencingToken, expiresAt: reserved.expiresAt, alreadyHeld: reserved.alreadyHeld };
}

/**
 * Whether `owner` may see an entity: its row exists, its creating saga was not undone, and it was
 * created for `owner`, or for no one (a row from before owners were recorded) where `table` opts in
 * (`legacy.ownerlessRows`). A released entity is still its owner's to see: the lock's reservation
 * answers a retry of the operation that released it (ENDED), and any other operation NOT_FOUND.
 */
function visibleTo(row: ClaimableRow | undefined, owner: string, table: FencedTable): row is ClaimableRow {
  if (row === undefined || row.status === 'FAILED' || row.status === 'COMPENSATED') return false;
  return row.createdBy === owner || (row.createdBy === '' && table.legacy.ownerlessRows);
}

/**
 * Gives the lease just taken a token above `floor` (a token PostgreSQL's row already holds), keeping
 * its end. LOST: the lease ended in the meantime (a lease shorter than this call); answered as
 * reserve would, CONFLICT.
 */
async function raiseAbove(
  deps: GateDeps,
  lease: { intent: string; sessionId: string; fencingToken: string },
  floor: string,
  expiresAt: number,
): Promise<Extract<GateAnswer, { status: 'SUCCESS' | 'CONFLICT' }>> {
  const raised = await deps.rms.raise({ ...lease, floor });
  if (raised.status === 'LOST') {
    deps.metrics?.leaseLost(lease.intent);
    return { status: 'CONFLICT', retryAfterMs: 0 };
  }
  return { status: 'SUCCESS', fencingToken: raised.fencingToken, expiresAt, alreadyHeld: false };
}

/**
 * Read-repair: records in Redis an entity PostgreSQL showed to exist (`owner`'s token). A repair is a
 * read of PostgreSQL and then a write here, and the entity may be undone in between: `free` leaves a
 * tombstone that refuses the late write, and if Redis lost that tombstone too, the row is read again
 * after the write and the marker taken back when the row is no longer that entity's. `FREED` means
 * nothing stays marked. The intent's ended sessions are restored from PostgreSQL first, unless the
 * caller just did.
 */
export async function markEntityExists(
  deps: GateDeps,
  table: FencedTable,
  intentKey: string,
  owner: EntityOwner,
  options: {
    /** The caller restored the intent's ended sessions just now (the gate's truth check). @default false */
    endedRestored?: boolean;
  } = {},
): Promise<'MARKED' | 'FREED'> {
  // Redis may have lost the ended sessions with the marker: back before the marker, or a retry of an
  // ended saga's key would be answered DUPLICATE from it (a late finalise after a flush, say).
  if (options.endedRestored !== true) {
    await restoreEnded(deps, intentKey, 0, await endedSessions(deps.pool, intentKey));
  }
  const repaired = await markAndCheck(deps, table, intentKey, owner);
  deps.metrics?.readRepaired(intentKey, repaired === 'MARKED' ? 'marked' : 'freed');
  return repaired;
}

async function markAndCheck(deps: GateDeps, table: FencedTable, intentKey: string, owner: EntityOwner): Promise<'MARKED' | 'FREED'> {
  const marked = await deps.rms.markExists({ intent: intentKey, ...owner, existsTtlMs: deps.existsTtlMs });
  if (marked.status === 'FREED') return 'FREED';
  const row = await table.find(deps.pool, intentKey);
  if (row && (row.status === 'REGISTERED' || row.status === 'COMPLETED') && row.lastFencingToken === owner.fencingToken) return 'MARKED';
  await deps.rms.free({ intent: intentKey, fencingToken: owner.fencingToken, existsTtlMs: deps.existsTtlMs });
  return 'FREED';
}

/**
 * Undoes a creating saga's entity: its row COMPENSATED, fenced by the saga's token (a row a newer
 * saga owns is left alone: FENCED_OUT); then, when `freeIntent` and the row was the saga's, its
 * intent freed (the marker becomes the token's tombstone, so a late finalise cannot mark it again),
 * and the saga's lease given back; before either, the saga is recorded as ended ({@link recordSagaEnd}),
 * so a retry of its key is answered from it. A COMPLETED row (a finished entity) is an
 * ILLEGAL_TRANSITION and nothing changes. The saga's own compensation and an operator's
 * `SagaClient.settle` both run it.
 */
export async function undoEntity(
  deps: GateDeps,
  table: FencedTable,
  owner: { intentKey: string; sessionId: string; fencingToken: string },
  freeIntent: boolean,
): Promise<TransitionResult> {
  const marked = await table.markCompensated(deps.pool, owner);
  if (marked.status === 'ILLEGAL_TRANSITION') return marked;
  // The saga ends undone: its key keeps its answer after another request takes the intent.
  const ended = await recordSagaEnd(deps, owner.intentKey, owner.sessionId);
  if (freeIntent && marked.status === 'OK') {
    await deps.rms.free({ intent: owner.intentKey, fencingToken: owner.fencingToken, existsTtlMs: deps.existsTtlMs, ended: { sessionId: owner.sessionId, ...ended } });
  }
  await deps.rms.release({ intent: owner.intentKey, sessionId: owner.sessionId, fencingToken: owner.fencingToken, ended });
  return marked;
}
