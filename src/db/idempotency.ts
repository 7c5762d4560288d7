/**
 * The step idempotency store: a step's record commits in the same transaction as the step's
 * effect, so both happen once or not at all.
 */
import type pg from 'pg';
import { requestHash } from './canonical-json';
import {
  DbError,
  DbUnavailableError,
  IdempotencyKeyReuseError,
  IdempotencyKeyTombstonedError,
  IdempotencyRecordStateError,
  InvalidArgumentError,
  isUnavailable,
  translateDbError,
} from './errors';
import { runQuery } from './queryable';
import { checkText } from './validate';

/** Input of {@link withIdempotency}. */
export interface IdempotencyInput {
  /** Namespace of the key, e.g. the step name. Non-empty. */
  scope: string;
  /** The idempotency key, e.g. `<saga key>:<step>`. Non-empty. */
  key: string;
  /** The request; its canonical-JSON SHA-256 is stored and compared on every later call. */
  payload: unknown;
  /**
   * When it aborts, the work is given up: checked before `fn` runs and again before the record and
   * the effect commit (`fn` should stop on it too); the transaction then rolls back and the abort's
   * reason is thrown.
   */
  signal?: AbortSignal;
}

/** What {@link withIdempotency} returns. */
export interface IdempotentResult<T> {
  /** The result of `fn`: as returned on the first run; its JSON round-trip when replayed. */
  result: T;
  /** True when `fn` did not run now and the stored response was returned. */
  replayed: boolean;
}

/** How often a record that vanished between conflict and read (purged) is retried. */
const MAX_ATTEMPTS = 3;

/*
 * The claim: the first INSERT of (scope, key) owns the step until its transaction ends.
 *
 *   A: BEGIN; INSERT … PENDING              -- inserted, uncommitted
 *   B: BEGIN; INSERT … ON CONFLICT DO NOTHING   -- conflicts with A's uncommitted row: waits for A
 *   A: fn(tx) …; UPDATE … COMPLETED, response; COMMIT
 *   B: DO NOTHING (row exists); SELECT      -- a new snapshot (READ COMMITTED): sees A's record
 *   B: hash equal → replay A's response; hash differs → IdempotencyKeyReuseError
 *
 * When A's fn throws, A rolls back: its row never existed, B's INSERT goes through and B runs fn
 * itself. A PENDING record is never visible to anyone else: it commits only as COMPLETED.
 *
 * The tombstone (tombstoneIdempotencyKey) is a claim that never runs anything. The compensation of
 * a step takes the step's own key this way before it looks for the step's effect:
 *
 *   A: BEGIN; INSERT … PENDING; fn(tx) …       -- a step attempt, slow or paused
 *   T: INSERT … TOMBSTONE ON CONFLICT DO NOTHING   -- waits for A's transaction to end
 *   A: COMMIT  → T finds A's COMPLETED record: the compensation runs after the effect, and sees it
 *   A: ROLLBACK (or killed when idle too long) → T's TOMBSTONE commits; every later attempt of the
 *      step reads it and refuses (IdempotencyKeyTombstonedError): nothing of the step ever commits
 *      after its compensation.
 */
const CLAIM = `INSERT INTO idempotency_store (scope, key, request_hash, status)
VALUES ($1::text, $2::text, $3::text, 'PENDING')
ON CONFLICT (scope, key) DO NOTHING`;

const COMPLETE = `UPDATE idempotency_store
SET status = 'COMPLETED', response = $3::jsonb, updated_at = clock_timestamp()
WHERE scope = $1::text AND key = $2::text`;

const READ = `SELECT request_hash, status, response FROM idempotency_store WHERE scope = $1::text AND key = $2::text`;

const TOMBSTONE = `INSERT INTO idempotency_store (scope, key, request_hash, status)
VALUES ($1::text, $2::text, $3::text, 'TOMBSTONE')
ON CONFLICT (scope, key) DO NOTHING`;

// External work left STARTED (its saga gave up on it) goes too; the worker's purge passes over the
// records of sagas still running (purgeIdempotencyBatch's `keep`).
const PURGE = `DELETE FROM idempotency_store
WHERE status IN ('STARTED', 'COMPLETED', 'FAILED', 'TOMBSTONE') AND updated_at < now() - $1::float8 * interval '1 millisecond'`;

/*
 * One batch: the oldest records past the retention, found by the updated_at index, at most $2 of
 * them, each locked only if no one holds it (SKIP LOCKED: a record in use is left for a later run),
 * deleted in one short statement.
 */
const PURGE_BATCH = `DELETE FROM idempotency_store
WHERE (scope, key) IN (
  SELECT scope, key FROM idempotency_store
  WHERE status IN ('STARTED', 'COMPLETED', 'FAILED', 'TOMBSTONE') AND updated_at < now() - $1::float8 * interval '1 millisecond'
  ORDER BY updated_at
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
)`;

/*
 * A purge that keeps some records (those of sagas still running, see purgeIdempotencyBatch's `keep`):
 * the candidates a page at a time, oldest first, from a cursor past the last page (updated_at as
 * text: its microseconds survive the round trip); then only the chosen ones are deleted, each still
 * past the age and not locked by anyone.
 */
const PURGE_CANDIDATES = `SELECT scope, key, updated_at::text AS updated_at FROM idempotency_store
WHERE status IN ('STARTED', 'COMPLETED', 'FAILED', 'TOMBSTONE') AND updated_at < now() - $1::float8 * interval '1 millisecond'
  AND ($3::timestamptz IS NULL OR (updated_at, scope, key) > ($3::timestamptz, $4::text, $5::text))
ORDER BY updated_at, scope, key
LIMIT $2::int`;

const PURGE_CHOSEN = `DELETE FROM idempotency_store
WHERE (scope, key) IN (
  SELECT s.scope, s.key FROM idempotency_store s
  JOIN unnest($2::text[], $3::text[]) AS chosen(scope, key) ON s.scope = chosen.scope AND s.key = chosen.key
  WHERE s.status IN ('STARTED', 'COMPLETED', 'FAILED', 'TOMBSTONE') AND s.updated_at < now() - $1::float8 * interval '1 millisecond'
  FOR UPDATE OF s SKIP LOCKED
)`;

type Attempt<T> = { kind: 'ran'; result: T } | { kind: 'replayed'; response: unknown } | { kind: 'vanished' };

/**
 * Runs `fn` at most once per (scope, key), in the transaction that records it.
 *
 * - First call: runs `fn(tx)`, stores COMPLETED with the JSON of its result, commits both, and
 *   returns `{ result, replayed: false }`.
 * - Same scope, key and payload again, later or concurrently: `fn` does not run; a concurrent
 *   duplicate waits for the first to commit, then every duplicate gets the stored response with
 *   `replayed: true`. The replayed result is the JSON round-trip of the first result (a `Date`
 *   comes back as a string, `undefined` as `null`): return plain JSON from `fn`.
 * - Same scope and key, different payload: `IdempotencyKeyReuseError`, nothing runs.
 * - The key is tombstoned: `IdempotencyKeyTombstonedError`, nothing runs.
 * - `signal` aborted before the commit: rolls back and throws the abort's reason.
 * - `fn` throws: the transaction rolls back (its effect and the record), the error propagates
 *   unchanged, and a later call (or a waiting duplicate) runs `fn` again.
 *
 * `fn` must do its effect through `tx` (not through `pool`, which could be exhausted by
 * duplicates waiting for this very transaction).
 * @throws InvalidArgumentError before anything runs for an empty scope or key or a non-JSON payload;
 *   and, after rolling back, when the result is not JSON-serialisable.
 * @throws DbUnavailableError when PostgreSQL cannot be reached (after a lost COMMIT the outcome is
 *   unknown: retrying is safe, it replays or runs).
 */
export async function withIdempotency<T>(
  pool: pg.Pool,
  input: IdempotencyInput,
  fn: (tx: pg.PoolClient) => Promise<T>,
): Promise<IdempotentResult<T>> {
  const scope = checkText(input.scope, 'scope');
  const key = checkText(input.key, 'key');
  const hash = requestHash(input.payload);
  const { signal } = input;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    signal?.throwIfAborted();
    const outcome = await inTransaction(pool, async (tx) => {
      const claimed = await runQuery(tx, 'withIdempotency', CLAIM, [scope, key, hash]);
      if (claimed.rowCount === 1) {
        const result = await fn(tx);
        // Given up while it ran (cancelled, timed out): nothing of it may commit.
        signal?.throwIfAborted();
        await runQuery(tx, 'withIdempotency', COMPLETE, [scope, key, encodeResponse(result)]);
        return { kind: 'ran', result } satisfies Attempt<T>;
      }
      const { rows } = await runQuery<{ request_hash: string; status: string; response: unknown }>(tx, 'withIdempotency', READ, [scope, key]);
      const record = rows[0];
      if (!record) return { kind: 'vanished' } satisfies Attempt<T>;
      if (record.request_hash !== hash) throw new IdempotencyKeyReuseError(scope, key);
      if (record.status === 'TOMBSTONE') throw new IdempotencyKeyTombstonedError(scope, key);
      if (record.status !== 'COMPLETED') throw new IdempotencyRecordStateError(scope, key, record.status);
      return { kind: 'replayed', response: record.response } satisfies Attempt<T>;
    });
    if (outcome.kind === 'ran') return { result: outcome.result, replayed: false };
    if (outcome.kind === 'replayed') return { result: outcome.response as T, replayed: true };
  }
  throw new DbError(`withIdempotency: the record of ${JSON.stringify(key)} in ${JSON.stringify(scope)} vanished ${MAX_ATTEMPTS} times (purged while in use?)`);
}

/*
 * External work (an effect in another service, which cannot join our transaction):
 *
 *   A: INSERT … STARTED ON CONFLICT DO NOTHING; COMMIT     -- before the call, in its own statement
 *   A: call the service with the key …                      -- no transaction held
 *   A: UPDATE … COMPLETED, response WHERE status = 'STARTED' (or FAILED, the refusal)
 *
 * A retry finds STARTED and calls again with the same key (the service dedupes); COMPLETED or FAILED
 * answer from the store. The compensation's tombstone turns STARTED into TOMBSTONE: no later attempt
 * calls, and an attempt that was on the network cannot record over it (its UPDATE matches nothing).
 */
// One statement, one round trip: the record inserted, or the one found. A record committed by a
// concurrent attempt after this statement's snapshot is in neither half (the insert conflicts, the
// select cannot see it): no row comes back, and the caller asks again with a new snapshot.
const START = `WITH inserted AS (
  INSERT INTO idempotency_store (scope, key, request_hash, status)
  VALUES ($1::text, $2::text, $3::text, 'STARTED')
  ON CONFLICT (scope, key) DO NOTHING
  RETURNING request_hash, status, response
)
SELECT request_hash, status, response FROM inserted
UNION ALL
SELECT request_hash, status, response FROM idempotency_store
WHERE scope = $1::text AND key = $2::text AND NOT EXISTS (SELECT FROM inserted)`;

// RETURNING answers the common case in the same round trip; no row back means the record was no
// longer STARTED (an outcome a concurrent attempt recorded, or the compensation's tombstone), read then.
const FINISH = `UPDATE idempotency_store
SET status = $3::text, response = $4::jsonb, updated_at = clock_timestamp()
WHERE scope = $1::text AND key = $2::text AND status = 'STARTED'
RETURNING status, response`;

const TOMBSTONE_STARTED = `UPDATE idempotency_store
SET status = 'TOMBSTONE', updated_at = clock_timestamp()
WHERE scope = $1::text AND key = $2::text AND status = 'STARTED'`;

/** Where an external record stands: to call (STARTED), or answered from the store. */
export type ExternalRecord = { status: 'STARTED' } | { status: 'COMPLETED'; response: unknown } | { status: 'FAILED'; response: unknown };

/**
 * Records that external work keyed by (scope, key) starts, committed before the caller calls the
 * other service. Answers `STARTED` (first call, or a retry of one that never recorded an outcome:
 * call again with the same key), or the outcome stored by an earlier attempt (`COMPLETED` with its
 * response, `FAILED` with its refusal): do not call.
 * @throws IdempotencyKeyReuseError when the key was recorded with another payload.
 * @throws IdempotencyKeyTombstonedError when the work's compensation has begun: never call again.
 * @throws InvalidArgumentError for an empty scope or key or a non-JSON payload.
 * @throws DbUnavailableError when PostgreSQL cannot be reached.
 */
export async function startExternal(pool: pg.Pool, input: Omit<IdempotencyInput, 'signal'>): Promise<ExternalRecord> {
  const scope = checkText(input.scope, 'scope');
  const key = checkText(input.key, 'key');
  const hash = requestHash(input.payload);
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const { rows } = await runQuery<{ request_hash: string; status: string; response: unknown }>(pool, 'startExternal', START, [scope, key, hash]);
    const record = rows[0];
    if (!record) continue; // committed after the statement's snapshot, or purged in between
    if (record.request_hash !== hash) throw new IdempotencyKeyReuseError(scope, key);
    if (record.status === 'TOMBSTONE') throw new IdempotencyKeyTombstonedError(scope, key);
    if (record.status === 'STARTED') return { status: 'STARTED' };
    if (record.status === 'COMPLETED' || record.status === 'FAILED') return { status: record.status, response: record.response };
    throw new IdempotencyRecordStateError(scope, key, record.status);
  }
  throw new DbError(`startExternal: the record of ${JSON.stringify(key)} in ${JSON.stringify(scope)} vanished ${MAX_ATTEMPTS} times (purged while in use?)`);
}

/**
 * Records the outcome of external work started with {@link startExternal}: `COMPLETED` with the
 * service's response, or `FAILED` with a refusal to answer every later attempt with. Only a STARTED
 * record changes. Returns what the record holds now: the outcome given (or one a concurrent attempt
 * recorded first, with its response), or `TOMBSTONE` when the compensation began while the call was
 * out: that compensation orders itself after the call at the service (see ExternalStep).
 * @throws InvalidArgumentError before anything is written when `response` is not JSON-serialisable.
 * @throws DbUnavailableError when PostgreSQL cannot be reached (retrying is safe).
 */
export async function finishExternal(
  pool: pg.Pool,
  input: { scope: string; key: string; status: 'COMPLETED' | 'FAILED'; response: unknown },
): Promise<{ status: 'COMPLETED' | 'FAILED'; response: unknown } | { status: 'TOMBSTONE' }> {
  const scope = checkText(input.scope, 'scope');
  const key = checkText(input.key, 'key');
  const encoded = encodeResponse(input.response);
  const finished = await runQuery<{ status: string; response: unknown }>(pool, 'finishExternal', FINISH, [scope, key, input.status, encoded]);
  const record = finished.rows[0] ?? (await runQuery<{ status: string; response: unknown }>(pool, 'finishExternal', READ, [scope, key])).rows[0];
  if (record?.status === 'TOMBSTONE') return { status: 'TOMBSTONE' };
  if (record?.status === 'COMPLETED' || record?.status === 'FAILED') return { status: record.status, response: record.response };
  throw new IdempotencyRecordStateError(scope, key, record?.status ?? 'absent');
}

/**
 * Takes `key` for good without running anything, so that work keyed by it can never run after this
 * call returns: waits for an attempt in flight (an uncommitted claim) to commit or roll back, then
 * inserts a TOMBSTONE unless a record exists. Returns what holds the key now: `TOMBSTONE` (no
 * attempt ever committed; none ever will) or the status of the record found (`COMPLETED`: the work
 * committed before; whoever undoes it sees its effect). External work that STARTED and has no
 * outcome yet is tombstoned too, and `STARTED` returned: an attempt may still be on the network, and
 * the compensation must order itself after it at the other service (see ExternalStep). The payload is hashed as in
 * {@link withIdempotency}: pass the same one, or later attempts get IdempotencyKeyReuseError.
 * @throws InvalidArgumentError for an empty scope or key or a non-JSON payload.
 * @throws DbUnavailableError when PostgreSQL cannot be reached.
 */
export async function tombstoneIdempotencyKey(pool: pg.Pool, input: Omit<IdempotencyInput, 'signal'>): Promise<string> {
  const scope = checkText(input.scope, 'scope');
  const key = checkText(input.key, 'key');
  const hash = requestHash(input.payload);
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    // One statement, its own transaction: the INSERT waits for a conflicting uncommitted claim.
    const inserted = await runQuery(pool, 'tombstoneIdempotencyKey', TOMBSTONE, [scope, key, hash]);
    if (inserted.rowCount === 1) return 'TOMBSTONE';
    // External work started and not finished: no attempt of ours may call, or record, from now on.
    const stopped = await runQuery(pool, 'tombstoneIdempotencyKey', TOMBSTONE_STARTED, [scope, key]);
    if (stopped.rowCount === 1) return 'STARTED';
    const { rows } = await runQuery<{ status: string }>(pool, 'tombstoneIdempotencyKey', READ, [scope, key]);
    if (rows[0]) return rows[0].status;
  }
  throw new DbError(`tombstoneIdempotencyKey: the record of ${JSON.stringify(key)} in ${JSON.stringify(scope)} vanished ${MAX_ATTEMPTS} times (purged while in use?)`);
}

/**
 * Deletes COMPLETED, FAILED and TOMBSTONE records last updated more than `olderThanMs` ago; returns how many.
 * Purge only records older than any retry can come: a purged key runs its step again.
 * @throws InvalidArgumentError when `olderThanMs` is not a non-negative whole number.
 */
export async function purgeIdempotencyRecords(pool: pg.Pool, input: { olderThanMs: number }): Promise<number> {
  const { olderThanMs } = input;
  if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0) {
    throw new InvalidArgumentError('olderThanMs', `${String(olderThanMs)} is not a non-negative whole number of milliseconds`);
  }
  const { rowCount } = await runQuery(pool, 'purgeIdempotencyRecords', PURGE, [String(olderThanMs)]);
  return rowCount ?? 0;
}

/**
 * Deletes at most `batchSize` of the records {@link purgeIdempotencyRecords} would delete, oldest
 * first, in short statements that skip records locked by someone else; returns how many. Call it
 * until it returns less than `batchSize` to purge everything without ever holding many locks long.
 *
 * With `keep`, the candidates are read a page at a time and `keep` is asked which of their keys
 * must stay (a saga that still runs needs its records, however old); those are passed over, and the
 * purge goes on past them, so it still returns less than `batchSize` only when nothing else is left.
 * @throws InvalidArgumentError when `olderThanMs` or `batchSize` is not a whole number in range.
 */
export async function purgeIdempotencyBatch(
  pool: pg.Pool,
  input: { olderThanMs: number; batchSize: number; keep?: (keys: readonly string[]) => Promise<ReadonlySet<string>> },
): Promise<number> {
  const { olderThanMs, batchSize, keep } = input;
  if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0) {
    throw new InvalidArgumentError('olderThanMs', `${String(olderThanMs)} is not a non-negative whole number of milliseconds`);
  }
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > 100_000) {
    throw new InvalidArgumentError('batchSize', `${String(batchSize)} is not a whole number from 1 to 100000`);
  }
  if (keep === undefined) {
    const { rowCount } = await runQuery(pool, 'purgeIdempotencyBatch', PURGE_BATCH, [String(olderThanMs), batchSize]);
    return rowCount ?? 0;
  }
  let deleted = 0;
  let after: { updated_at: string; scope: string; key: string } | undefined;
  while (deleted < batchSize) {
    const wanted = batchSize - deleted;
    const { rows } = await runQuery<{ scope: string; key: string; updated_at: string }>(pool, 'purgeIdempotencyBatch', PURGE_CANDIDATES, [
      String(olderThanMs),
      wanted,
      after?.updated_at ?? null,
      after?.scope ?? null,
      after?.key ?? null,
    ]);
    const kept = rows.length > 0 ? await keep(rows.map((r) => r.key)) : new Set<string>();
    const chosen = rows.filter((r) => !kept.has(r.key));
    if (chosen.length > 0) {
      const { rowCount } = await runQuery(pool, 'purgeIdempotencyBatch', PURGE_CHOSEN, [String(olderThanMs), chosen.map((r) => r.scope), chosen.map((r) => r.key)]);
      deleted += rowCount ?? 0;
    }
    if (rows.length < wanted) break;
    after = rows[rows.length - 1];
  }
  return deleted;
}

/**
 * Runs `body` in a transaction on a client of its own; commits when it returns, rolls back when it
 * throws. `operation` names the caller in a DbUnavailableError.
 */
export async function inTransaction<R>(pool: pg.Pool, body: (tx: pg.PoolClient) => Promise<R>, operation = 'withIdempotency'): Promise<R> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    return translateDbError(err, operation);
  }
  let broken = false;
  try {
    await runQuery(client, operation, 'BEGIN', []);
    let result: R;
    try {
      result = await body(client);
    } catch (err) {
      broken = !(await rollbackQuietly(client));
      throw err;
    }
    await runQuery(client, operation, 'COMMIT', []);
    return result;
  } catch (err) {
    if (err instanceof DbUnavailableError || isUnavailable(err)) broken = true;
    throw err;
  } finally {
    // A client whose connection failed is destroyed rather than handed to the next caller.
    client.release(broken ? true : undefined);
  }
}

/** Rolls back; false when even that failed (the connection is gone). */
async function rollbackQuietly(client: pg.PoolClient): Promise<boolean> {
  try {
    await client.query('ROLLBACK');
    return true;
  } catch {
    return false;
  }
}

/** The JSON stored as the response (jsonb cannot hold NUL; JSON has no bigint or cycles). */
function encodeResponse(result: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(result, (key, value: unknown) => {
      if (key.includes('\u0000') || (typeof value === 'string' && value.includes('\u0000'))) {
        throw new InvalidArgumentError('result', 'strings may not contain NUL (U+0000)');
      }
      return value;
    });
  } catch (err) {
    if (err instanceof InvalidArgumentError) throw err;
    throw new InvalidArgumentError('result', `is not JSON-serialisable: ${(err as Error).message}`);
  }
  return json ?? 'null';
}
