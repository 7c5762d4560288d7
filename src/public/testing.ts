/**
 * `reservation-saga/testing`: what an app's tests set up around its sagas, in one call. A database,
 * Redis key prefix and task queue of the run's own, the app's migrations applied, a throwaway
 * Temporal dev server, a worker of the app's saga types in the test's process and a client; `stop()`
 * removes all of it. `startTestDatabase` is the database alone, for tests that need PostgreSQL only.
 * The dev server comes from the Temporal CLI (TEMPORAL_CLI, else `temporal` on PATH), else from the
 * download of `@temporalio/testing`, an optional peer dependency loaded only then.
 */
export {
  startTestEnvironment,
  startTestDatabase,
  type TestEnvironment,
  type SagaTestEnvironment,
  type TestEnvironmentOptions,
  type TestWorkerOptions,
  type TestDatabase,
  type TestDatabaseOptions,
  type MigrateDatabase,
} from '../testing/environment';
export { TestEnvironmentError, TemporalCliNotFoundError, DevServerStartError } from '../testing/dev-server';
