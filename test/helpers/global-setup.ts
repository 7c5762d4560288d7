/**
 * Once per integration run: a Temporal dev server of its own (free ports, the project's search
 * attributes), a database of its own (migrated), a Redis key prefix of its own, and the workflow
 * code bundled once. Everything is torn down at the end.
 *
 * With TEST_TEMPORAL_ADDRESS set (`make test-stack`), the run uses that Temporal server instead of
 * starting one, in a namespace of its own (`rstest-<run>`, made and readied by `saga setup`'s
 * `setupCluster`, deleted at the end), so runs sharing the server never see each other's workflows.
 * TEST_REDIS_CLUSTER_NODES (host:port,...) points the RMS at a Redis Cluster instead of TEST_REDIS_URL.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode } from '@temporalio/worker';
import { FAILURE_CONVERTER_PATH } from '../../src/codec';
import { Connection } from '@temporalio/client';
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../src/config';
import { ensureDatabase } from '../../src/db/migrate';
import { setupCluster } from '../../src/setup';
import { SEARCH_ATTRIBUTES } from '../../src/shared';
import { TEST_CODEC_KEYS, TEST_INTENT_SECRET } from './secrets';
import { migrateOrders } from '../fixtures/orders';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    /** The run's namespace: `default` on its own dev server, `rstest-<run>` on a shared server. */
    temporalNamespace: string;
    databaseUrl: string;
    redisUrl: string;
    /** Seed nodes (host:port,...) of the Redis Cluster the sagas use, or '' for `redisUrl`. */
    redisClusterNodes: string;
    runPrefix: string;
    workflowBundlePath: string;
    /** The Temporal CLI the dev server runs from ('' when the SDK downloaded its own server). */
    temporalCli: string;
  }
}

const ROOT = path.resolve(__dirname, '../..');
const PG_BASE = process.env.TEST_DATABASE_BASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const REDIS_CLUSTER_NODES = process.env.TEST_REDIS_CLUSTER_NODES ?? '';
/** A running Temporal server to use instead of a dev server of the run's own. */
const SHARED_TEMPORAL = process.env.TEST_TEMPORAL_ADDRESS;

function temporalExecutable(): { type: 'existing-path'; path: string } | { type: 'cached-download' } {
  const found = execFileSync(path.join(ROOT, 'scripts/ensure-temporal'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  return found ? { type: 'existing-path', path: found } : { type: 'cached-download' };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const databaseName = `rs_test_${runId}`;
  const databaseUrl = new URL(PG_BASE);
  databaseUrl.pathname = `/${databaseName}`;
  const runPrefix = `rstest:${runId}:`;

  await ensureDatabase(databaseUrl.toString());
  await migrateOrders(databaseUrl.toString());

  const executable = temporalExecutable();
  const temporal = SHARED_TEMPORAL ? await sharedServer(SHARED_TEMPORAL, `rstest-${runId}`) : await ownDevServer(executable);

  const bundleDir = mkdtempSync(path.join(tmpdir(), 'rs-bundle-'));
  const workflowBundlePath = path.join(bundleDir, 'workflow-bundle.js');
  // With the failure converter of the encryption codec, as the workers' own bundle has it.
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(ROOT, 'src/workflows'),
    failureConverterPath: FAILURE_CONVERTER_PATH,
    // As the workers' own bundle has it: the saga interceptor that reports each saga's end.
    workflowInterceptorModules: [path.join(ROOT, 'src/workflows/interceptors.ts')],
    logger: quietLogger,
  });
  writeFileSync(workflowBundlePath, code);

  project.provide('temporalAddress', temporal.address);
  project.provide('temporalNamespace', temporal.namespace);
  project.provide('databaseUrl', databaseUrl.toString());
  project.provide('redisUrl', REDIS_URL);
  project.provide('redisClusterNodes', REDIS_CLUSTER_NODES);
  project.provide('runPrefix', runPrefix);
  project.provide('workflowBundlePath', workflowBundlePath);
  project.provide('temporalCli', executable.type === 'existing-path' ? executable.path : '');

  return async () => {
    await temporal.teardown();
    rmSync(bundleDir, { recursive: true, force: true });
    const admin = new pg.Client({ connectionString: PG_BASE });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`);
    await admin.end();
    await deleteKeys(`${runPrefix}*`);
  };
}

interface RunServer {
  address: string;
  namespace: string;
  teardown(): Promise<void>;
}

/** A dev server of the run's own, on free ports, with the project's search attributes. */
async function ownDevServer(executable: ReturnType<typeof temporalExecutable>): Promise<RunServer> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable,
      searchAttributes: [...SEARCH_ATTRIBUTES],
      extraArgs: ['--log-level', 'error'],
    },
  });
  return { address: env.address, namespace: 'default', teardown: () => env.teardown() };
}

/**
 * A namespace of the run's own on a running server, readied as any cluster is (`saga setup`: search
 * attributes, purge schedule); deleted at the end (the server removes its workflows in the background).
 */
async function sharedServer(address: string, namespace: string): Promise<RunServer> {
  const config = loadConfig({
    TEMPORAL_ADDRESS: address,
    TEMPORAL_NAMESPACE: namespace,
    INTENT_KEY_SECRET: TEST_INTENT_SECRET.toString('base64'),
    SAGA_CODEC_KEYS: TEST_CODEC_KEYS,
  });
  await setupCluster(config, { createNamespace: true, retention: '1d' });
  return {
    address,
    namespace,
    async teardown() {
      const connection = await Connection.connect({ address });
      try {
        await connection.operatorService.deleteNamespace({ namespace });
      } finally {
        await connection.close();
      }
    },
  };
}

/** Deletes the run's keys on the single instance and, when the run had one, on every cluster master. */
async function deleteKeys(pattern: string): Promise<void> {
  await deleteKeysOn(new Redis(REDIS_URL), pattern);
  if (!REDIS_CLUSTER_NODES) return;
  const cluster = new Cluster(
    REDIS_CLUSTER_NODES.split(',').map((node) => {
      const [host, port] = node.trim().split(':');
      return { host: host!, port: Number(port) };
    }),
  );
  try {
    await cluster.ping();
    for (const master of cluster.nodes('master')) await deleteKeysOn(master, pattern, false);
  } finally {
    cluster.disconnect();
  }
}

async function deleteKeysOn(redis: Redis, pattern: string, disconnect = true): Promise<void> {
  try {
    for await (const keys of redis.scanStream({ match: pattern, count: 1000 })) {
      // One UNLINK per key: on a cluster master, keys of different slots may not share a command.
      for (const key of keys as string[]) await redis.unlink(key);
    }
  } finally {
    if (disconnect) redis.disconnect();
  }
}

const noop = () => {};
const quietLogger = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: console.error };
