/**
 * `reservation-saga/worker`: run an app's saga types. `runWorker({ sagas })` is a worker process;
 * `createWorker` gives the Worker to run yourself (tests, a process that runs more). The generic
 * saga workflow is bundled inside the package: an app registers saga types and handlers, never
 * workflow code. `migrate` applies the library's tables (and an app's own folder of migrations);
 * `fencedTableSql` writes the CREATE TABLE of an app's fenced table.
 */
export { createWorker, runWorker, type StartWorkerOptions, type RunWorkerOptions, type AppWorker } from '../worker';
export { migrate, ensureDatabase, MIGRATIONS_TABLE, type MigrateOptions } from '../db/migrate';
export { fencedTableSql, fencedTableReleaseSql, checkFencedTable, FencedTableSchemaError, OPERATION_COLUMN } from '../db/fenced-schema';
export { createPool } from '../db/pool';
export { setupCluster, SetupError, type SetupOptions, type SetupReport } from '../setup';
