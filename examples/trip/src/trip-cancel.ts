/**
 * `trip-cancel`: an operation on a booked trip, a saga type of its own under the trip's lock (see
 * EntityOperation in reservation-saga): it runs only once the trip's `trip` saga has COMPLETED, and
 * one operation at a time per trip.
 *
 * Its steps: `cancelTrip` marks the trip cancelled in our database (committing to the
 * cancellation; its compensation reinstates it), then `releaseRoom` at the hotel, `releaseSeat` at
 * the airline and `refundCard` settle what that step decided. These three have no compensation:
 * each is retried until it is done, never given up half-way (a release of a held room or seat is
 * never refused, and the refund is a step in our own database).
 */
import { z } from 'zod';
import { defineOperation, ENTITY_ID_PATTERN, externalStep, StepRejectedError, type EntityOperation, type StepContext, type StepHandler } from 'reservation-saga';
import { refund, type TripServices } from './trip';
import { tripsTable } from './trips-table';

const cancelSchema = z.object({ trip: z.string().regex(ENTITY_ID_PATTERN, 'must be a trip id (the `entityId` of its trip saga)') }).strict();

/** A validated `trip-cancel` input. */
export type TripCancelInput = z.infer<typeof cancelSchema>;

/** What `cancelTrip` read from the trip: the keys of its effects, for the steps after it. */
interface CancelledTrip {
  roomHoldKey: string;
  seatHoldKey: string;
  chargeKey: string;
}

function operationOf(ctx: StepContext<TripCancelInput>) {
  if (!ctx.operation) throw new Error(`step of ${ctx.sagaKey} run without its operation context`);
  return ctx.operation;
}

/** The `trip-cancel` saga type, releasing through `services`. */
export function tripCancelSagaType(services: TripServices): EntityOperation<TripCancelInput> {
  // The runner has claimed the trip's row in this transaction before the handler runs.
  const cancelTrip: StepHandler<TripCancelInput> = async (tx, ctx) => {
    const { entityId } = operationOf(ctx);
    const { rows } = await tx.query<{ room_hold_key: string; seat_hold_key: string; charge_key: string; cancelled: boolean }>(
      'SELECT room_hold_key, seat_hold_key, charge_key, cancelled_at IS NOT NULL AS cancelled FROM trips WHERE id = $1',
      [entityId],
    );
    const trip = rows[0]!;
    if (trip.cancelled) throw new StepRejectedError('the trip is cancelled already', 'TRIP_CANCELLED');
    await tx.query('UPDATE trips SET cancelled_at = now(), cancelled_by = $2, updated_at = now() WHERE id = $1', [entityId, ctx.sagaKey]);
    return { roomHoldKey: trip.room_hold_key, seatHoldKey: trip.seat_hold_key, chargeKey: trip.charge_key } satisfies CancelledTrip;
  };

  // Undoes only this saga's own cancellation.
  const reinstateTrip: StepHandler<TripCancelInput> = async (tx, ctx) => {
    const { rowCount } = await tx.query('UPDATE trips SET cancelled_at = NULL, cancelled_by = NULL, updated_at = now() WHERE id = $1 AND cancelled_by = $2', [
      operationOf(ctx).entityId,
      ctx.sagaKey,
    ]);
    return { reinstated: rowCount === 1 };
  };

  const cancelled = (ctx: StepContext<TripCancelInput>) => operationOf(ctx).results.cancelTrip as CancelledTrip;

  return defineOperation<TripCancelInput>({
    type: 'trip-cancel',
    scope: 'trip',
    schema: cancelSchema,
    entity: (input) => input.trip,
    table: tripsTable,
    // A cancelled trip is given back: the same traveller may book the same stay and flight again, as a new trip.
    releases: true,
    steps: [
      { step: 'cancelTrip', compensation: 'reinstateTrip' },
      { step: 'releaseRoom' },
      { step: 'releaseSeat' },
      { step: 'refundCard' },
    ],
    handlers: {
      cancelTrip,
      reinstateTrip,
      releaseRoom: externalStep<TripCancelInput>(async (ctx) => ({ release: (await services.hotel.release(ctx.idempotencyKey, cancelled(ctx).roomHoldKey, ctx.signal)).status })),
      releaseSeat: externalStep<TripCancelInput>(async (ctx) => ({ release: (await services.airline.release(ctx.idempotencyKey, cancelled(ctx).seatHoldKey, ctx.signal)).status })),
      refundCard: async (tx, ctx) => refund(tx, cancelled(ctx).chargeKey, ctx.sagaKey),
    },
  });
}
