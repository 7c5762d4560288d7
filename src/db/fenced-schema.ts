/**
 * The schema side of a fenced table, for the app that owns it: the SQL that creates one, and the
 * check a worker runs before it polls, so a table missing a column stops the worker at start-up
 * with the table and column named, not a saga half-way.
 */
import { DbError } from './errors';
import { FENCING_COLUMNS, OWNER_COLUMN, type FencedTable } from './fenced-table';
import { quoteIdentifier, quoteQualifiedName } from './identifiers';
import { runQuery, type Queryable } from './queryable';

/** The column an entity operation's claims fence by (`FencedTable.claim`). */
export const OPERATION_COLUMN = 'last_operation_token';

/** The columns a table that entity operations claim needs: the claims' token and the entity's owner. */
export const OPERATION_COLUMNS = [OPERATION_COLUMN, OWNER_COLUMN] as const;

/** The statuses a fenced table's CHECK allows, as SQL. */
const STATUSES_SQL = "status IN ('PROCESSING', 'REGISTERED', 'COMPLETED', 'FAILED', 'COMPENSATED', 'RELEASED')";

/** The predicate of the unique index that keeps one live row per intent (writeFenced's arbiter). */
const LIVE_PREDICATE = "status <> 'RELEASED'";

/** The name of an index of `table` (its unqualified part, clipped to fit 63 bytes) ending in `suffix`, quoted. */
function indexName(table: string, suffix: string): string {
  const base = table.split('.').pop()!;
  return quoteIdentifier(`${base.slice(0, 63 - suffix.length)}${suffix}`, 'table');
}

/** The two indexes of intent_key: one live row per intent (unique), and every row of it (released ones too). */
function intentIndexesSql(table: string): string[] {
  const name = quoteQualifiedName(table, 'table');
  return [
    `CREATE UNIQUE INDEX IF NOT EXISTS ${indexName(table, '_live_intent_key')} ON ${name} (intent_key) WHERE ${LIVE_PREDICATE};`,
    `CREATE INDEX IF NOT EXISTS ${indexName(table, '_intent_key_token')} ON ${name} (intent_key, last_fencing_token);`,
  ];
}

/**
 * `CREATE TABLE IF NOT EXISTS` for a fenced table, and its indexes: the fencing columns every
 * fenced table needs, then the app's own data columns, given as SQL (`'room text NOT NULL, night
 * date NOT NULL'`). With `operations`, also `last_operation_token` and `created_by` (who each entity
 * was created for: only operations of the same owner find it), which entity operations on its rows
 * need. Several statements: run it as one query (node-postgres sends a parameterless query whole).
 *
 * - `id bigint` identity primary key: the entity's id, handed to operations.
 * - `intent_key text`, unique among the rows that are not RELEASED: the last failsafe against a
 *   duplicate, whatever Redis knows. A released entity's row stays, and its intent may have a new one.
 * - `status`: PROCESSING → REGISTERED → COMPLETED → (RELEASED), or FAILED / COMPENSATED.
 * - `last_fencing_token bigint`: a stale holder can never overwrite a newer one.
 * - `session_id text`: the holder's reservation session.
 */
export function fencedTableSql(table: string, dataColumnsSql: string, options: { operations?: boolean } = {}): string {
  const name = quoteQualifiedName(table, 'table');
  const data = dataColumnsSql.trim().replace(/,\s*$/, '');
  return [
    `CREATE TABLE IF NOT EXISTS ${name} (`,
    '  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,',
    '  intent_key         text        NOT NULL,',
    `  status             text        NOT NULL CHECK (${STATUSES_SQL}),`,
    '  last_fencing_token bigint      NOT NULL CHECK (last_fencing_token > 0),',
    '  session_id         text        NOT NULL,',
    ...(options.operations ? [`  ${OPERATION_COLUMN} bigint CHECK (${OPERATION_COLUMN} > 0),`, `  ${OWNER_COLUMN} text NOT NULL DEFAULT '',`] : []),
    ...(data ? [`  ${data},`] : []),
    '  created_at         timestamptz NOT NULL DEFAULT now(),',
    '  updated_at         timestamptz NOT NULL DEFAULT now()',
    ');',
    ...intentIndexesSql(table),
  ].join('\n');
}

/**
 * The migration that lets a fenced table of the earlier shape (`intent_key UNIQUE`, a status CHECK
 * without RELEASED, as `fencedTableSql` wrote it before releases) hold released rows, keeping every
 * row: the indexes `fencedTableSql` now creates, then the UNIQUE constraint of intent_key and the old
 * status CHECK replaced. Run it once, in a migration of the app's own, before a worker with an
 * operation that releases (`releases: true`) starts; running it again changes nothing.
 */
export function fencedTableReleaseSql(table: string): string {
  const name = quoteQualifiedName(table, 'table');
  // Identifiers are strict (no quote of either kind), so the name is safe in a string literal too.
  const literal = `'${name}'`;
  const attnum = (column: string) => `(SELECT attnum FROM pg_attribute WHERE attrelid = ${literal}::regclass AND attname = '${column}')`;
  return [
    ...intentIndexesSql(table),
    'DO $release$',
    'DECLARE c record;',
    'BEGIN',
    '  FOR c IN SELECT conname FROM pg_constraint',
    `            WHERE conrelid = ${literal}::regclass`,
    `              AND ((contype = 'u' AND conkey = ARRAY[${attnum('intent_key')}])`,
    `                OR (contype = 'c' AND conkey = ARRAY[${attnum('status')}] AND pg_get_constraintdef(oid) NOT LIKE '%RELEASED%'))`,
    '  LOOP',
    `    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', ${literal}, c.conname);`,
    '  END LOOP;',
    `  IF NOT EXISTS (SELECT FROM pg_constraint WHERE conrelid = ${literal}::regclass AND contype = 'c' AND conkey = ARRAY[${attnum('status')}]) THEN`,
    `    ALTER TABLE ${name} ADD CHECK (${STATUSES_SQL});`,
    '  END IF;',
    'END',
    '$release$;',
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
export async function checkFencedTable(q: Queryable, table: FencedTable, options: { operations?: boolean; releases?: boolean; sagaType?: string } = {}): Promise<void> {
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
  if (options.releases) await checkReleasable(q, table, who);
}

/**
 * What a table needs to hold released rows: no UNIQUE over every row's intent_key, the unique index
 * of the live rows (writeFenced's arbiter), and a status CHECK that allows RELEASED.
 */
async function checkReleasable(q: Queryable, table: FencedTable, who: string): Promise<void> {
  const { rows } = await runQuery<{ unique_everywhere: boolean; live_unique: boolean; status_refused: boolean }>(
    q,
    'checkReleasable',
    `WITH t AS (SELECT to_regclass($1) AS rel),
          k AS (SELECT attnum FROM pg_attribute, t WHERE attrelid = t.rel AND attname = 'intent_key'),
          s AS (SELECT attnum FROM pg_attribute, t WHERE attrelid = t.rel AND attname = 'status')
     SELECT EXISTS (SELECT FROM pg_index, t, k WHERE indrelid = t.rel AND indisunique AND indpred IS NULL AND indnatts = 1 AND indkey[0] = k.attnum) AS unique_everywhere,
            EXISTS (SELECT FROM pg_index, t, k WHERE indrelid = t.rel AND indisunique AND indnatts = 1 AND indkey[0] = k.attnum
                      AND pg_get_expr(indpred, indrelid) = $2) AS live_unique,
            EXISTS (SELECT FROM pg_constraint, t, s WHERE conrelid = t.rel AND contype = 'c' AND s.attnum = ANY (conkey)
                      AND pg_get_constraintdef(oid) NOT LIKE '%RELEASED%') AS status_refused`,
    [quoteQualifiedName(table.table, 'table'), `(${LIVE_PREDICATE}::text)`],
  );
  const found = rows[0]!;
  const reasons = [
    ...(found.unique_everywhere ? ['its intent_key is UNIQUE over every row'] : []),
    ...(found.live_unique ? [] : [`it has no unique index on intent_key WHERE ${LIVE_PREDICATE}`]),
    ...(found.status_refused ? ["its status CHECK has no 'RELEASED'"] : []),
  ];
  if (reasons.length === 0) return;
  throw new FencedTableSchemaError(`${who}table "${table.table}" cannot hold released rows: ${reasons.join('; ')} (migrate it with fencedTableReleaseSql, see docs)`, table.table, []);
}
