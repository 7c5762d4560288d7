/**
 * The Reservation Management System: leases on intents with fencing tokens, and the "entity exists"
 * marker, over one Redis instance or a Redis Cluster. Every command is one Lua script on the keys of
 * one intent (see `lua/` and {@link intentKeys}); replies become values in `replies.ts`.
 */
import { Cluster, type Redis } from 'ioredis';
import { RmsUnavailableError, RmsValidationError, toRmsError } from './errors';
import { intentKeys, limitKeys, lockValue, markerValue, sessionTag as sessionTagOf, type IntentKeys } from './keys';
import {
  toAdmitResult,
  toCountOutResult,
  toExtendResult,
  toFinalizeResult,
  toFreeResult,
  toIntentInspection,
  toMarkExistsResult,
  toRaiseResult,
  toReleaseResult,
  toRememberEndedResult,
  toReserveResult,
} from './replies';
import { registerScripts, type RmsClient } from './scripts';
import type {
  AdmitResult,
  CountOutResult,
  ExtendResult,
  FinalizeResult,
  FreeResult,
  IntentInspection,
  LimitCounter,
  MarkExistsResult,
  RaiseResult,
  ReleaseResult,
  ReserveResult,
  RmsOptions,
  SessionEnded,
} from './types';
import {
  MAX_LEASE_MS,
  MAX_LIMIT_IN_FLIGHT,
  MAX_LIMIT_PER_SECOND,
  assertDurationMs,
  assertFencingToken,
  assertIntent,
  assertKeyPrefix,
  assertLimit,
  assertLimitCounters,
  assertLimitTag,
  assertSessionId,
} from './validation';

/** Deadline of one command when neither the options nor the client name one. */
const DEFAULT_COMMAND_TIMEOUT_MS = 2000;

/** Longest `commandTimeoutMs` accepted. */
const MAX_COMMAND_TIMEOUT_MS = 600_000;

/**
 * The RMS over an ioredis client (single instance or Cluster). It does not own the client: close the
 * client yourself. Every method validates its input first ({@link RmsValidationError}, nothing sent),
 * then runs one script; Redis out of reach or too slow gives {@link RmsUnavailableError}. Every
 * method is safe to retry with the same arguments after an error, since a reply can be lost after
 * the script ran.
 */
export class Rms {
  private readonly client: RmsClient;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  /**
   * Whether the client bounds every command by itself, within our deadline: a single-instance client
   * arms its `commandTimeout` on each command it sends or queues; a Cluster client does not while no
   * node is reachable.
   */
  private readonly clientBounds: boolean;

  /**
   * @param redis an ioredis client, e.g. from `createRedis`; the RMS scripts are registered on it.
   * @throws RmsValidationError when an option is malformed.
   */
  constructor(redis: Redis | Cluster, options: RmsOptions) {
    assertObject(options, 'options');
    assertKeyPrefix(options.keyPrefix);
    if (options.commandTimeoutMs !== undefined) assertDurationMs(options.commandTimeoutMs, 'commandTimeoutMs', MAX_COMMAND_TIMEOUT_MS);
    this.prefix = options.keyPrefix;
    const own = clientCommandTimeout(redis);
    this.timeoutMs = options.commandTimeoutMs ?? own ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.clientBounds = !(redis instanceof Cluster) && own !== undefined && own <= this.timeoutMs;
    this.client = registerScripts(redis);
  }

  /**
   * Takes the lease of `intent` for `sessionId` for `leaseMs`, in one atomic step:
   * `DUPLICATE` (with the owner its marker records) when the entity exists; `CONFLICT` with the
   * holder's remaining lease when another session holds it; otherwise `SUCCESS` with a fencing token
   * above every earlier token Redis still knows of (a tombstone's) and at least the server's time in
   * microseconds, which keeps it above earlier ones Redis has let go (see `lua/reserve.lua`; the gate
   * raises it above PostgreSQL's when needed). When `sessionId` already holds the lease (a retry), the
   * answer is the same `SUCCESS` with the same token and the current expiry, `alreadyHeld` set: the
   * lease is not lengthened. With `answerEnded`, first of all: `ENDED` when the session's saga ended
   * holding its key's answer (recorded by {@link release} or {@link free} with `ended`), and nothing
   * changes.
   */
  reserve(input: { intent: string; sessionId: string; leaseMs: number; answerEnded?: boolean }): Promise<ReserveResult> {
    // Every answer of the gate is one of these: no promise but the reply's, and no closure (run()'s
    // work written out). Refused arguments reject, as from every method.
    let sessionId: string;
    let keys: IntentKeys;
    let lease: string;
    let own: string;
    try {
      assertObject(input, 'input');
      const { intent, leaseMs } = input;
      sessionId = input.sessionId;
      assertIntent(intent);
      assertSessionId(sessionId);
      assertDurationMs(leaseMs, 'leaseMs', MAX_LEASE_MS);
      keys = intentKeys(this.prefix, intent);
      lease = String(leaseMs);
      own = input.answerEnded === true ? sessionTagOf(sessionId) : '';
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what the checks threw, as an async method rejects with it
      return Promise.reject(err);
    }
    let call: Promise<unknown>;
    try {
      call = this.client.rmsReserve(keys.processing, keys.entityExists, keys.endedSessions, sessionId, lease, own);
    } catch (err) {
      return Promise.reject(toRmsError(err, 'reserve'));
    }
    return this.reserved(call, sessionId);
  }

  /** {@link reserve}'s reply (see {@link run}). */
  private async reserved(call: Promise<unknown>, sessionId: string): Promise<ReserveResult> {
    let reply: unknown;
    try {
      reply = await (this.clientBounds ? call : this.withinDeadline('reserve', call));
    } catch (err) {
      throw toRmsError(err, 'reserve');
    }
    return toReserveResult(reply, sessionId);
  }

  /**
   * Sets the lease to end `leaseMs` from now, only while the lock still holds `<sessionId>:<fencingToken>`:
   * `EXTENDED` with the new expiry, or `LOST` (expired or taken over; an expired lease is never re-taken).
   */
  async extend(input: { intent: string; sessionId: string; fencingToken: string; leaseMs: number }): Promise<ExtendResult> {
    assertObject(input, 'input');
    const { intent, sessionId, fencingToken, leaseMs } = input;
    assertIntent(intent);
    assertSessionId(sessionId);
    assertFencingToken(fencingToken);
    assertDurationMs(leaseMs, 'leaseMs', MAX_LEASE_MS);
    const keys = intentKeys(this.prefix, intent);
    return this.run('extend', () => this.client.rmsExtend(keys.processing, lockValue(sessionId, fencingToken), String(leaseMs)), toExtendResult);
  }

  /**
   * Gives the holder of the lease a new token above `floor` (a token PostgreSQL already holds for the
   * intent) and above its own, keeping the lease's end: `RAISED` with the new token, or `LOST` when
   * the lease is not `<sessionId>:<fencingToken>` (nothing changed). The gate's truth check uses it
   * when a row already carries a token at or above the one just issued (a clock that stepped back).
   */
  async raise(input: { intent: string; sessionId: string; fencingToken: string; floor: string }): Promise<RaiseResult> {
    assertObject(input, 'input');
    const { intent, sessionId, fencingToken, floor } = input;
    assertIntent(intent);
    assertSessionId(sessionId);
    assertFencingToken(fencingToken);
    assertFencingToken(floor, 'floor');
    const keys = intentKeys(this.prefix, intent);
    return this.run('raise', () => this.client.rmsRaise(keys.processing, lockValue(sessionId, fencingToken), floor), toRaiseResult);
  }

  /**
   * Promotes the lease to "the entity exists", atomically and only while the caller holds the lease:
   * `entity_exists` records `<session tag>:<fencingToken>` (see `sessionTag`; with `existsTtlMs` when given, else without a TTL) and the
   * lease is deleted → `FINALIZED`. A retry after success finds its own token recorded → `FINALIZED`
   * again. Otherwise `LOST`, with nothing written: a holder whose lease expired never marks the entity.
   * `FREED`, with nothing written, when the marker is the tombstone of this token or a newer one (the
   * saga was undone before this late attempt ran, even if it still holds the lease).
   */
  async finalize(input: { intent: string; sessionId: string; fencingToken: string; existsTtlMs?: number }): Promise<FinalizeResult> {
    assertObject(input, 'input');
    const { intent, sessionId, fencingToken, existsTtlMs } = input;
    assertIntent(intent);
    assertSessionId(sessionId);
    assertFencingToken(fencingToken);
    if (existsTtlMs !== undefined) assertDurationMs(existsTtlMs, 'existsTtlMs');
    const keys = intentKeys(this.prefix, intent);
    return this.run(
      'finalize',
      () =>
        this.client.rmsFinalize(
          keys.processing,
          keys.entityExists,
          lockValue(sessionId, fencingToken),
          fencingToken,
          String(existsTtlMs ?? 0),
          markerValue(sessionId, fencingToken),
        ),
      toFinalizeResult,
    );
  }

  /**
   * Gives the lease back: `RELEASED` when the caller holds it, else `NOT_OWNER` and the lease is left
   * intact. With `ended` (the caller's saga ends holding its key's answer), the session is first
   * recorded as ended, in the same step and whoever holds the lease: see {@link reserve}'s `answerEnded`.
   */
  async release(input: { intent: string; sessionId: string; fencingToken: string; ended?: { retentionMs: number } }): Promise<ReleaseResult> {
    assertObject(input, 'input');
    const { intent, sessionId, fencingToken, ended } = input;
    assertIntent(intent);
    assertSessionId(sessionId);
    assertFencingToken(fencingToken);
    const [tag, retention] = this.endedArgs(sessionId, ended);
    const keys = intentKeys(this.prefix, intent);
    return this.run('release', () => this.client.rmsRelease(keys.processing, keys.endedSessions, lockValue(sessionId, fencingToken), tag, retention), toReleaseResult);
  }

  /**
   * Records in Redis sessions whose sagas ended holding their keys' answers, as PostgreSQL recorded
   * them (the gate restores what Redis lost), kept `retentionMs` from now. Answers how many the
   * intent's record holds now.
   */
  async rememberEnded(input: { intent: string; sessionTags: readonly string[]; retentionMs: number }): Promise<{ endedCount: number }> {
    assertObject(input, 'input');
    const { intent, sessionTags, retentionMs } = input;
    assertIntent(intent);
    const given: unknown = sessionTags;
    if (!Array.isArray(given) || given.length === 0) throw new RmsValidationError('sessionTags', 'must be a non-empty array of session tags');
    const tags = given.map((tag: unknown) => {
      assertSessionId(tag, 'sessionTags[]');
      return sessionTagOf(tag);
    });
    assertDurationMs(retentionMs, 'retentionMs');
    const keys = intentKeys(this.prefix, intent);
    return this.run('rememberEnded', () => this.client.rmsRememberEnded(keys.endedSessions, String(retentionMs), ...tags), toRememberEndedResult);
  }

  /** The ended-session arguments of release.lua and free.lua: the session's tag and the retention, or none. */
  private endedArgs(sessionId: string, ended: { retentionMs: number } | undefined): [string, string] {
    if (ended === undefined) return ['', '0'];
    assertObject(ended, 'ended');
    assertDurationMs(ended.retentionMs, 'ended.retentionMs');
    return [sessionTagOf(sessionId), String(ended.retentionMs)];
  }

  /**
   * Ends the "entity exists" marker only when it records `fencingToken` (a compensation undoing its
   * own saga): `FREED`, else `NOT_OWNER` and the marker is left intact. The marker becomes a tombstone
   * of the token, which reserve treats as absent and which a late `markExists` of that token (or an
   * older one) cannot overwrite; it keeps the marker's TTL. Where no marker of this token was (Redis
   * lost it, or the saga never finalised), the tombstone is written all the same, living `existsTtlMs`
   * (without a TTL when not given). A retry after `FREED` answers `NOT_OWNER`: either way the caller's
   * marker is gone. With `ended`, its session is recorded as ended first, in the same step (see
   * {@link release}).
   */
  async free(input: { intent: string; fencingToken: string; existsTtlMs?: number; ended?: SessionEnded }): Promise<FreeResult> {
    assertObject(input, 'input');
    const { intent, fencingToken, existsTtlMs, ended } = input;
    assertIntent(intent);
    assertFencingToken(fencingToken);
    if (existsTtlMs !== undefined) assertDurationMs(existsTtlMs, 'existsTtlMs');
    if (ended !== undefined) {
      assertObject(ended, 'ended');
      assertSessionId(ended.sessionId, 'ended.sessionId');
    }
    const [tag, retention] = this.endedArgs(ended?.sessionId ?? '', ended);
    const keys = intentKeys(this.prefix, intent);
    return this.run('free', () => this.client.rmsFree(keys.entityExists, keys.endedSessions, fencingToken, String(existsTtlMs ?? 0), tag, retention), toFreeResult);
  }

  /**
   * Read-repair when PostgreSQL proves the entity exists: sets `entity_exists` to
   * `<session tag>:<fencingToken>` (the bare token without `sessionTag`, which may be given as the
   * whole session id; with `existsTtlMs` when given) unless it already records a higher token → `MARKED`. When the saga of this token (or a newer one) has freed
   * the intent since the caller read PostgreSQL → `FREED`, and nothing is marked.
   */
  async markExists(input: { intent: string; fencingToken: string; sessionTag?: string; existsTtlMs?: number }): Promise<MarkExistsResult> {
    assertObject(input, 'input');
    const { intent, fencingToken, existsTtlMs } = input;
    assertIntent(intent);
    assertFencingToken(fencingToken);
    if (input.sessionTag !== undefined) assertSessionId(input.sessionTag, 'sessionTag');
    const tag = input.sessionTag === undefined ? '' : sessionTagOf(input.sessionTag);
    if (existsTtlMs !== undefined) assertDurationMs(existsTtlMs, 'existsTtlMs');
    const keys = intentKeys(this.prefix, intent);
    return this.run(
      'markExists',
      () => this.client.rmsMarkExists(keys.entityExists, fencingToken, String(existsTtlMs ?? 0), tag),
      toMarkExistsResult,
    );
  }

  /** Reads the lease holder (session, token, remaining lease) and the marker (owner or tombstone, remaining life) of `intent`, at one instant. */
  async inspect(intent: string): Promise<IntentInspection> {
    assertIntent(intent);
    const keys = intentKeys(this.prefix, intent);
    return this.run(
      'inspect',
      () => this.client.rmsInspect(keys.processing, keys.entityExists),
      (reply) => toIntentInspection(intent, reply),
    );
  }

  /**
   * Counts the saga of `sessionId` in against its caller's counters (tagged `tag`, see `limitTag`),
   * all or none, in one atomic step: `ADMITTED` when no counter is at its limit of sagas in flight or
   * of starts in the last second (the session then counts in each for at most `holdMs`, or until
   * {@link countOut}); `ADMITTED` with `alreadyCounted` when the session counts already (a retry of a
   * saga that runs: nothing changes); otherwise `LIMITED` with how long to wait, nothing counted.
   */
  async admit(input: { tag: string; counters: readonly LimitCounter[]; sessionId: string; holdMs: number }): Promise<AdmitResult> {
    assertObject(input, 'input');
    const { tag, counters, sessionId, holdMs } = input;
    assertLimitTag(tag);
    assertLimitCounters(Array.isArray(counters) ? counters.map((c: LimitCounter) => c?.id) : counters);
    for (const c of counters) {
      assertLimit(c.inFlight, 'inFlight', MAX_LIMIT_IN_FLIGHT);
      assertLimit(c.perSecond, 'perSecond', MAX_LIMIT_PER_SECOND);
    }
    assertSessionId(sessionId);
    assertDurationMs(holdMs, 'holdMs');
    const keys = counters.flatMap((c) => {
      const k = limitKeys(this.prefix, tag, c.id);
      return [k.inFlight, k.starts];
    });
    const limits = counters.flatMap((c) => [String(c.inFlight ?? 0), String(c.perSecond ?? 0)]);
    return this.run('admit', () => this.client.rmsAdmit(String(keys.length), ...keys, sessionId, String(holdMs), ...limits), toAdmitResult);
  }

  /**
   * The saga of `sessionId` ended: it stops counting in its caller's counters of sagas in flight
   * (`COUNTED_OUT`; `NOT_COUNTED` when it counted in none, e.g. on a retry). Its starts stay counted.
   */
  async countOut(input: { tag: string; counters: readonly string[]; sessionId: string }): Promise<CountOutResult> {
    assertObject(input, 'input');
    const { tag, counters, sessionId } = input;
    assertLimitTag(tag);
    assertLimitCounters(counters);
    assertSessionId(sessionId);
    const keys = counters.map((id) => limitKeys(this.prefix, tag, id).inFlight);
    return this.run('countOut', () => this.client.rmsCountOut(String(keys.length), ...keys, sessionId), toCountOutResult);
  }

  /**
   * Runs one script, bounded by the RMS deadline, and maps its reply. A single-instance client's own
   * `commandTimeout` already bounds the call (see {@link clientBounds}); otherwise (a Cluster client:
   * while no node is reachable ioredis queues commands without a timeout of their own) the RMS arms
   * one, which costs each call a timer and three promises.
   */
  private async run<T>(command: string, call: () => Promise<unknown>, map: (reply: unknown) => T): Promise<T> {
    let reply: unknown;
    try {
      reply = await (this.clientBounds ? call() : this.withinDeadline(command, call()));
    } catch (err) {
      throw toRmsError(err, command);
    }
    return map(reply);
  }

  /** `reply`, or RmsUnavailableError once the RMS deadline passes first. */
  private async withinDeadline(command: string, reply: Promise<unknown>): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const cause = new Error(`no reply within ${this.timeoutMs} ms`);
        reject(new RmsUnavailableError(command, cause.message, { cause }));
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([reply, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

}

function assertObject(value: unknown, field: string): asserts value is object {
  if (typeof value !== 'object' || value === null) throw new RmsValidationError(field, 'must be an object');
}

/** The `commandTimeout` the client was created with (for a Cluster, its per-node option). */
function clientCommandTimeout(redis: Redis | Cluster): number | undefined {
  const timeout = redis instanceof Cluster ? redis.options.redisOptions?.commandTimeout : redis.options.commandTimeout;
  return typeof timeout === 'number' && Number.isSafeInteger(timeout) && timeout > 0 ? timeout : undefined;
}
