/**
 * The sagas that ended holding their key's answer without holding their intent any more (see
 * `migrations/*_ended-sessions.sql`): PostgreSQL's copy of the RMS's ended record, from which the
 * gate restores what Redis lost.
 */
import type pg from 'pg';
import { InvalidArgumentError } from './errors';
import { runQuery, type Queryable } from './queryable';
import { checkText } from './validate';

const RECORD = `INSERT INTO ended_sessions (intent_key, session_tag) VALUES ($1::text, $2::text)
  ON CONFLICT (intent_key, session_tag) DO NOTHING`;

const READ = `SELECT session_tag FROM ended_sessions WHERE intent_key = $1::text`;

const PURGE_BATCH = `DELETE FROM ended_sessions
WHERE (intent_key, session_tag) IN (
  SELECT intent_key, session_tag FROM ended_sessions
  WHERE ended_at < now() - $1::float8 * interval '1 millisecond'
  ORDER BY ended_at
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
)`;

/** Records that the saga of `sessionTag` ended holding its key's answer for `intentKey` (a repeat changes nothing). */
export async function recordEndedSession(q: Queryable, input: { intentKey: string; sessionTag: string }): Promise<void> {
  await runQuery(q, 'recordEndedSession', RECORD, [checkText(input.intentKey, 'intentKey'), checkText(input.sessionTag, 'sessionTag')]);
}

/** The session tags recorded as ended for `intentKey`, in no order. */
export async function endedSessions(q: Queryable, intentKey: string): Promise<string[]> {
  const { rows } = await runQuery<{ session_tag: string }>(q, 'endedSessions', READ, [checkText(intentKey, 'intentKey')]);
  return rows.map((r) => r.session_tag);
}

/**
 * Deletes at most `batchSize` records older than `olderThanMs`, oldest first, skipping rows locked by
 * someone else; returns how many (see purgeIdempotencyBatch, which runs beside it).
 */
export async function purgeEndedSessionsBatch(pool: pg.Pool, input: { olderThanMs: number; batchSize: number }): Promise<number> {
  const { olderThanMs, batchSize } = input;
  if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0) {
    throw new InvalidArgumentError('olderThanMs', `${String(olderThanMs)} is not a non-negative whole number of milliseconds`);
  }
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > 100_000) {
    throw new InvalidArgumentError('batchSize', `${String(batchSize)} is not a whole number from 1 to 100000`);
  }
  const { rowCount } = await runQuery(pool, 'purgeEndedSessionsBatch', PURGE_BATCH, [String(olderThanMs), batchSize]);
  return rowCount ?? 0;
}
