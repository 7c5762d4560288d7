/**
 * The app against the local services: PostgreSQL and Redis (DATABASE_URL's server, REDIS_URL; the
 * defaults are local) and the Temporal server at TEMPORAL_ADDRESS, with reservation-saga's search
 * attributes (`npx saga setup`). The run makes its own database, Redis key prefix and task queue,
 * runs a worker in this process, and removes what it made.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig, SagaClient } from 'reservation-saga';
import { createWorker, type AppWorker } from 'reservation-saga/worker';
import { migrateApp } from '../src/migrate.js';
import { sagas } from '../src/sagas.js';

const TEMPORAL_ADDRESS = process.env.TEMPORAL_ADDRESS;
if (!TEMPORAL_ADDRESS) throw new Error('set TEMPORAL_ADDRESS to a running Temporal server (e.g. `temporal server start-dev`, then `npx saga setup`)');

const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
const serverUrl = (database: string) => Object.assign(new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'), { pathname: `/${database}` }).toString();
const databaseUrl = serverUrl(`app_test_${run}`);
const keyPrefix = `app-test:${run}:`;
// The settings of this run, for the worker and client here and the `saga` CLI run below.
const env: NodeJS.ProcessEnv = {
  ...process.env,
  TEMPORAL_ADDRESS,
  TEMPORAL_TASK_QUEUE: `app-test-${run}`,
  DATABASE_URL: databaseUrl,
  REDIS_KEY_PREFIX: keyPrefix,
  INTENT_KEY_SECRET: randomBytes(32).toString('base64'),
  SAGA_CODEC_KEYS: `test:${randomBytes(32).toString('base64')}`,
};
const config = loadConfig(env);
let app: AppWorker | undefined;
let running: Promise<void> | undefined;
let client: SagaClient | undefined;

before(async () => {
  await migrateApp(databaseUrl);
  app = await createWorker({ sagas, config });
  running = app.worker.run();
  client = await SagaClient.connect({ sagas, config });
});

after(async () => {
  await client?.close();
  if (app) {
    app.worker.shutdown();
    await running;
    if ('scanStream' in app.redis) {
      for await (const keys of app.redis.scanStream({ match: `${keyPrefix}*` }) as AsyncIterable<string[]>) if (keys.length > 0) await app.redis.unlink(...keys);
    }
    await app.close();
  }
  const admin = new pg.Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS app_test_${run} WITH (FORCE)`);
  await admin.end();
});

void describe('signup', { timeout: 120_000 }, () => {
  const email = `ada-${randomUUID()}@example.com`;

  void it('signs up: SUCCESS at the gate, then COMPLETED with its row activated', async () => {
    const started = await client!.start('signup', { email, plan: 'pro' }, { idempotencyKey: randomUUID() });
    assert.equal(started.reservation.status, 'SUCCESS');

    const final = await client!.result(started.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    // The entity's id is opaque (what callers get); its row is found by the saga's intent.
    const { rows } = await app!.pool.query('SELECT status, plan, activated_at IS NOT NULL AS activated FROM signups WHERE intent_key = $1', [started.intentKey]);
    assert.deepEqual(rows, [{ status: 'COMPLETED', plan: 'pro', activated: true }]);
  });

  void it('answers the same email under another idempotency key DUPLICATE, starting no saga', async () => {
    const again = await client!.start('signup', { email: email.toUpperCase(), plan: 'free' }, { idempotencyKey: randomUUID() });

    assert.equal(again.reservation.status, 'DUPLICATE');
    assert.equal(again.started, false);
  });

  void it('answers the saga CLI the same: it finds the saga types through package.json', async () => {
    const args = ['saga', 'start', '--type', 'signup', '--data', JSON.stringify({ email, plan: 'free' }), '--json'];
    const cli = await new Promise<{ code: unknown; stdout: string; stderr: string }>((resolve) => {
      execFile('npx', args, { env }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
    });

    assert.equal(cli.code, 3, `saga start exits 3 (DUPLICATE); stderr: ${cli.stderr}`);
    assert.deepEqual((JSON.parse(cli.stdout) as { reservation: unknown }).reservation, { status: 'DUPLICATE' });
  });
});
