/**
 * Starts one sign-up and waits for its end: `npm start -- <email> [free|pro] [idempotency key]`.
 * A retry with the same idempotency key gets the same saga's answer; the same email under another
 * key is answered DUPLICATE at once.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig, SagaClient } from 'reservation-saga';
import { sagas } from './sagas.js';

async function main(): Promise<number> {
  const [email, plan = 'free', idempotencyKey = randomUUID()] = process.argv.slice(2);
  if (!email) {
    console.error('usage: npm start -- <email> [free|pro] [idempotency key]');
    return 2;
  }
  const client = await SagaClient.connect({ sagas, config: loadConfig(process.env) });
  try {
    // The client is typed by `sagas`: 'signup' takes { email, plan }. The plan from the command line
    // is any text until the saga's schema checks it at the gate (INVALID_INPUT for another).
    const started = await client.start('signup', { email, plan: plan as 'free' | 'pro' }, { idempotencyKey });
    console.log(`${started.workflowId}: ${started.reservation.status}${started.url ? ` ${started.url}` : ''}`);
    if (!started.started) return 3;
    const final = await client.result(started.workflowId);
    console.log(`${started.workflowId}: ${final.outcome}${final.reason ? ` (${final.reason})` : ''}`);
    return final.outcome === 'COMPLETED' ? 0 : 1;
  } finally {
    await client.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
