/**
 * The trip app's worker process (`npm run worker`): its saga types, calling the hotel and the
 * airline at HOTEL_URL and AIRLINE_URL, until SIGINT or SIGTERM. Run several on one task queue to
 * share the work.
 */
import { runWorker } from 'reservation-saga/worker';
import { sagas } from './sagas';

runWorker({ sagas }).catch((err: unknown) => {
  process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
