/**
 * The trip app's saga types, what its worker runs and its clients accept: `trip` (books a trip:
 * hold a room, hold a seat, charge the card) and `trip-cancel` (an operation on a booked trip). The
 * `saga` CLI loads this module (package.json's `reservation-saga.sagas`) and takes `sagas`.
 */
import type { SagaType } from 'reservation-saga';
import { HoldServiceClient } from './services/client';
import { tripSettings } from './settings';
import { tripSagaType } from './trip';
import { tripCancelSagaType } from './trip-cancel';

export { DECLINED_CARD, tripSagaType, type TripInput, type TripServices } from './trip';
export { tripCancelSagaType, type TripCancelInput } from './trip-cancel';
export { tripsTable } from './trips-table';

/** Where the services are. */
export interface TripSagaOptions {
  /** @default HOTEL_URL, AIRLINE_URL and TRIP_SERVICE_TIMEOUT_MS of the environment */
  services?: { hotelUrl: string; airlineUrl: string; timeoutMs: number };
}

/** The trip app's saga types, calling the hotel and the airline at `options.services`. */
export function tripSagas(options: TripSagaOptions = {}): SagaType[] {
  const { hotelUrl, airlineUrl, timeoutMs } = options.services ?? fromEnvironment();
  const services = {
    hotel: new HoldServiceClient({ name: 'hotel', baseUrl: hotelUrl, timeoutMs }),
    airline: new HoldServiceClient({ name: 'airline', baseUrl: airlineUrl, timeoutMs }),
  };
  return [tripSagaType(services), tripCancelSagaType(services)];
}

function fromEnvironment() {
  const settings = tripSettings(process.env);
  return { hotelUrl: settings.HOTEL_URL, airlineUrl: settings.AIRLINE_URL, timeoutMs: settings.TRIP_SERVICE_TIMEOUT_MS };
}

/** The saga types with the services of the environment: what the worker and the `saga` CLI load. */
export const sagas: SagaType[] = tripSagas();
