/**
 * The `trip` saga type: books a trip. Its fenced row goes into `trips`; then a room is held at the
 * hotel, a seat at the airline (two external services, each called with the step's idempotency
 * key), and the card is charged (a step in our own database). A failure, a refusal or a
 * cancellation releases what was held and refunds what was charged, all at once (`parallel`).
 *
 * Its **intent** is the traveller, the stay and the flight: the same trip asked twice (another
 * idempotency key, another card) is answered DUPLICATE at the gate, and no second saga starts.
 *
 * **Late answers.** An airline may answer a hold after the saga gave up waiting (the call timed out,
 * the traveller cancelled): the hold can then still be made at the airline after its compensation
 * began. So `releaseSeat` is ordered after every attempt of `holdSeat` at the airline, by the
 * airline's rule for releases (hold-server.ts): while a hold with that key is being processed the
 * release is answered 409 and asked again (the compensation waits, and fails to be retried past
 * its patience); a hold made late is then released; a key no hold was ever made with is voided, so
 * a hold arriving even later is refused. The room's hold and release follow the same rule.
 *
 * Example data: the card `4000000000000002` is declined.
 */
import type { PoolClient } from 'pg';
import { z } from 'zod';
import { defineSaga, externalStep, StepRejectedError, stepIdempotencyKey, type SagaDefinition, type StepHandler } from 'reservation-saga';
import { HoldRefusedError, KeyVoidedError, type HoldServiceClient } from './services/client';
import { tripsTable } from './trips-table';

/** The test card that every charge declines. */
export const DECLINED_CARD = '4000000000000002';

const isoDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date, YYYY-MM-DD');

const tripSchema = z
  .object({
    traveller: z.string().trim().min(1).max(200),
    hotel: z
      .object({ hotel: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'must be lower-case letters, digits and -'), checkIn: isoDate, checkOut: isoDate })
      .strict()
      .refine((h) => h.checkIn < h.checkOut, 'checkOut must be after checkIn'),
    flight: z.string().regex(/^[A-Z0-9]{2,3}[0-9]{1,4}(-[0-9]{8})?$/, 'must be a flight number, e.g. TS101'),
    /** The trip's price, as the app quoted it. */
    amountCents: z.number().int().positive().max(100_000_000),
    payment: z.object({ card: z.string().regex(/^\d{12,19}$/, 'must be 12 to 19 digits') }).strict(),
  })
  .strict();

/** A validated trip. */
export type TripInput = z.infer<typeof tripSchema>;

/** The services a trip's steps call. */
export interface TripServices {
  hotel: HoldServiceClient;
  airline: HoldServiceClient;
}

/** Charges the card in our own `charges` table (a stand-in for a card processor), keyed by `chargeKey`. */
const chargeCard: StepHandler<TripInput> = async (tx, { sagaKey, input }) => {
  if (input.payment.card === DECLINED_CARD) throw new StepRejectedError('the card was declined', 'CARD_DECLINED');
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO charges (charge_key, amount_cents, card_last4, status) VALUES ($1, $2, $3, 'CHARGED') RETURNING id::text`,
    [stepIdempotencyKey(sagaKey, 'chargeCard'), input.amountCents, input.payment.card.slice(-4)],
  );
  return { chargeId: rows[0]!.id, amountCents: input.amountCents };
};

/** Refunds the charge made with `chargeKey`, if it was made and not refunded yet; by `by` (a saga key). */
export async function refund(tx: PoolClient, chargeKey: string, by: string): Promise<{ refundedCents: number }> {
  const { rows } = await tx.query<{ amount_cents: string }>(
    `UPDATE charges SET status = 'REFUNDED', refunded_by = $2, refunded_at = now() WHERE charge_key = $1 AND status = 'CHARGED' RETURNING amount_cents`,
    [chargeKey, by],
  );
  return { refundedCents: rows[0] ? Number(rows[0].amount_cents) : 0 };
}

/** Holds one unit at `service`; its refusal is the step's (recorded and compensated, never retried). */
async function hold(service: HoldServiceClient, idempotencyKey: string, body: Record<string, unknown>, signal: AbortSignal, reason: string) {
  try {
    const held = await service.hold(idempotencyKey, body, signal);
    return { holdId: held.id };
  } catch (err) {
    if (err instanceof HoldRefusedError) throw new StepRejectedError(err.message, reason);
    // Only when the step's own compensation voided the key: this late attempt does nothing.
    if (err instanceof KeyVoidedError) throw new StepRejectedError(err.message, 'HOLD_VOIDED');
    // Anything else (no answer in time, a 409 while an earlier attempt is processed) is retried with the same key.
    throw err;
  }
}

/** How long a trip saga may take from its start (a start may ask for less). */
export const TRIP_DEADLINE_MS = 10 * 60_000;

/** The `trip` saga type, holding through `services`. */
export function tripSagaType(services: TripServices): SagaDefinition<TripInput> {
  const { hotel, airline } = services;
  return defineSaga<TripInput>({
    type: 'trip',
    scope: 'trip',
    schema: tripSchema,
    intent: (input) => ({ traveller: input.traveller, hotel: input.hotel, flight: input.flight }),
    table: tripsTable,
    row: (input, { sagaKey }) => ({
      traveller: input.traveller,
      hotel: input.hotel.hotel,
      check_in: input.hotel.checkIn,
      check_out: input.hotel.checkOut,
      flight: input.flight,
      amount_cents: input.amountCents,
      room_hold_key: stepIdempotencyKey(sagaKey, 'holdRoom'),
      seat_hold_key: stepIdempotencyKey(sagaKey, 'holdSeat'),
      charge_key: stepIdempotencyKey(sagaKey, 'chargeCard'),
    }),
    steps: [
      // The hotel and the airline do not depend on each other: both holds are asked for at once.
      { step: 'holdRoom', compensation: 'releaseRoom', group: 'holds' },
      { step: 'holdSeat', compensation: 'releaseSeat', group: 'holds' },
      { step: 'chargeCard', compensation: 'refundCard' },
    ],
    handlers: {
      holdRoom: externalStep<TripInput>(({ idempotencyKey, sagaKey, input, signal }) =>
        hold(hotel, idempotencyKey, { hotel: input.hotel.hotel, check_in: input.hotel.checkIn, check_out: input.hotel.checkOut, reference: sagaKey }, signal, 'NO_ROOM'),
      ),
      // Ordered after every attempt of holdRoom at the hotel (see above): waits while one is processed.
      releaseRoom: externalStep<TripInput>(async ({ idempotencyKey, keyOf, signal }) => {
        const released = await hotel.release(idempotencyKey, keyOf('holdRoom'), signal);
        return { release: released.status };
      }),
      holdSeat: externalStep<TripInput>(({ idempotencyKey, sagaKey, input, signal }) =>
        hold(airline, idempotencyKey, { flight: input.flight, reference: sagaKey }, signal, 'NO_SEAT'),
      ),
      // The same for the seat: a late answer of the airline is waited for, then released.
      releaseSeat: externalStep<TripInput>(async ({ idempotencyKey, keyOf, signal }) => {
        const released = await airline.release(idempotencyKey, keyOf('holdSeat'), signal);
        return { release: released.status };
      }),
      chargeCard,
      refundCard: async (tx, { sagaKey }) => refund(tx, stepIdempotencyKey(sagaKey, 'chargeCard'), sagaKey),
    },
    // The two services and our database do not depend on each other: undo all three at once.
    compensation: { parallel: true },
    // A trip not booked within 10 minutes is given up: no hold is taken after that, and those taken
    // are released (a start may ask for less).
    deadlineMs: TRIP_DEADLINE_MS,
  });
}
