/**
 * The tickets app's worker process (`npm run worker`): its saga types, taking payments at
 * PAYMENTS_URL, until SIGINT or SIGTERM. Run several on one task queue to share the work; a saga
 * waiting for its buyer's payment takes none of them.
 */
import { runWorker } from 'reservation-saga/worker';
import { sagas } from './sagas';

runWorker({ sagas }).catch((err: unknown) => {
  process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
