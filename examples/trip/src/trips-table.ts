/** The trip app's fenced table. */
import { fencedTable } from 'reservation-saga';

/**
 * Fenced rows of `trips` (see migrate.ts): one per trip booked. Its data columns are what the
 * `trip` saga writes; the keys name the trip's effects elsewhere (the room hold at the hotel, the
 * seat hold at the airline, the charge in `charges`), so that `trip-cancel` can undo them. An
 * operation claims a row through `last_operation_token` and sets `cancelled_at`.
 */
export const tripsTable = fencedTable('trips', [
  'traveller',
  'hotel',
  'check_in',
  'check_out',
  'flight',
  'amount_cents',
  'room_hold_key',
  'seat_hold_key',
  'charge_key',
]);
