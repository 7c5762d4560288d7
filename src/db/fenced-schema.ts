/**
 * The schema side of a fenced table, for the app that owns it: the SQL that creates one, and the
 * check a worker runs before it polls, so a table missing a column stops the worker at start-up
 * with the table and column named, not a saga half-way.
 */
import { DbError } from './errors';
import { FENCING_COLUMNS, OWNER_COLUMN, type FencedTable } from './fenced-table';
import { quoteQualifiedName } from './identifiers';
import { runQuery, type Queryable } from './queryable';

/** The column an entity operation's claims fence by (`FencedTable.claim`). */
export const OPERATION_COLUMN = 'last_operation_token';

/** The columns a table that entity operations claim needs: the claims' token and the entity's owner. */
export const OPERATION_COLUMNS = [OPERATION_COLUMN, OWNER_COLUMN] as const;

/**
 * `CREATE TABLE IF NOT EXISTS` for a fenced table: the fencing columns every fenced table needs,
 * then the app's own data columns, given as SQL (`'room text NOT NULL, night date NOT NULL'`).
 * With `operations`, also `last_operation_token` and `created_by` (who each entity was created for:
 * only operations of the same owner find it), which entity operations on its rows need.
 *
 * - `id bigint` identity primary key: the entity's id, handed to operations.
 * - `intent_key text UNIQUE`: the last failsafe against a duplicate, whatever Redis knows.
 * - `status`: PROCESSING → REGISTERED → COMPLETED, or FAILED / COMPENSATED.
 * - `last_fencing_token bigint`: a stale holder can never overwrite a newer one.
 * - `session_id text`: the holder's reservation session.
 */
export function fencedTableSql(table: string, dataColumnsSql: string, options: { operations?: boolean } = {}): string {
  const name = quoteQualifiedName(table, 'table');
  const data = dataColumnsSql.trim().replace(/,\s*$/, '');
  return [
    `CREATE TABLE IF NOT EXISTS ${name} (`,
    '  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,',
    '  intent_key         text        NOT NULL UNIQUE,',
    "  status             text        NOT NULL CHECK (status IN ('PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED')),",
    '  last_fencing_token bigint      NOT NULL CHECK (last_fencing_token > 0),',
    '  session_id         text        NOT NULL,',
    ...(options.operations ? [`  ${OPERATION_COLUMN} bigint CHECK (${OPERATION_COLUMN} > 0),`, `  ${OWNER_COLUMN} text NOT NULL DEFAULT '',`] : []),
    ...(data ? [`  ${data},`] : []),
    '  created_at         timestamptz NOT NULL DEFAULT now(),',
    '  updated_at         timestamptz NOT NULL DEFAULT now()',
    ');',
  ].join('\n');
}

/** Thrown when a registered saga type's table lacks a column it needs: the worker refuses to start. */
export class FencedTableSchemaError extends DbError {
  override readonly name = 'FencedTableSchemaError';
  constructor(
    message: string,
    readonly table: string,
    /** The columns missing (the whole table's, when it does not exist). */
    readonly missing: readonly string[],
  ) {
    super(message);
  }
}

/**
 * Checks that `table` exists (through the connection's `search_path` when unqualified) with the
 * fencing columns, its data columns, and with `operations` the operation column.
 * @throws FencedTableSchemaError naming the table and every column missing.
 */
export async function checkFencedTable(q: Queryable, table: FencedTable, options: { operations?: boolean; sagaType?: string } = {}): Promise<void> {
  const { rows } = await runQuery<{ exists: boolean; columns: string[] | null }>(
    q,
    'checkFencedTable',
    `SELECT to_regclass($1) IS NOT NULL AS exists,
            (SELECT array_agg(attname::text) FROM pg_attribute
              WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped) AS columns`,
    [quoteQualifiedName(table.table, 'table')],
  );
  const who = options.sagaType ? `saga type ${JSON.stringify(options.sagaType)}: ` : '';
  const needed = [...FENCING_COLUMNS, ...(options.operations ? OPERATION_COLUMNS : []), ...table.dataColumns];
  if (!rows[0]?.exists) {
    throw new FencedTableSchemaError(`${who}table "${table.table}" does not exist (create it with fencedTableSql, see docs)`, table.table, needed);
  }
  const present = new Set(rows[0].columns ?? []);
  const missing = needed.filter((c) => !present.has(c));
  if (missing.length > 0) {
    throw new FencedTableSchemaError(
      `${who}table "${table.table}" lacks column${missing.length > 1 ? 's' : ''} ${missing.map((c) => `"${c}"`).join(', ')}`,
      table.table,
      missing,
    );
  }
}
