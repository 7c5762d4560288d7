/**
 * Fenced entity rows: a reusable write layer for any table that carries the fencing columns
 *
 *   id bigint (identity) PRIMARY KEY, intent_key text NOT NULL UNIQUE, status text NOT NULL,
 *   last_fencing_token bigint NOT NULL, session_id text NOT NULL,
 *   created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now()
 *
 * plus the table's own data columns. Every statement is built once, in the constructor, from
 * validated and quoted identifiers; every value is a parameter.
 */
import { branded } from '../brand';
import { InvalidArgumentError } from './errors';
import { quoteIdentifier, quoteQualifiedName } from './identifiers';
import { runArrayQuery, runQuery, type Queryable } from './queryable';
import { checkText } from './validate';

/** Every status of a fenced row, in lifecycle order. */
export const FENCED_STATUSES = ['PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED', 'RELEASED'] as const;

/**
 * Status of a fenced row: PROCESSING (written under a live lease) → REGISTERED (finalised) →
 * COMPLETED, or FAILED / COMPENSATED; a COMPLETED row becomes RELEASED when an operation that
 * releases its entity ends (see {@link FencedTable.release}): kept for history, no longer the
 * intent's entity.
 */
export type FencedStatus = (typeof FENCED_STATUSES)[number];

/** Which table a {@link FencedTable} writes, and which of its columns are data. */
export interface FencedTableOptions {
  /**
   * Table name, e.g. `'orders'`, optionally schema-qualified (`'sales.orders'`). Each part must be
   * lower-case letters, digits and `_` (at most 63); it is double-quoted in SQL. An unqualified
   * name is resolved through the connection's `search_path`.
   */
  table: string;
  /**
   * Data columns written by `writeFenced` and read by `find`, e.g. `['customer', 'items',
   * 'amount_cents']`. Same identifier rule as `table`; no duplicates; none of the fencing columns.
   */
  dataColumns: readonly string[];
  /**
   * What rows of earlier versions the table's operations still accept (see {@link LegacyRows});
   * every one off unless named: a new table has no such rows. @default none
   */
  legacy?: LegacyRows;
}

/**
 * Rows and ids of earlier versions a table's operations still accept: each one a way around the
 * owner check, so each is opt-in, for a table that holds such rows, until they are migrated
 * (docs/operations.md, "Owners of rows from earlier versions").
 */
export interface LegacyRows {
  /**
   * A row with no owner (`created_by` empty: written before the table recorded owners) is open to
   * every owner's operations. Off: such a row is a missing entity to every owner, until a migration
   * gives it one (`UPDATE <table> SET created_by = <owner> WHERE created_by = ''`). @default false
   */
  ownerlessRows?: boolean;
  /**
   * An entity may be named by its bare row id, as earlier versions handed ids out (the owner check
   * still applies). Off: such an id names no entity (ENTITY_NOT_FOUND); callers use the opaque id,
   * which an operation started with a row id answers with. @default false
   */
  numericIds?: boolean;
}

/** A fenced row as read by {@link FencedTable.find}. */
export interface FencedRow {
  /** Row id (bigint, as a decimal string). */
  id: string;
  intentKey: string;
  status: FencedStatus;
  /** Token of the holder that last wrote the row (bigint, as a decimal string). */
  lastFencingToken: string;
  sessionId: string;
  /**
   * The data columns, as node-postgres parses them by default: bigint and numeric as strings,
   * json/jsonb parsed, timestamptz as `Date`, SQL NULL as `null`.
   */
  data: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Outcome of {@link FencedTable.writeFenced}.
 * - `WRITTEN`: the caller's token owns the row (inserted, taken over, or an earlier write of the
 *   same token: an activity retry).
 * - `FENCED_OUT`: a newer token owns the row; nothing changed.
 * - `DUPLICATE`: the intent is REGISTERED or COMPLETED under an older token; nothing changed.
 */
export type WriteFencedResult = { status: 'WRITTEN'; id: string } | { status: 'FENCED_OUT' } | { status: 'DUPLICATE'; id: string };

/**
 * Outcome of a fenced transition (`markRegistered` and friends). Only `OK` changed anything (or
 * found the row already in the target state under the same token).
 * - `FENCED_OUT`: the row carries another token.
 * - `ILLEGAL_TRANSITION`: the row is ours but its status `from` does not lead to the target.
 * - `NOT_FOUND`: no row for the intent.
 */
export type TransitionResult =
  | { status: 'OK' }
  | { status: 'FENCED_OUT' }
  | { status: 'ILLEGAL_TRANSITION'; from: FencedStatus }
  | { status: 'NOT_FOUND' };

/** Input of {@link FencedTable.writeFenced}. */
export interface WriteFencedInput {
  intentKey: string;
  sessionId: string;
  /** Positive integer up to 2^63-1, as a decimal string or a bigint (never a JS number). */
  fencingToken: string | bigint;
  /**
   * One value per data column, exactly the table's `dataColumns` (use `null` for SQL NULL). Values
   * are sent as one JSON document and converted to the column types by PostgreSQL
   * (`jsonb_populate_record`): a jsonb column stores the value as given, a bigint column accepts a
   * decimal string or a bigint. Strings may not contain NUL (PostgreSQL text cannot).
   */
  data: Record<string, unknown>;
  /**
   * Who the entity is created for (`created_by`, a column of tables that operations claim): only
   * operations of the same owner find the row. Written on insert and on a takeover.
   * @default none: the column is not written
   */
  createdBy?: string;
}

/**
 * Outcome of {@link FencedTable.claim}. Only `CLAIMED` changed anything (or found the row claimed by
 * the same token already).
 * - `FENCED_OUT`: a newer operation's token has claimed the row.
 * - `NOT_COMPLETED`: the row is not COMPLETED (its creating saga still runs, or was undone).
 * - `NOT_FOUND`: no row has this id.
 */
export type ClaimResult = { status: 'CLAIMED' } | { status: 'FENCED_OUT' } | { status: 'NOT_COMPLETED'; from: FencedStatus } | { status: 'NOT_FOUND' };

/**
 * Outcome of {@link FencedTable.release}. Only `RELEASED` changed anything (or found the row released
 * by the same token already); it names the intent the row no longer holds and who created it.
 * - `FENCED_OUT`: a newer operation's token has claimed the row.
 * - `NOT_COMPLETED`: the row is not COMPLETED (or was released by another operation).
 * - `NOT_FOUND`: no row has this id.
 */
export type ReleaseResult =
  | {
      status: 'RELEASED';
      intentKey: string;
      /** The session of the saga that created the entity. */
      sessionId: string;
      /** The token of the saga that created the entity (its marker's). */
      lastFencingToken: string;
    }
  | { status: 'FENCED_OUT' }
  | { status: 'NOT_COMPLETED'; from: FencedStatus }
  | { status: 'NOT_FOUND' };

/** A row as {@link FencedTable.findById} reads it: with the token of the last operation that claimed it. */
export interface ClaimableRow extends FencedRow {
  /** Null until an operation first claims the row. */
  lastOperationToken: string | null;
  /** Who the entity was created for; `''` for a row written before its table recorded owners (see {@link LegacyRows.ownerlessRows}). */
  createdBy: string;
}

/** Input of the fenced transitions. */
export interface TransitionInput {
  intentKey: string;
  /** The caller's token; the row changes only when it is the row's `last_fencing_token`. */
  fencingToken: string | bigint;
}

/**
 * Legal transitions: target status and the statuses it may come from. A repeat of a transition
 * (row already in the target status, same token) is also OK: activities run at least once.
 */
export const TRANSITIONS = {
  markRegistered: { to: 'REGISTERED', from: ['PROCESSING'] },
  markCompleted: { to: 'COMPLETED', from: ['REGISTERED'] },
  markFailed: { to: 'FAILED', from: ['PROCESSING', 'REGISTERED'] },
  markCompensated: { to: 'COMPENSATED', from: ['PROCESSING', 'REGISTERED'] },
} as const satisfies Record<string, { to: FencedStatus; from: readonly FencedStatus[] }>;

/** Statuses a newer token may take over: the holder lost its lease, or the saga was undone. */
const TAKEOVER_FROM: readonly FencedStatus[] = ['PROCESSING', 'FAILED', 'COMPENSATED'];

export const FENCING_COLUMNS = ['id', 'intent_key', 'status', 'last_fencing_token', 'session_id', 'created_at', 'updated_at'];

/** `legacy` with every field set. @throws InvalidArgumentError for anything but an object of known booleans. */
function legacyOf(legacy: unknown): Required<LegacyRows> {
  if (legacy === undefined) return { ownerlessRows: false, numericIds: false };
  if (typeof legacy !== 'object' || legacy === null || Array.isArray(legacy)) throw new InvalidArgumentError('legacy', 'must be an object { ownerlessRows?, numericIds? }');
  const given = legacy as Record<string, unknown>;
  const unknown = Object.keys(given).filter((k) => k !== 'ownerlessRows' && k !== 'numericIds');
  if (unknown.length > 0) throw new InvalidArgumentError('legacy', `unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')} (it has ownerlessRows and numericIds)`);
  for (const field of ['ownerlessRows', 'numericIds']) {
    if (given[field] !== undefined && typeof given[field] !== 'boolean') throw new InvalidArgumentError(`legacy.${field}`, 'must be a boolean');
  }
  return { ownerlessRows: given.ownerlessRows === true, numericIds: given.numericIds === true };
}

/** The owner column of a table that operations claim: who each entity was created for. */
export const OWNER_COLUMN = 'created_by';
const MAX_BIGINT = 9223372036854775807n;

/** The SQL of one fenced table, built once. Exported for tests and documentation. */
export interface FencedStatements {
  writeFenced: string;
  /** writeFenced that also writes `created_by`, its fifth parameter. */
  writeFencedOwned: string;
  transition: string;
  find: string;
  /** `find`'s columns, then the session tags `ended_sessions` records for the intent: one statement. */
  findWithEnded: string;
  findById: string;
  claim: string;
  release: string;
}

/**
 * Builds the statements of a fenced table.
 *
 * writeFenced is ONE statement, race-free under READ COMMITTED, inside or outside the caller's
 * transaction. It is an upsert whose DO UPDATE has no WHERE: it always locks and rewrites the
 * conflicting row, and each SET chooses, by a CASE on that row, between the new value (takeover)
 * and the row's own value (no change). RETURNING then reports the row as the statement left it,
 * and the outcome is read from it: our token → WRITTEN, a higher one → FENCED_OUT, a lower one
 * (only left in place when REGISTERED/COMPLETED) → DUPLICATE.
 *
 * Why not `DO UPDATE ... WHERE takeover` plus a look at the row when nothing came back? Because
 * that look would be a second snapshot. The conflicting row the upsert locks is the newest
 * committed version, which may be newer than the statement's snapshot, or not in it at all:
 *
 *   A: BEGIN; writeFenced(t=5)  -- inserts PROCESSING, uncommitted
 *   B: writeFenced(t=3)         -- snapshot taken; conflict on A's row: waits for A
 *   A: COMMIT
 *   B: locks A's committed row  -- invisible to B's snapshot; a CTE SELECT would find no row
 *
 * and when A had updated an existing row instead (takeover, markRegistered), a same-statement
 * SELECT shows the version before A's change, so "not updated" could be misread (FENCED_OUT vs
 * DUPLICATE, or a spurious "nobody here"); a follow-up SELECT, outside a transaction, sees
 * whatever committed since. Here the upsert itself waits for A (speculative insertion waits for an
 * in-progress inserter; the row lock waits for an in-progress updater, then the upsert restarts
 * on the newest version), and the CASEs and RETURNING all see exactly the version it locked; no
 * other statement is involved. The price is a new row version (same values) on FENCED_OUT and
 * DUPLICATE and on a same-token retry, and, like any ON CONFLICT DO UPDATE, the row stays locked
 * until the caller's transaction ends.
 *
 * The transitions use the same pattern: one UPDATE of the intent's row that always rewrites it,
 * CASE-guarded on "our token and a legal source status"; under READ COMMITTED a concurrently
 * changed row is re-read (EvalPlanQual) and the CASEs and RETURNING see that newest version. The
 * outcome comes from RETURNING: another token → FENCED_OUT; our token and the target status →
 * OK (changed now, or a repeat); our token and any other status → ILLEGAL_TRANSITION from it;
 * no row → NOT_FOUND. NOT_FOUND is judged on the statement's snapshot (an UPDATE does not see a
 * row inserted after it began), which is sound: a holder's own row was committed by its
 * writeFenced before it ever asks for a transition, and rows are never deleted.
 */
export function buildStatements(options: FencedTableOptions): FencedStatements {
  const table = quoteQualifiedName(options.table, 'table');
  const columns: readonly string[] = options.dataColumns;
  const given: unknown = options.dataColumns;
  if (!Array.isArray(given)) throw new InvalidArgumentError('dataColumns', 'must be an array of column names');
  const seen = new Set<string>();
  const data = columns.map((column, i) => {
    const quoted = quoteIdentifier(column, `dataColumns[${i}]`);
    if (FENCING_COLUMNS.includes(column)) throw new InvalidArgumentError(`dataColumns[${i}]`, `"${column}" is a fencing column`);
    if (seen.has(column)) throw new InvalidArgumentError(`dataColumns[${i}]`, `"${column}" is listed twice`);
    seen.add(column);
    return quoted;
  });

  // Any row of the intent the statement's snapshot shows with a higher token, or the same token's
  // released row, fences the writer out before it inserts. The live row's conflict below decides
  // too, but a row released after the snapshot has left the live index: without this, an older
  // token waiting on that release would insert a live row below the released one (see release).
  const fencedBySnapshot = `SELECT FROM ${table} AS f WHERE f.intent_key = $1::text AND (f.last_fencing_token > $2::bigint OR (f.status = 'RELEASED' AND f.last_fencing_token = $2::bigint))`;
  const takeover = `cur.last_fencing_token < EXCLUDED.last_fencing_token AND cur.status IN (${TAKEOVER_FROM.map((s) => `'${s}'`).join(', ')})`;
  // The same upsert, with or without the owner column (its value the fifth parameter).
  const upsert = (owned: boolean) => {
    const columns = ['last_fencing_token', 'session_id', ...(owned ? [OWNER_COLUMN] : []), ...data];
    const replaced = columns.map((column) => `${column} = CASE WHEN ${takeover} THEN EXCLUDED.${column} ELSE cur.${column} END`);
    return [
      `INSERT INTO ${table} AS cur (intent_key, status, last_fencing_token, session_id${owned ? `, ${OWNER_COLUMN}` : ''}${data.map((c) => `, ${c}`).join('')})`,
      `SELECT $1::text, 'PROCESSING', $2::bigint, $3::text${owned ? ', $5::text' : ''}${data.map((c) => `, d.${c}`).join('')}`,
      `  FROM jsonb_populate_record(NULL::${table}, $4::jsonb) AS d`,
      `  WHERE NOT EXISTS (${fencedBySnapshot})`,
      `ON CONFLICT (intent_key) WHERE status <> 'RELEASED' DO UPDATE SET`,
      `  status = CASE WHEN ${takeover} THEN 'PROCESSING' ELSE cur.status END,`,
      ...replaced.map((line) => `  ${line},`),
      `  updated_at = CASE WHEN ${takeover} THEN now() ELSE cur.updated_at END`,
      `RETURNING cur.id::text AS id,`,
      `  CASE WHEN cur.last_fencing_token = $2::bigint THEN 'WRITTEN'`,
      `       WHEN cur.last_fencing_token > $2::bigint THEN 'FENCED_OUT'`,
      `       ELSE 'DUPLICATE' END AS outcome`,
    ].join('\n');
  };
  const writeFenced = upsert(false);
  const writeFencedOwned = upsert(true);

  const legal = `cur.last_fencing_token = $2::bigint AND cur.status = ANY ($3::text[])`;
  const transition = [
    `UPDATE ${table} AS cur SET`,
    `  status = CASE WHEN ${legal} THEN $4::text ELSE cur.status END,`,
    `  updated_at = CASE WHEN ${legal} THEN now() ELSE cur.updated_at END`,
    `WHERE cur.intent_key = $1::text AND cur.status <> 'RELEASED'`,
    `RETURNING cur.status, cur.last_fencing_token = $2::bigint AS owned`,
  ].join('\n');

  const find = [
    `SELECT id::text, intent_key, status, last_fencing_token::text, session_id, created_at, updated_at${data.map((c) => `, ${c}`).join('')}`,
    // The live row when there is one (its token is above every released row's), else the last released.
    `  FROM ${table} WHERE intent_key = $1::text ORDER BY last_fencing_token DESC LIMIT 1`,
  ].join('\n');

  // Always one row: the intent's row when it has one (all NULL otherwise), and its ended sessions.
  const findWithEnded = [
    `SELECT r.*, ARRAY(SELECT e.session_tag FROM ended_sessions AS e WHERE e.intent_key = $1::text) AS ended`,
    `  FROM (SELECT) AS one LEFT JOIN LATERAL (${find}) AS r ON true`,
  ].join('\n');

  const findById = [
    `SELECT id::text, intent_key, status, last_fencing_token::text, session_id, created_at, updated_at${data.map((c) => `, ${c}`).join('')}, last_operation_token::text, ${OWNER_COLUMN}`,
    `  FROM ${table} WHERE id = $1::bigint`,
  ].join('\n');

  // Same pattern as the transitions: always rewrite the row (so it stays locked to the end of the
  // caller's transaction, and a concurrent claim is re-read), change it only when the CASE allows.
  const claimable = `cur.status = 'COMPLETED' AND coalesce(cur.last_operation_token, 0) <= $2::bigint`;
  const claim = [
    `UPDATE ${table} AS cur SET`,
    `  last_operation_token = CASE WHEN ${claimable} THEN $2::bigint ELSE cur.last_operation_token END`,
    `WHERE cur.id = $1::bigint`,
    `RETURNING cur.status, cur.last_operation_token::text AS token`,
  ].join('\n');

  // A claim that also ends the entity: COMPLETED → RELEASED, by the operation holding the newest claim.
  const release = [
    `UPDATE ${table} AS cur SET`,
    `  status = CASE WHEN ${claimable} THEN 'RELEASED' ELSE cur.status END,`,
    `  last_operation_token = CASE WHEN ${claimable} THEN $2::bigint ELSE cur.last_operation_token END,`,
    `  updated_at = CASE WHEN ${claimable} THEN now() ELSE cur.updated_at END`,
    `WHERE cur.id = $1::bigint`,
    `RETURNING cur.status, cur.last_operation_token::text AS token, cur.intent_key, cur.session_id, cur.last_fencing_token::text`,
  ].join('\n');

  return { writeFenced, writeFencedOwned, transition, find, findWithEnded, findById, claim, release };
}

/**
 * Fenced writes and transitions on one table. Safe to share: it holds only the prepared SQL.
 *
 * Every method takes the {@link Queryable} to run on: the pool for a statement of its own, or a
 * client inside the caller's transaction (the saga's activity does `BEGIN; writeFenced(tx, …);
 * long work; COMMIT`, or ROLLBACK when its lease was lost). Inside a transaction the row stays
 * locked until it ends, so a newer holder waits for it: end the transaction promptly after a
 * FENCED_OUT or DUPLICATE.
 *
 * The statements are written for READ COMMITTED (PostgreSQL's default). Under REPEATABLE READ or
 * SERIALIZABLE a row changed concurrently makes them fail with 40001 (serialization_failure)
 * instead of re-reading it: retry the transaction.
 *
 * Expected outcomes are values; failures throw: `InvalidArgumentError` before any SQL for bad
 * input, `DbUnavailableError` when PostgreSQL cannot be reached, the driver's error otherwise
 * (e.g. a CHECK constraint on a data column).
 */
export class FencedTable {
  /** The table's name, as given (optionally schema-qualified). */
  readonly table: string;
  /** The table's data columns, as given. */
  readonly dataColumns: readonly string[];
  /** What rows of earlier versions its operations accept (every field set; see {@link LegacyRows}). */
  readonly legacy: Readonly<Required<LegacyRows>>;
  private readonly sql: FencedStatements;

  /** @throws InvalidArgumentError when the table or a column name is not a strict identifier, or `legacy` is not an object of booleans. */
  constructor(options: FencedTableOptions) {
    this.sql = buildStatements(options);
    this.table = options.table;
    this.dataColumns = [...options.dataColumns];
    this.legacy = Object.freeze(legacyOf(options.legacy));
  }

  /**
   * Writes the caller's row for an intent, fenced by its token, in one statement:
   * - no row → inserted as PROCESSING → WRITTEN;
   * - row with the same token (a retry) → unchanged → WRITTEN, same id, whatever its status;
   * - row PROCESSING, FAILED or COMPENSATED with a lower token → taken over (status PROCESSING,
   *   token, session, data and `updated_at` replaced) → WRITTEN, same id;
   * - row with a higher token → FENCED_OUT, unchanged (whatever its status: the fence comes first);
   * - row REGISTERED or COMPLETED with a lower token → DUPLICATE, unchanged;
   * - only RELEASED rows, all with lower tokens → a new row inserted as PROCESSING → WRITTEN, new id;
   *   a RELEASED row of the same or a higher token → FENCED_OUT, nothing written.
   * @throws InvalidArgumentError for a bad token, an empty key or session, or data that does not
   *   match the data columns.
   */
  async writeFenced(q: Queryable, input: WriteFencedInput): Promise<WriteFencedResult> {
    const intentKey = checkText(input.intentKey, 'intentKey');
    const sessionId = checkText(input.sessionId, 'sessionId');
    const token = normaliseToken(input.fencingToken);
    const data = this.encodeData(input.data);
    const owned = input.createdBy !== undefined;
    const { rows } = await runQuery<{ id: string; outcome: 'WRITTEN' | 'FENCED_OUT' | 'DUPLICATE' }>(
      q,
      'writeFenced',
      owned ? this.sql.writeFencedOwned : this.sql.writeFenced,
      owned ? [intentKey, token, sessionId, data, checkText(input.createdBy, 'createdBy')] : [intentKey, token, sessionId, data],
    );
    const row = rows[0];
    // ON CONFLICT DO UPDATE without WHERE returns the inserted or updated row, unless the snapshot's
    // check refused the insert before it was tried: a row of a higher token (or a released one of ours).
    if (!row) return { status: 'FENCED_OUT' };
    return row.outcome === 'FENCED_OUT' ? { status: 'FENCED_OUT' } : { status: row.outcome, id: row.id };
  }

  /** PROCESSING → REGISTERED, only for the row's own token (a repeat is OK). */
  markRegistered(q: Queryable, input: TransitionInput): Promise<TransitionResult> {
    return this.transition(q, 'markRegistered', input);
  }

  /** REGISTERED → COMPLETED, only for the row's own token (a repeat is OK). */
  markCompleted(q: Queryable, input: TransitionInput): Promise<TransitionResult> {
    return this.transition(q, 'markCompleted', input);
  }

  /** PROCESSING or REGISTERED → FAILED, only for the row's own token (a repeat is OK). */
  markFailed(q: Queryable, input: TransitionInput): Promise<TransitionResult> {
    return this.transition(q, 'markFailed', input);
  }

  /**
   * PROCESSING or REGISTERED → COMPENSATED, only for the row's own token (a repeat is OK): a
   * compensation never touches a row a newer token owns.
   */
  markCompensated(q: Queryable, input: TransitionInput): Promise<TransitionResult> {
    return this.transition(q, 'markCompensated', input);
  }

  /**
   * The intent's row, or undefined: its live row (not RELEASED) when it has one, else the one it had
   * last, released.
   */
  async find(q: Queryable, intentKey: string): Promise<FencedRow | undefined> {
    const key = checkText(intentKey, 'intentKey');
    const { rows } = await runArrayQuery(q, 'find', this.sql.find, [key]);
    return rows[0] && this.rowOf(rows[0]);
  }

  /**
   * `find`, and the session tags of the sagas recorded as ended for the intent (the
   * `ended_sessions` table of the package's migrations), in one statement: the gate's truth check of
   * a SUCCESS, one round trip to PostgreSQL.
   */
  async findWithEnded(q: Queryable, intentKey: string): Promise<{ row: FencedRow | undefined; ended: string[] }> {
    const key = checkText(intentKey, 'intentKey');
    const { rows } = await runArrayQuery(q, 'findWithEnded', this.sql.findWithEnded, [key]);
    const found = rows[0]!;
    const ended = found[found.length - 1] as string[];
    return { row: found[0] === null ? undefined : this.rowOf(found.slice(0, -1)), ended };
  }

  /**
   * The row of id `id` (a decimal string), or undefined: what an operation's gate looks at. The
   * table must carry `last_operation_token` and `created_by` (a table that operations claim).
   */
  async findById(q: Queryable, id: string): Promise<ClaimableRow | undefined> {
    const rowId = normaliseId(id);
    const { rows } = await runArrayQuery(q, 'findById', this.sql.findById, [rowId]);
    const row = rows[0];
    if (!row) return undefined;
    // The columns of `find`, then last_operation_token and created_by.
    return { ...this.rowOf(row.slice(0, -2)), lastOperationToken: (row[row.length - 2] as string | null) ?? null, createdBy: row[row.length - 1] as string };
  }

  /** A row as `find` selects it: the fencing columns, then the data columns. */
  private rowOf(row: unknown[]): FencedRow {
    const [id, intentKey, status, lastFencingToken, sessionId, createdAt, updatedAt, ...values] = row;
    return {
      id: id as string,
      intentKey: intentKey as string,
      status: status as FencedStatus,
      lastFencingToken: lastFencingToken as string,
      sessionId: sessionId as string,
      data: Object.fromEntries(this.dataColumns.map((column, i) => [column, values[i]])),
      createdAt: createdAt as Date,
      updatedAt: updatedAt as Date,
    };
  }

  /**
   * Claims the COMPLETED row `id` for the operation whose lock token is `fencingToken`, in one
   * statement: its `last_operation_token` becomes the token when it was not above it → CLAIMED
   * (again for the same token: a retry, or the operation's next step); a higher one → FENCED_OUT; a
   * row that is not COMPLETED → NOT_COMPLETED. Run it first in the transaction of every database
   * step of an operation: the row stays locked until that transaction ends, and no holder older
   * than the newest claim can change it after. The table must carry `last_operation_token bigint`.
   */
  async claim(q: Queryable, input: { id: string; fencingToken: string | bigint }): Promise<ClaimResult> {
    const rowId = normaliseId(input.id);
    const token = normaliseToken(input.fencingToken);
    const { rows } = await runQuery<{ status: FencedStatus; token: string | null }>(q, 'claim', this.sql.claim, [rowId, token]);
    const row = rows[0];
    if (!row) return { status: 'NOT_FOUND' };
    if (row.token !== null && BigInt(row.token) > BigInt(token)) return { status: 'FENCED_OUT' };
    if (row.status !== 'COMPLETED') return { status: 'NOT_COMPLETED', from: row.status };
    return { status: 'CLAIMED' };
  }

  /**
   * Releases the COMPLETED entity `id` for the operation whose lock token is `fencingToken`, as
   * {@link claim} claims it: the row becomes RELEASED, kept as it is, and no longer its intent's
   * entity. The intent's next row is written by a token above this row's (`writeFenced` refuses any
   * other), so nothing of the released entity's sagas can reach the new one. A repeat by the same
   * token is RELEASED again. The table must hold released rows (see `fencedTableSql`).
   */
  async release(q: Queryable, input: { id: string; fencingToken: string | bigint }): Promise<ReleaseResult> {
    const rowId = normaliseId(input.id);
    const token = normaliseToken(input.fencingToken);
    const { rows } = await runQuery<{ status: FencedStatus; token: string | null; intent_key: string; session_id: string; last_fencing_token: string }>(
      q,
      'release',
      this.sql.release,
      [rowId, token],
    );
    const row = rows[0];
    if (!row) return { status: 'NOT_FOUND' };
    if (row.token !== null && BigInt(row.token) > BigInt(token)) return { status: 'FENCED_OUT' };
    if (row.status !== 'RELEASED' || row.token !== token) return { status: 'NOT_COMPLETED', from: row.status };
    return { status: 'RELEASED', intentKey: row.intent_key, sessionId: row.session_id, lastFencingToken: row.last_fencing_token };
  }

  private async transition(q: Queryable, name: keyof typeof TRANSITIONS, input: TransitionInput): Promise<TransitionResult> {
    const intentKey = checkText(input.intentKey, 'intentKey');
    const token = normaliseToken(input.fencingToken);
    const { to, from } = TRANSITIONS[name];
    const { rows } = await runQuery<{ status: FencedStatus; owned: boolean }>(q, name, this.sql.transition, [intentKey, token, [...from], to]);
    const row = rows[0];
    if (!row) return { status: 'NOT_FOUND' };
    if (!row.owned) return { status: 'FENCED_OUT' };
    if (row.status === to) return { status: 'OK' };
    return { status: 'ILLEGAL_TRANSITION', from: row.status };
  }

  /** The data as one JSON document holding exactly the data columns. */
  private encodeData(data: unknown): string {
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      throw new InvalidArgumentError('data', 'must be an object with one value per data column');
    }
    const record = data as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      if (!this.dataColumns.includes(key)) throw new InvalidArgumentError(`data.${key}`, 'is not a data column of this table');
    }
    const picked: Record<string, unknown> = {};
    for (const column of this.dataColumns) {
      if (record[column] === undefined) throw new InvalidArgumentError(`data.${column}`, 'is missing (use null for SQL NULL)');
      picked[column] = record[column];
    }
    try {
      return JSON.stringify(picked, (key, value: unknown) => {
        if (key.includes('\u0000') || (typeof value === 'string' && value.includes('\u0000'))) {
          throw new InvalidArgumentError('data', 'strings may not contain NUL (U+0000)');
        }
        return typeof value === 'bigint' ? value.toString() : value;
      });
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err;
      throw new InvalidArgumentError('data', `is not JSON-serialisable: ${(err as Error).message}`);
    }
  }
}

/** Checks a fencing token and returns it as a canonical decimal string. */
export function normaliseToken(token: unknown): string {
  let value: bigint;
  if (typeof token === 'bigint') value = token;
  else if (typeof token === 'string' && /^[1-9][0-9]{0,18}$/.test(token)) value = BigInt(token);
  else throw new InvalidArgumentError('fencingToken', `${describe(token)} is not a positive integer as a decimal string or bigint`);
  if (value <= 0n || value > MAX_BIGINT) throw new InvalidArgumentError('fencingToken', `${value} is outside 1..${MAX_BIGINT}`);
  return value.toString();
}

/** Checks a row id (a positive bigint as a decimal string). */
/**
 * Whether `id` is an id a row can have: a positive decimal integer within PostgreSQL's bigint. An id
 * that is not one names no row, whatever the table holds.
 */
export function isRowId(id: unknown): id is string {
  return typeof id === 'string' && /^[1-9][0-9]{0,18}$/.test(id) && BigInt(id) <= MAX_BIGINT;
}

function normaliseId(id: unknown): string {
  if (!isRowId(id)) {
    throw new InvalidArgumentError('id', `${describe(id)} is not a row id (a positive integer as a decimal string)`);
  }
  return id;
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value;
}
branded(FencedTable, Symbol.for('reservation-saga/FencedTable'));
