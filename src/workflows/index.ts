/** Every workflow the worker registers. */
export { reservationSaga } from './reservation-saga';
export { smokeWorkflow } from './smoke';
export { purgeIdempotencyStore, type PurgeRequest, type PurgeResult } from './purge';
