/**
 * The `saga` CLI of the app: it finds the saga types through package.json ("reservation-saga".sagas)
 * and answers as the app's client does. Run against the services of a reservation-saga/testing run:
 * its settings reach the CLI as environment variables.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import { startTestEnvironment, type SagaTestEnvironment } from 'reservation-saga/testing';
import { migrateApp } from '../src/migrate.js';
import { sagas } from '../src/sagas.js';

let env: SagaTestEnvironment<typeof sagas>;
before(async () => (env = await startTestEnvironment({ sagas, migrate: migrateApp })));
after(() => env?.stop());

void it('answers a sign-up of a taken email DUPLICATE, as the client does (exit 3)', async () => {
  const email = `grace-${randomUUID()}@example.com`;
  const first = await env.client.start('signup', { email, plan: 'pro' }, { idempotencyKey: randomUUID() });
  assert.equal((await env.client.result(first.workflowId)).outcome, 'COMPLETED');

  const args = ['saga', 'start', '--type', 'signup', '--data', JSON.stringify({ email, plan: 'free' }), '--json'];
  const cli = await new Promise<{ code: unknown; stdout: string; stderr: string }>((resolve) => {
    execFile('npx', args, { env: { ...process.env, ...env.variables } }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
  });

  assert.equal(cli.code, 3, `saga start exits 3 (DUPLICATE); stderr: ${cli.stderr}`);
  assert.deepEqual((JSON.parse(cli.stdout) as { reservation: unknown }).reservation, { status: 'DUPLICATE' });
});
