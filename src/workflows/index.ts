/** Every workflow the worker registers. */
export { reservationSaga } from './reservation-saga';
export { smokeWorkflow } from './smoke';
