/**
 * The sign-ups against the local services: PostgreSQL and Redis (DATABASE_URL's server and REDIS_URL;
 * the defaults are local) and a Temporal dev server of the run's own, from the Temporal CLI
 * (`temporal` on PATH, or TEMPORAL_CLI). reservation-saga/testing makes the run's database, Redis key
 * prefix and task queue, runs a worker in this process, and removes what it made.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import { startTestEnvironment, type SagaTestEnvironment } from 'reservation-saga/testing';
import { migrateApp } from '../src/migrate.js';
import { sagas } from '../src/sagas.js';

let env: SagaTestEnvironment<typeof sagas>;
before(async () => (env = await startTestEnvironment({ sagas, migrate: migrateApp })));
after(() => env?.stop());

const email = `ada-${randomUUID()}@example.com`;

void it('signs up: SUCCESS at the gate, then COMPLETED with its row activated', async () => {
  const started = await env.client.start('signup', { email, plan: 'pro' }, { idempotencyKey: randomUUID() });
  assert.equal(started.reservation.status, 'SUCCESS');
  assert.equal((await env.client.result(started.workflowId)).outcome, 'COMPLETED');
  // The entity's id is opaque (what callers get); its row is found by the saga's intent.
  const { rows } = await env.pool.query('SELECT status, plan, activated_at IS NOT NULL AS activated FROM signups WHERE intent_key = $1', [started.intentKey]);
  assert.deepEqual(rows, [{ status: 'COMPLETED', plan: 'pro', activated: true }]);
});

void it('answers the same email under another idempotency key DUPLICATE, starting no saga', async () => {
  const again = await env.client.start('signup', { email: email.toUpperCase(), plan: 'free' }, { idempotencyKey: randomUUID() });
  assert.equal(again.reservation.status, 'DUPLICATE');
  assert.equal(again.started, false);
});
