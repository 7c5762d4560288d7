/** The worker process: runs the app's saga types until SIGINT or SIGTERM (start several to scale). */
import { runWorker } from 'reservation-saga/worker';
import { sagas } from './sagas.js';

runWorker({ sagas }).catch((err: unknown) => {
  console.error(`worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
