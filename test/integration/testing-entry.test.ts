/**
 * `reservation-saga/testing` as an app's tests use it: a saga runs to COMPLETED on the environment's
 * own dev server, database and key prefix, and `stop()` leaves no database, no Redis key and no dev
 * server behind, also when the test body failed (a node:test file of an app, run as `node --test`
 * runs it); the docs' example (the scaffold's test) passes from the checkout. Without a Temporal CLI it fails at once with a typed error that names the ways out,
 * having made nothing.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { startTestEnvironment, TemporalCliNotFoundError, TestEnvironmentError } from '../../src/public/testing';
import { bookingSagas, migrateBookings } from '../fixtures/testing-bookings';

const ROOT = path.resolve(__dirname, '../..');
const POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** What a run made, as its config names it. */
interface RunNames {
  databaseUrl: string;
  keyPrefix: string;
  temporalAddress: string;
}

const admin = new pg.Client({ connectionString: POSTGRES });
const redis = new Redis(REDIS_URL);
const savedEnv = { TEMPORAL_CLI: process.env.TEMPORAL_CLI, PATH: process.env.PATH };

beforeAll(async () => {
  await admin.connect();
});

afterAll(async () => {
  await admin.end();
  redis.disconnect();
});

afterEach(() => {
  for (const [name, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

async function databaseExists(databaseUrl: string): Promise<boolean> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  return rowCount === 1;
}

async function keysUnder(prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 1000 }) as AsyncIterable<string[]>) found.push(...keys);
  return found;
}

/** Whether something accepts TCP connections at host:port. */
function listening(address: string): Promise<boolean> {
  const [host, port] = address.split(':');
  return new Promise((resolve) => {
    const socket = connect({ host: host!, port: Number(port) });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function leftBehind(names: RunNames): Promise<{ database: boolean; keys: string[]; server: boolean }> {
  return { database: await databaseExists(names.databaseUrl), keys: await keysUnder(names.keyPrefix), server: await listening(names.temporalAddress) };
}

const testDatabases = async () => (await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'saga\\_test\\_%'")).rows.map((r) => r.datname);

describe('startTestEnvironment', () => {
  it('runs a saga to COMPLETED on a dev server, database and key prefix of its own, and stop() removes them all', async () => {
    process.env.TEMPORAL_CLI = inject('temporalCli');
    const env = await startTestEnvironment({ sagas: bookingSagas, migrate: migrateBookings });
    const names: RunNames = { databaseUrl: env.config.db.url, keyPrefix: env.config.redis.keyPrefix, temporalAddress: env.config.temporal.address };
    try {
      expect(names.temporalAddress).not.toBe(inject('temporalAddress'));
      const started = await env.client.start('booking', { room: `r-${randomUUID()}`, night: '2030-01-01' }, { idempotencyKey: randomUUID() });

      const final = await env.client.result(started.workflowId);

      expect(final.outcome).toBe('COMPLETED');
      const { rows } = await env.pool.query('SELECT status, confirmed FROM bookings WHERE intent_key = $1', [started.intentKey]);
      expect(rows).toEqual([{ status: 'COMPLETED', confirmed: true }]);
      // What stop() must remove is there.
      expect(await leftBehind(names)).toMatchObject({ database: true, server: true });
      expect((await leftBehind(names)).keys.length).toBeGreaterThan(0);
    } finally {
      await env.stop();
    }

    expect(await leftBehind(names)).toEqual({ database: false, keys: [], server: false });
    await env.stop(); // a second call does nothing
  });

  // TAP named, not left to the default: Node 20 reports TAP to a pipe, Node 22 and 24 the spec reporter.
  it('leaves nothing behind after a node:test file whose test body failed', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rs-testing-'));
    const report = path.join(dir, 'run.json');
    try {
      const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', 'test/fixtures/testing-failing-body.ts'], {
        cwd: ROOT,
        env: { ...process.env, TEMPORAL_CLI: inject('temporalCli'), TESTING_REPORT: report },
      }).then(
        () => ({ code: 0, stdout: '' }),
        (err: { code: number; stdout: string }) => err,
      );

      expect(run.code, run.stdout).toBe(1);
      expect(run.stdout).toContain('this test body fails on purpose');
      expect(run.stdout).toMatch(/^# pass 0$/m);
      const names = JSON.parse(readFileSync(report, 'utf8')) as RunNames;
      expect(await leftBehind(names)).toEqual({ database: false, keys: [], server: false });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs the docs\' example: the scaffold\'s test/signup.test.ts passes, as node --test runs it', async () => {
    const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', 'test/signup.test.ts'], {
      cwd: path.join(ROOT, 'templates/app'),
      env: { ...process.env, TEMPORAL_CLI: inject('temporalCli') },
    }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (err: { code: number; stdout: string }) => err,
    );

    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).toMatch(/^# pass 2$/m);
  });

  it('refuses settings the run makes itself, before making anything', async () => {
    await expect(startTestEnvironment({ settings: { REDIS_KEY_PREFIX: 'rs:' } })).rejects.toThrow(TestEnvironmentError);
    await expect(startTestEnvironment({ settings: { TEMPORAL_TASK_QUEUE: 'reservation-saga' } })).rejects.toThrow(/settings\.TEMPORAL_TASK_QUEUE: the run makes its own/);
  });
});

describe('startTestEnvironment without a Temporal CLI', () => {
  it('names TEMPORAL_CLI when it points nowhere, and leaves no database behind', async () => {
    const before = await testDatabases();
    process.env.TEMPORAL_CLI = path.join(tmpdir(), `no-such-dir-${randomUUID()}`, 'temporal');
    process.env.PATH = '';

    const failure = await startTestEnvironment({ sagas: bookingSagas, migrate: migrateBookings }).catch((err: unknown) => err);

    expect(failure).toBeInstanceOf(TemporalCliNotFoundError);
    expect((failure as Error).message).toMatch(/^TEMPORAL_CLI=\/.*\/temporal is not an executable file: point it at the Temporal CLI/);
    expect((await testDatabases()).filter((name) => !before.includes(name))).toEqual([]);
  });

  it('names both ways out when there is no CLI on PATH and @temporalio/testing is not installed', async () => {
    // A fresh process with an empty PATH, no TEMPORAL_CLI, and @temporalio/testing unresolvable (as in
    // an app that did not install it): a module resolution hook refuses it.
    const deny = `data:text/javascript,${encodeURIComponent(`
      import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(\`
        export async function resolve(specifier, context, next) {
          if (specifier === '@temporalio/testing') {
            const err = new Error("Cannot find package '@temporalio/testing' imported from " + context.parentURL);
            err.code = 'ERR_MODULE_NOT_FOUND';
            throw err;
          }
          return next(specifier, context);
        }\`));`)}`;
    const script = `require('./src/public/testing').startTestEnvironment().then(
      () => { console.log('started'); process.exit(1); },
      (err) => console.log(JSON.stringify({ name: err.name, message: err.message, isTyped: err instanceof require('./src/public/testing').TemporalCliNotFoundError })));`;
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: '' };
    delete env.TEMPORAL_CLI;

    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--import', deny, '-e', script], { cwd: ROOT, env });

    const failure = JSON.parse(stdout.trim().split('\n').pop()!) as { name: string; message: string; isTyped: boolean };
    expect(failure).toMatchObject({ name: 'TemporalCliNotFoundError', isTyped: true });
    expect(failure.message).toContain('TEMPORAL_CLI is not set, `temporal` is not on PATH, and @temporalio/testing (which downloads a dev server) is not installed');
    expect(failure.message).toContain('set TEMPORAL_CLI to it, or `npm install --save-dev @temporalio/testing`');
  });
});
