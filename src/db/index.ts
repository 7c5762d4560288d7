/**
 * The PostgreSQL layer: pool, migrations, fenced entity rows, the step idempotency store, and
 * their errors. Never imports `@temporalio/*`.
 */
export type { Queryable } from './queryable';
export {
  FencedTable,
  FENCED_STATUSES,
  TRANSITIONS,
  type ClaimableRow,
  type ClaimResult,
  type ReleaseResult,
  type FencedRow,
  type FencedStatus,
  type FencedTableOptions,
  type TransitionInput,
  type TransitionResult,
  type WriteFencedInput,
  type WriteFencedResult,
} from './fenced-table';
export { canonicalJson, keyedRequestHash, requestHash } from './canonical-json';
export {
  finishExternal,
  purgeIdempotencyBatch,
  purgeIdempotencyRecords,
  startExternal,
  tombstoneIdempotencyKey,
  withIdempotency,
  type ExternalRecord,
  type IdempotencyInput,
  type IdempotentResult,
} from './idempotency';
export {
  DbError,
  DbUnavailableError,
  IdempotencyKeyReuseError,
  IdempotencyKeyTombstonedError,
  IdempotencyRecordStateError,
  InvalidArgumentError,
  isUnavailable,
  translateDbError,
} from './errors';
export { createPool, type PoolOptions } from './pool';
export { ensureDatabase, migrate, MIGRATIONS_DIR, MIGRATIONS_TABLE, type MigrateOptions } from './migrate';
export { checkFencedTable, fencedTableReleaseSql, fencedTableSql, FencedTableSchemaError, OPERATION_COLUMN } from './fenced-schema';
