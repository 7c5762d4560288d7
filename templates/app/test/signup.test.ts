/**
 * The app against the local services: PostgreSQL and Redis (DATABASE_URL's server and REDIS_URL; the
 * defaults are local), and a Temporal dev server of the run's own, from the Temporal CLI (`temporal`
 * on PATH, or TEMPORAL_CLI). reservation-saga/testing makes the run's database, Redis key prefix and
 * task queue, runs a worker in this process, and removes what it made.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startTestEnvironment, type SagaTestEnvironment } from 'reservation-saga/testing';
import { migrateApp } from '../src/migrate.js';
import { sagas } from '../src/sagas.js';

let env: SagaTestEnvironment<typeof sagas>;

before(async () => {
  env = await startTestEnvironment({ sagas, migrate: migrateApp });
});

after(() => env?.stop());

void describe('signup', { timeout: 120_000 }, () => {
  const email = `ada-${randomUUID()}@example.com`;

  void it('signs up: SUCCESS at the gate, then COMPLETED with its row activated', async () => {
    const started = await env.client.start('signup', { email, plan: 'pro' }, { idempotencyKey: randomUUID() });
    assert.equal(started.reservation.status, 'SUCCESS');

    const final = await env.client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    // The entity's id is opaque (what callers get); its row is found by the saga's intent.
    const { rows } = await env.pool.query('SELECT status, plan, activated_at IS NOT NULL AS activated FROM signups WHERE intent_key = $1', [started.intentKey]);
    assert.deepEqual(rows, [{ status: 'COMPLETED', plan: 'pro', activated: true }]);
  });

  void it('answers the same email under another idempotency key DUPLICATE, starting no saga', async () => {
    const again = await env.client.start('signup', { email: email.toUpperCase(), plan: 'free' }, { idempotencyKey: randomUUID() });

    assert.equal(again.reservation.status, 'DUPLICATE');
    assert.equal(again.started, false);
  });

  void it('answers the saga CLI the same: it finds the saga types through package.json', async () => {
    const args = ['saga', 'start', '--type', 'signup', '--data', JSON.stringify({ email, plan: 'free' }), '--json'];
    const cli = await new Promise<{ code: unknown; stdout: string; stderr: string }>((resolve) => {
      execFile('npx', args, { env: { ...process.env, ...env.variables } }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
    });

    assert.equal(cli.code, 3, `saga start exits 3 (DUPLICATE); stderr: ${cli.stderr}`);
    assert.deepEqual((JSON.parse(cli.stdout) as { reservation: unknown }).reservation, { status: 'DUPLICATE' });
  });
});
