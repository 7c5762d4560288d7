/**
 * The services a run owns: a Temporal dev server on free ports (the existing CLI binary, as the test
 * setup does), a throwaway database migrated with src/db/migrate.ts, and a Redis key prefix. All of
 * them go away in {@link Services.close}, also when the run fails or is interrupted.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { generateCodecKey } from '../../src/codec/keys';
import { loadConfig, type Config } from '../../src/config';
import { ensureDatabase } from '../../src/db/migrate';
import { PROJECT_ROOT } from '../../src/paths';

import { SEARCH_ATTRIBUTES } from '../../src/shared';
import { freePort } from '../../scripts/demo/stack';
import type { Progress } from './progress';
import type { Machine } from './report';
import { createProviderServer, ensureProviderSchema } from '../../test/fixtures/orders';
import { migrateOrders } from '../../test/fixtures/orders';

/** What a run has started, and how to take it all down. */
export interface Services {
  /** A config for the run's services; benchmarks derive task queues and prefixes from it. */
  config: Config;
  /** Prefix of every Redis key the run writes (deleted at the end). */
  redisPrefix: string;
  /** Path of the Temporal CLI binary serving the dev server. */
  temporalCli: string;
  /** The dev server's own metrics (Prometheus text, `--metrics-port`): what the server did, counted (bench/lib/server-work.ts). */
  serverMetricsUrl: string;
  /** Stops the dev server, drops the database, deletes the prefix. A second call waits for the first. */
  close: () => Promise<void>;
}

function temporalExecutable(): string {
  const found = execFileSync(path.join(PROJECT_ROOT, 'scripts/ensure-temporal'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  // The SDK's own download would be a network dependency in a benchmark: refuse it.
  if (!found) throw new Error('no Temporal CLI found (scripts/ensure-temporal); set TEMPORAL_CLI or install Go');
  return found;
}

/** Deletes every key matching `pattern` (SCAN + UNLINK, in batches). Returns how many. */
export async function deleteKeys(redis: Redis, pattern: string): Promise<number> {
  let deleted = 0;
  for await (const keys of redis.scanStream({ match: pattern, count: 5000 })) {
    const batch = keys as string[];
    if (batch.length > 0) deleted += await redis.unlink(...batch);
  }
  return deleted;
}

/** Redis's `used_memory` (INFO memory), bytes: the whole server's. */
export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

/**
 * A client, not yet connected, on the `postgres` database of the server of `databaseUrl`: for what
 * must not run on a database it drops (`WITH (FORCE)` would end it), nor be counted in one it reads.
 */
export function postgresDatabaseClient(databaseUrl: string): pg.Client {
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  return new pg.Client({ connectionString: url.toString() });
}

/** Drops `databases` of the server of `databaseUrl` `WITH (FORCE)` (their connections are ended), if they exist. */
export async function dropDatabases(databaseUrl: string, databases: string[]): Promise<void> {
  const admin = postgresDatabaseClient(databaseUrl);
  try {
    await admin.connect();
    for (const database of databases) await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/**
 * A Redis key prefix no key uses yet: `rb` + 4 random base-36 characters + `:`. Short on purpose: it
 * is 4 bytes longer than the default `rs:`, so the memory figures stay close to a deployment's.
 */
async function unusedPrefix(url: string): Promise<string> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    for (let attempt = 0; attempt < 10; attempt++) {
      const prefix = `rb${randomBytes(4).readUInt32BE().toString(36).slice(-4).padStart(4, '0')}:`;
      let used = false;
      for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 10_000 })) used ||= (keys as string[]).length > 0;
      if (!used) return prefix;
    }
    throw new Error('no unused Redis key prefix found in 10 attempts');
  } finally {
    redis.disconnect();
  }
}

/** Starts the run's services. On failure, whatever was started is taken down before the error propagates. */
export async function startServices(progress: Progress): Promise<Services> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  // The run's own services replace any Temporal or Cluster settings of the caller's environment.
  const base = loadConfig({ ...process.env, REDIS_CLUSTER_NODES: '', TEMPORAL_TLS: '', TEMPORAL_API_KEY: '', TEMPORAL_TLS_CERT_PATH: '', TEMPORAL_TLS_KEY_PATH: '' });
  const databaseName = `rs_bench_${runId}`;
  const databaseUrl = new URL(base.db.url);
  databaseUrl.pathname = `/${databaseName}`;
  const redisPrefix = await unusedPrefix(base.redis.url);

  let env: TestWorkflowEnvironment | undefined;
  let provider: { close(): Promise<unknown> } | undefined;
  let providerPool: pg.Pool | undefined;
  let databaseCreated = false;
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= closeOnce());
  const closeOnce = async () => {
    const failures: string[] = [];
    await env?.teardown().catch((err: unknown) => failures.push(`Temporal dev server: ${String(err)}`));
    await provider?.close().catch((err: unknown) => failures.push(`payment provider: ${String(err)}`));
    await providerPool?.end().catch(() => undefined);
    if (databaseCreated) await dropDatabases(base.db.url, [databaseName]).catch((err: unknown) => failures.push(`drop database ${databaseName}: ${String(err)}`));
    const redis = new Redis(base.redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await deleteKeys(redis, `${redisPrefix}*`);
    } catch (err) {
      failures.push(`delete Redis keys ${redisPrefix}*: ${String(err)}`);
    } finally {
      redis.disconnect();
    }
    if (failures.length > 0) progress.log(`bench: cleanup incomplete:\n  ${failures.join('\n  ')}`);
  };

  try {
    progress.update(`creating database ${databaseName} and applying migrations`);
    databaseCreated = await ensureDatabase(databaseUrl.toString());
    await migrateOrders(databaseUrl.toString());
    // The payment provider the order saga charges through, in this process (as `make dev` runs one beside the workers).
    progress.update('starting the payment provider');
    providerPool = new pg.Pool({ connectionString: databaseUrl.toString(), max: 8 });
    // A connection the cleanup's DROP DATABASE … WITH (FORCE) ends while it is still opening reports
    // its error to the pool: without a listener, that error would end the run before its report.
    providerPool.on('error', (err) => progress.log(`bench: payment provider pool: ${err.message}`));
    await ensureProviderSchema(providerPool);
    const server = createProviderServer({ pool: providerPool });
    provider = server;
    await server.listen({ host: '127.0.0.1', port: 0 });
    const providerUrl = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
    progress.update('starting a Temporal dev server');
    const temporalCli = temporalExecutable();
    const metricsPort = await freePort();
    env = await TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'existing-path', path: temporalCli },
        searchAttributes: [...SEARCH_ATTRIBUTES],
        extraArgs: ['--log-level', 'error', '--output', 'none', '--metrics-port', String(metricsPort)],
      },
    });
    const config = loadConfig({
      ...process.env,
      REDIS_CLUSTER_NODES: '',
      TEMPORAL_TLS: '',
      TEMPORAL_API_KEY: '',
      TEMPORAL_TLS_CERT_PATH: '',
      TEMPORAL_TLS_KEY_PATH: '',
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: `bench-${runId}`,
      DATABASE_URL: databaseUrl.toString(),
      REDIS_KEY_PREFIX: redisPrefix,
      // The run's own intent-key secret (its worker processes get it through configEnv).
      INTENT_KEY_SECRET: randomBytes(32).toString('base64'),
      SAGA_CODEC_KEYS: generateCodecKey('bench'),
    });
    // The order app reads its provider from the environment: this process's and its children's.
    process.env.PAYMENT_PROVIDER_URL = providerUrl;
    return { config, redisPrefix, temporalCli, serverMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The machine and the versions of everything measured. */
export async function machineInfo(config: Config, temporalCli: string): Promise<Machine> {
  const redis = new Redis(config.redis.url, { maxRetriesPerRequest: 1 });
  const client = new pg.Client({ connectionString: config.db.url });
  try {
    const info = await redis.info('server');
    await client.connect();
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    const temporal = execFileSync(temporalCli, ['--version'], { encoding: 'utf8' }).trim();
    const cpus = os.cpus();
    return {
      cpus: cpus.length,
      cpuModel: cpus[0]?.model.trim() ?? 'unknown CPU',
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
      postgres: rows[0]?.server_version ?? 'unknown',
      temporalCli: /version (\S+)/.exec(temporal)?.[1] ?? temporal,
      loadAverage: { start: os.loadavg()[0]!, end: Number.NaN },
    };
  } finally {
    redis.disconnect();
    await client.end();
  }
}
