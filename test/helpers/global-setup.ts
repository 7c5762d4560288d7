/**
 * Once per integration run: a Temporal dev server of its own (free ports, the project's search
 * attributes), a database of its own (migrated), a Redis key prefix of its own, and the workflow
 * code bundled once. Everything is torn down at the end.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode } from '@temporalio/worker';
import { FAILURE_CONVERTER_PATH } from '../../src/codec';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { ensureDatabase, migrate } from '../../src/db/migrate';
import { SEARCH_ATTRIBUTES } from '../../src/shared';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    databaseUrl: string;
    redisUrl: string;
    runPrefix: string;
    workflowBundlePath: string;
    /** The Temporal CLI the dev server runs from ('' when the SDK downloaded its own server). */
    temporalCli: string;
  }
}

const ROOT = path.resolve(__dirname, '../..');
const PG_BASE = process.env.TEST_DATABASE_BASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

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
  await migrate(databaseUrl.toString());

  const executable = temporalExecutable();
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable,
      searchAttributes: [...SEARCH_ATTRIBUTES],
      extraArgs: ['--log-level', 'error'],
    },
  });

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

  project.provide('temporalAddress', env.address);
  project.provide('databaseUrl', databaseUrl.toString());
  project.provide('redisUrl', REDIS_URL);
  project.provide('runPrefix', runPrefix);
  project.provide('workflowBundlePath', workflowBundlePath);
  project.provide('temporalCli', executable.type === 'existing-path' ? executable.path : '');

  return async () => {
    await env.teardown();
    rmSync(bundleDir, { recursive: true, force: true });
    const admin = new pg.Client({ connectionString: PG_BASE });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`);
    await admin.end();
    await deleteKeys(REDIS_URL, `${runPrefix}*`);
  };
}

async function deleteKeys(url: string, pattern: string): Promise<void> {
  const redis = new Redis(url);
  try {
    for await (const keys of redis.scanStream({ match: pattern, count: 1000 })) {
      if ((keys as string[]).length > 0) await redis.unlink(...(keys as string[]));
    }
  } finally {
    redis.disconnect();
  }
}

const noop = () => {};
const quietLogger = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: console.error };
