/**
 * The order app's worker process: its saga types (with SAGA_SIMULATIONS' test knobs when set),
 * charging through PAYMENT_PROVIDER_URL, until SIGINT or SIGTERM.
 */
import { runWorker } from 'reservation-saga/worker';
import { sagas } from './sagas';

runWorker({ sagas }).catch((err: unknown) => {
  process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
