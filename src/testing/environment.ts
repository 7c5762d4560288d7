/**
 * What an app's tests set up around its sagas, made and removed in one call each: a database of the
 * run's own (migrated), a Redis key prefix and a task queue of its own, a throwaway Temporal dev server,
 * a worker in the test's process and a client. `stop()` removes all of it, however the tests went.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { SagaClient } from '../client';
import { configEnv, loadConfig, type Config } from '../config';
import { ensureDatabase, migrate as migrateLibrary } from '../db/migrate';
import { createRedis } from '../rms/connection';
import type { SagaList } from '../sagas';
import { createWorker, type AppWorker } from '../worker';
import { startDevServer, TestEnvironmentError, type DevServer } from './dev-server';

/** Applies an app's schema to a database: the function its migrate script exports. */
export type MigrateDatabase = (databaseUrl: string) => Promise<unknown>;

/** Options of `startTestDatabase`. */
export interface TestDatabaseOptions {
  /**
   * Readies the new database, given its URL: the app's migrate function (which applies the library's
   * tables as well), or `false` for an empty database.
   * @default the library's tables (`migrate` of `reservation-saga/worker`)
   */
  migrate?: MigrateDatabase | false;
  /**
   * A URL of the PostgreSQL server to make the database on; its database name is not used.
   * @default DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres
   */
  serverUrl?: string;
}

/** A database of the test's own, made by `startTestDatabase`. */
export interface TestDatabase {
  /** Its name: `saga_test_<run>`. */
  name: string;
  /** Its URL. */
  url: string;
  /** A pool on it (opens connections only when used). */
  pool: pg.Pool;
  /** Ends the pool and drops the database, its connections closed first (`WITH (FORCE)`). */
  stop(): Promise<void>;
}

/** Options of `startTestEnvironment`. */
export interface TestEnvironmentOptions {
  /** The app's saga types: a worker runs them in this process and `client` starts them. */
  sagas?: SagaList;
  /**
   * Readies the run's database, given its URL: the app's migrate function (which applies the library's
   * tables as well).
   * @default the library's tables
   */
  migrate?: MigrateDatabase;
  /**
   * Settings as `loadConfig` reads them (environment variables), e.g. `{ LEASE_MS: '5000' }`. The run
   * makes its own database (on DATABASE_URL's server), Redis key prefix, task queue and secrets;
   * REDIS_URL defaults to the process's. TEMPORAL_ADDRESS names a running server (readied by `npx saga
   * setup`) to use instead of a dev server of the run's own. REDIS_KEY_PREFIX and TEMPORAL_TASK_QUEUE
   * are the run's: giving them is an error.
   * @default LOG_LEVEL WARN, the rest as the run makes them
   */
  settings?: Record<string, string | undefined>;
}

/** A worker's own task queue, for `startWorker`. */
export interface TestWorkerOptions {
  /**
   * A task queue of this worker's own, named `<the run's queue>-<taskQueue>`: for saga types declared
   * with other options than another worker's (other timings, say) in the same run.
   * @default the run's task queue
   */
  taskQueue?: string;
}

/** The run's services, made by `startTestEnvironment`. */
export interface TestEnvironment {
  /** The run's settings: its Temporal server, database, Redis key prefix, task queue and secrets. */
  config: Config;
  /** The same settings as environment variables, for a child process (`saga` CLI, a worker process). */
  variables: Record<string, string>;
  /** A pool on the run's database. */
  pool: pg.Pool;
  /**
   * Starts a worker of `sagas` in this process, on the run's task queue (or one of its own), and
   * returns a client of them; both stop with `stop()`.
   */
  startWorker<const S extends SagaList>(sagas: S, options?: TestWorkerOptions): Promise<SagaClient<S>>;
  /**
   * Removes everything the run made: closes its clients, stops its workers, drops its database
   * (`WITH (FORCE)`), deletes its Redis keys (SCAN and UNLINK of its prefix, never FLUSHDB) and stops
   * its dev server. Every step is tried; what failed is thrown at the end (a worker that failed as it ran
   * too). A second call does nothing.
   */
  stop(): Promise<void>;
}

/** A `TestEnvironment` whose worker runs the saga types it was given. */
export interface SagaTestEnvironment<S extends SagaList> extends TestEnvironment {
  /** A client of the saga types given as `sagas`. */
  client: SagaClient<S>;
}

const DEFAULT_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** Settings the run makes itself: its isolation, and what its teardown deletes. */
const RUN_OWNED = ['REDIS_KEY_PREFIX', 'TEMPORAL_TASK_QUEUE'] as const;

/** `<base36 time><6 hex>`: unique per run, and sorts by start. */
function runId(): string {
  return `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

/**
 * Makes a database of the test's own, `saga_test_<run>`, and migrates it (the library's tables unless
 * `migrate` says otherwise). For tests that need PostgreSQL alone; `startTestEnvironment` makes
 * one too.
 */
export async function startTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  return makeDatabase(runId(), options);
}

async function makeDatabase(run: string, options: TestDatabaseOptions): Promise<TestDatabase> {
  const name = `saga_test_${run}`;
  const url = new URL(options.serverUrl ?? process.env.DATABASE_URL ?? DEFAULT_SERVER_URL);
  url.pathname = `/${name}`;
  const admin = new URL(url);
  admin.pathname = '/postgres';
  await ensureDatabase(url.toString());
  const pool = new pg.Pool({ connectionString: url.toString() });
  // The database is dropped with its connections: an idle one's error is expected then, not a crash.
  pool.on('error', () => {});
  let stopped: Promise<void> | undefined;
  const database: TestDatabase = {
    name,
    url: url.toString(),
    pool,
    stop: () =>
      (stopped ??= (async () => {
        await pool.end().catch(() => {});
        const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
        await client.connect();
        try {
          await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
        } finally {
          await client.end();
        }
      })()),
  };
  try {
    if (options.migrate !== false) await (options.migrate ?? migrateLibrary)(database.url);
  } catch (err) {
    await database.stop().catch(() => {});
    throw err;
  }
  return database;
}

/**
 * Starts what an app's tests need around its sagas: a database of the run's own, migrated; a Redis
 * key prefix and a task queue of its own; a throwaway Temporal dev server (the Temporal CLI named by
 * TEMPORAL_CLI or on PATH, else `@temporalio/testing`'s download when that package is installed); and,
 * given `sagas`, a worker of them in this process and a client. Call it in a `before` hook and
 * `stop()` in the `after` hook. What was made before a failure is removed before
 * the error is thrown.
 * @throws TestEnvironmentError for a setting the run makes itself; ConfigError for a bad setting;
 *   TemporalCliNotFoundError when no dev server can be started; DevServerStartError when it does not come up.
 */
export async function startTestEnvironment<const S extends SagaList>(options: TestEnvironmentOptions & { sagas: S }): Promise<SagaTestEnvironment<S>>;
/**
 * The same without saga types: the run's services alone, its workers started with
 * `startWorker(sagas)` (for saga types that need something the run makes first, its database say).
 */
export async function startTestEnvironment(options?: TestEnvironmentOptions): Promise<TestEnvironment>;
export async function startTestEnvironment(options: TestEnvironmentOptions = {}): Promise<TestEnvironment | SagaTestEnvironment<SagaList>> {
  const settings = options.settings ?? {};
  for (const name of RUN_OWNED) {
    if (settings[name] !== undefined) {
      throw new TestEnvironmentError(`settings.${name}: the run makes its own (its teardown deletes what is under it); a worker of its own task queue is startWorker(sagas, { taskQueue })`);
    }
  }
  const run = runId();
  const given = settings.TEMPORAL_ADDRESS;
  const settingsOf = (temporalAddress: string, databaseUrl: string): NodeJS.ProcessEnv => ({
    LOG_LEVEL: 'WARN',
    REDIS_URL: process.env.REDIS_URL,
    INTENT_KEY_SECRET: randomBytes(32).toString('base64'),
    SAGA_CODEC_KEYS: `test:${randomBytes(32).toString('base64')}`,
    ...settings,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_TASK_QUEUE: `saga-test-${run}`,
    DATABASE_URL: databaseUrl,
    REDIS_KEY_PREFIX: `saga-test:${run}:`,
  });
  // A bad setting fails here, before anything is made.
  const checked = loadConfig(settingsOf(given ?? '127.0.0.1:7233', settings.DATABASE_URL ?? process.env.DATABASE_URL ?? DEFAULT_SERVER_URL));

  const teardown = new Teardown();
  try {
    // The database and the dev server at once; what was made is removed if the other fails.
    const [made, started] = await Promise.allSettled([
      makeDatabase(run, { migrate: options.migrate, serverUrl: checked.db.url }),
      given === undefined ? startDevServer({ namespace: checked.temporal.namespace }) : Promise.resolve(undefined),
    ]);
    if (made.status === 'fulfilled') teardown.add(() => made.value.stop());
    if (started.status === 'fulfilled' && started.value) {
      const server = started.value;
      teardown.add(() => server.stop());
    }
    if (started.status === 'rejected') throw started.reason;
    if (made.status === 'rejected') throw made.reason;
    const database = made.value;
    const server: DevServer | undefined = started.value;
    const config = loadConfig(settingsOf(server?.address ?? given!, database.url));
    teardown.add(() => deleteKeys(config));

    const startWorker = async <const T extends SagaList>(sagas: T, workerOptions: TestWorkerOptions = {}): Promise<SagaClient<T>> => {
      const { taskQueue } = workerOptions;
      if (taskQueue !== undefined && !/^[A-Za-z0-9_.-]{1,100}$/.test(taskQueue)) {
        throw new TestEnvironmentError(`startWorker taskQueue ${JSON.stringify(taskQueue)}: use letters, digits and _ . - (100 at most)`);
      }
      const own = taskQueue === undefined ? config : loadConfig({ ...configEnv(config), TEMPORAL_TASK_QUEUE: `${config.temporal.taskQueue}-${taskQueue}` });
      const app = await createWorker({ sagas, config: own });
      const failure: { error?: Error } = {};
      const running = app.worker.run().catch((err: unknown) => {
        failure.error = err instanceof Error ? err : new Error(String(err));
      });
      teardown.add(() => stopWorker(app, running, failure));
      const client = await SagaClient.connect({ sagas, config: own });
      teardown.add(() => client.close());
      return client;
    };

    const environment: TestEnvironment = {
      config,
      variables: configEnv(config),
      pool: database.pool,
      startWorker,
      stop: () => teardown.run(),
    };
    if (options.sagas === undefined) return environment;
    return { ...environment, client: await startWorker(options.sagas) };
  } catch (err) {
    await teardown.run().catch(() => {});
    throw err;
  }
}

/**
 * What to undo, undone last-made first (clients, workers, keys, the dev server, the database); each
 * step is tried, and what failed is thrown at the end (an AggregateError when several did); runs once.
 */
class Teardown {
  readonly #steps: (() => Promise<unknown>)[] = [];
  #done: Promise<void> | undefined;

  add(step: () => Promise<unknown>): void {
    this.#steps.push(step);
  }

  run(): Promise<void> {
    return (this.#done ??= (async () => {
      const errors: Error[] = [];
      for (const step of [...this.#steps].reverse()) {
        try {
          await step();
        } catch (err) {
          errors.push(err instanceof Error ? err : new Error(String(err)));
        }
      }
      if (errors.length === 1) throw errors[0]!;
      if (errors.length > 1) throw new AggregateError(errors, `stopping the test environment: ${errors.map((e) => e.message).join('; ')}`);
    })());
  }
}

async function stopWorker(app: AppWorker, running: Promise<void>, failure: { error?: Error }): Promise<void> {
  try {
    if (app.worker.getState() === 'RUNNING') app.worker.shutdown();
    await running;
  } finally {
    await app.close();
  }
  if (failure.error !== undefined) throw failure.error;
}

/** Deletes the run's keys: SCAN and UNLINK of its prefix, on every master of a cluster. */
async function deleteKeys(config: Config): Promise<void> {
  const redis = createRedis(config.redis);
  const pattern = `${config.redis.keyPrefix}*`;
  try {
    const nodes: Redis[] = redis.isCluster ? (await redis.ping(), (redis as Cluster).nodes('master')) : [redis as Redis];
    for (const node of nodes) {
      for await (const keys of node.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>) {
        // One UNLINK per key on a cluster: keys of different slots may not share a command.
        if (redis.isCluster) for (const key of keys) await node.unlink(key);
        else if (keys.length > 0) await node.unlink(...keys);
      }
    }
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}
