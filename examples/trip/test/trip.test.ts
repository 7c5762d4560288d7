/**
 * The trip app against real services: PostgreSQL and Redis on their default local addresses (or
 * DATABASE_URL's server and REDIS_URL), and a Temporal dev server of the run's own (from the Temporal
 * CLI: `temporal` on PATH, or TEMPORAL_CLI). reservation-saga/testing makes the run's database, Redis
 * key prefix and task queue and runs a worker in this process; the test runs the hotel and the
 * airline on that database; everything is removed at the end.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ENTITY_ID_PATTERN, type SagaClient } from 'reservation-saga';
import { startTestEnvironment, type TestEnvironment } from 'reservation-saga/testing';
import { migrateTrip } from '../src/migrate';
import { DECLINED_CARD, tripSagas, type TripInput } from '../src/sagas';
import { TRIP_DEADLINE_MS } from '../src/trip';
import { addSeats, createAirlineServer } from '../src/services/airline';
import { HoldServiceClient } from '../src/services/client';
import { addRooms, createHotelServer } from '../src/services/hotel';

/** A call to the hotel or the airline gives up after this long (the step is retried with its key). */
const CALL_TIMEOUT_MS = 1500;
/** How long the airline takes to hold a seat on a slow flight. */
const slowFlights = new Map<string, number>();
/** The airline's first processing of each hold: `started` and `settled`, with the flight. */
const airlineHolds = new EventEmitter();

let env: TestEnvironment;
let hotelServer: FastifyInstance;
let airlineServer: FastifyInstance;
let hotel: HoldServiceClient;
let airline: HoldServiceClient;
let client: SagaClient<ReturnType<typeof tripSagas>>;

before(async () => {
  env = await startTestEnvironment({
    migrate: migrateTrip,
    // Short beats, so that a cancellation reaches a step waiting on a slow service within a second.
    settings: { HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TIMEOUT_MS: '1000', LEASE_MS: '5000' },
  });
  hotelServer = createHotelServer({ pool: env.pool });
  airlineServer = createAirlineServer({
    pool: env.pool,
    holdDelayMs: (body) => slowFlights.get(body.flight) ?? 0,
    hooks: {
      holdStarted: (_key, body) => airlineHolds.emit('started', body.flight),
      holdSettled: (_key, body) => airlineHolds.emit('settled', body.flight),
    },
  });
  const urlOf = async (server: FastifyInstance) => {
    await server.listen({ host: '127.0.0.1', port: 0 });
    return `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
  };
  const services = { hotelUrl: await urlOf(hotelServer), airlineUrl: await urlOf(airlineServer), timeoutMs: CALL_TIMEOUT_MS };
  hotel = new HoldServiceClient({ name: 'hotel', baseUrl: services.hotelUrl, timeoutMs: 5000 });
  airline = new HoldServiceClient({ name: 'airline', baseUrl: services.airlineUrl, timeoutMs: 5000 });
  client = await env.startWorker(tripSagas({ services }));
});

after(async () => {
  await hotelServer?.close();
  await airlineServer?.close();
  await env?.stop();
});

let places = 0;

/** A hotel with 5 free rooms and a flight with `seats` free seats, of this test alone. */
async function newPlaces(seats = 5): Promise<{ hotel: string; flight: string }> {
  places++;
  const place = { hotel: `hotel-${places}`, flight: `TT${100 + places}` };
  await addRooms(env.pool, place.hotel, 5);
  await addSeats(env.pool, place.flight, seats);
  return place;
}

function tripTo(place: { hotel: string; flight: string }, overrides: Partial<TripInput> = {}): TripInput {
  return {
    traveller: `traveller-${randomUUID()}`,
    hotel: { hotel: place.hotel, checkIn: '2027-05-01', checkOut: '2027-05-04' },
    flight: place.flight,
    amountCents: 84_900,
    payment: { card: '4242424242424242' },
    ...overrides,
  };
}

const roomsFree = async (place: { hotel: string }) => (await hotel.get(`/v1/hotels/${place.hotel}`)).rooms_available;
const seatsFree = async (place: { flight: string }) => (await airline.get(`/v1/flights/${place.flight}`)).seats_available;
/** The statuses of the holds a trip's saga made at a service (they carry its workflow id as reference). */
const holdStatuses = async (service: HoldServiceClient, workflowId: string) => (await service.holds(workflowId)).map((h) => h.status);

async function charge(workflowId: string): Promise<{ status: string; amount_cents: string; refunded_by: string | null } | undefined> {
  const { rows } = await env.pool.query<{ status: string; amount_cents: string; refunded_by: string | null }>(
    'SELECT status, amount_cents, refunded_by FROM charges WHERE charge_key = $1',
    [`${workflowId}:chargeCard`],
  );
  return rows[0];
}

const TIMEOUT = { timeout: 60_000 };

void describe('the trip app', () => {
  void it('books a trip: the room and the seat held, the card charged, the trip COMPLETED', TIMEOUT, async () => {
    const place = await newPlaces();

    const started = await client.start('trip', tripTo(place), { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(started.reservation.status, 'SUCCESS');
    const final = await client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    assert.match(final.entityId ?? '', ENTITY_ID_PATTERN);
    const { rows } = await env.pool.query<{ status: string; amount_cents: string }>('SELECT status, amount_cents FROM trips WHERE intent_key = $1', [started.intentKey]);
    assert.deepEqual(rows, [{ status: 'COMPLETED', amount_cents: '84900' }]);
    assert.deepEqual(await holdStatuses(hotel, started.workflowId), ['HELD']);
    assert.deepEqual(await holdStatuses(airline, started.workflowId), ['HELD']);
    assert.equal(await roomsFree(place), 4);
    assert.equal(await seatsFree(place), 4);
    assert.deepEqual(await charge(started.workflowId), { status: 'CHARGED', amount_cents: '84900', refunded_by: null });
  });

  void it('answers the same trip under another idempotency key DUPLICATE, starting no saga and holding nothing more', TIMEOUT, async () => {
    const place = await newPlaces();
    const trip = tripTo(place);
    const first = await client.start('trip', trip, { idempotencyKey: `t-${randomUUID()}` });
    assert.equal((await client.result(first.workflowId)).outcome, 'COMPLETED');

    // The same traveller, stay and flight, paid with another card: still the same trip.
    const again = await client.start('trip', { ...trip, payment: { card: '5555555555554444' } }, { idempotencyKey: `t-${randomUUID()}` });

    assert.equal(again.reservation.status, 'DUPLICATE');
    assert.equal(again.started, false);
    assert.equal(again.url, undefined);
    assert.equal(await roomsFree(place), 4);
    assert.equal(await seatsFree(place), 4);
  });

  void it('compensates a declined card: both holds released, nothing charged, and the trip bookable again', TIMEOUT, async () => {
    const place = await newPlaces();
    const trip = tripTo(place, { payment: { card: DECLINED_CARD } });

    const declined = await client.start('trip', trip, { idempotencyKey: `t-${randomUUID()}` });
    const final = await client.result(declined.workflowId);

    assert.equal(final.outcome, 'COMPENSATED');
    assert.deepEqual(await holdStatuses(hotel, declined.workflowId), ['RELEASED']);
    assert.deepEqual(await holdStatuses(airline, declined.workflowId), ['RELEASED']);
    assert.equal(await roomsFree(place), 5);
    assert.equal(await seatsFree(place), 5);
    assert.equal(await charge(declined.workflowId), undefined);

    const retry = await client.start('trip', { ...trip, payment: { card: '4242424242424242' } }, { idempotencyKey: `t-${randomUUID()}` });
    assert.equal((await client.result(retry.workflowId)).outcome, 'COMPLETED');
  });

  void it('compensates a sold-out flight: the room released, no seat taken, nothing charged', TIMEOUT, async () => {
    const place = await newPlaces(0);

    const started = await client.start('trip', tripTo(place), { idempotencyKey: `t-${randomUUID()}` });
    const final = await client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPENSATED');
    assert.deepEqual(await holdStatuses(hotel, started.workflowId), ['RELEASED']);
    assert.deepEqual(await holdStatuses(airline, started.workflowId), []);
    assert.equal(await roomsFree(place), 5);
    assert.equal(await charge(started.workflowId), undefined);
  });

  void it('waits for an airline that answers the hold after the call timed out, and releases that seat when the card is declined', TIMEOUT, async () => {
    const place = await newPlaces();
    slowFlights.set(place.flight, 2 * CALL_TIMEOUT_MS);

    const started = await client.start('trip', tripTo(place, { payment: { card: DECLINED_CARD } }), { idempotencyKey: `t-${randomUUID()}` });
    const final = await client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPENSATED');
    assert.deepEqual(await holdStatuses(airline, started.workflowId), ['RELEASED']);
    assert.equal(await seatsFree(place), 5);
    assert.equal(await roomsFree(place), 5);
  });

  void it('never leaves a seat held when the trip is cancelled while the airline is still holding it', TIMEOUT, async () => {
    const place = await newPlaces();
    slowFlights.set(place.flight, 4000);
    const airlineStarted = waitForAirline('started', place.flight);
    const airlineSettled = waitForAirline('settled', place.flight);

    const started = await client.start('trip', tripTo(place), { idempotencyKey: `t-${randomUUID()}` });
    // The airline is processing the hold (its answer will come late): the traveller gives up.
    await airlineStarted;
    await client.cancel(started.workflowId);
    const final = await client.result(started.workflowId);
    await airlineSettled;

    assert.equal(final.outcome, 'COMPENSATED');
    assert.equal(final.reason, 'CANCELLED');
    // Whatever the airline did with the late hold, no seat of it is held now, nor will be.
    assert.ok((await holdStatuses(airline, started.workflowId)).every((s) => s === 'RELEASED'));
    assert.equal(await seatsFree(place), 5);
    assert.deepEqual(await holdStatuses(hotel, started.workflowId), ['RELEASED']);
    assert.equal(await roomsFree(place), 5);
    assert.equal(await charge(started.workflowId), undefined);
  });

  void it('cancels a booked trip with trip-cancel: room and seat released, the card refunded, the trip released and bookable again', TIMEOUT, async () => {
    const place = await newPlaces();
    const trip = tripTo(place);
    const booked = await client.start('trip', trip, { idempotencyKey: `t-${randomUUID()}` });
    const { outcome, entityId } = await client.result(booked.workflowId);
    assert.equal(outcome, 'COMPLETED');
    // Booked: the same trip asked again is a duplicate.
    assert.equal((await client.start('trip', trip, { idempotencyKey: `t-${randomUUID()}` })).reservation.status, 'DUPLICATE');

    const cancel = await client.start('trip-cancel', { trip: entityId }, { idempotencyKey: `c-${randomUUID()}` });
    assert.equal(cancel.reservation.status, 'SUCCESS');
    const final = await client.result(cancel.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    assert.deepEqual(await holdStatuses(hotel, booked.workflowId), ['RELEASED']);
    assert.deepEqual(await holdStatuses(airline, booked.workflowId), ['RELEASED']);
    assert.equal(await roomsFree(place), 5);
    assert.equal(await seatsFree(place), 5);
    assert.deepEqual(await charge(booked.workflowId), { status: 'REFUNDED', amount_cents: '84900', refunded_by: cancel.workflowId });
    const { rows } = await env.pool.query<{ cancelled: boolean; status: string }>('SELECT cancelled_at IS NOT NULL AS cancelled, status FROM trips WHERE intent_key = $1', [booked.intentKey]);
    assert.deepEqual(rows, [{ cancelled: true, status: 'RELEASED' }]);

    // The cancelled trip is released: cancelling it again finds no trip, and nothing is released or refunded twice.
    await assert.rejects(client.start('trip-cancel', { trip: entityId }, { idempotencyKey: `c-${randomUUID()}` }), { name: 'SagaInputError', code: 'ENTITY_NOT_FOUND' });
    assert.equal(await roomsFree(place), 5);
    assert.equal(await seatsFree(place), 5);
    assert.equal((await charge(booked.workflowId))?.refunded_by, cancel.workflowId);

    // The same trip booked again is a new trip, not a duplicate of the cancelled one.
    const again = await client.start('trip', trip, { idempotencyKey: `t-${randomUUID()}` });
    assert.equal(again.reservation.status, 'SUCCESS');
    const rebooked = await client.result(again.workflowId);
    assert.equal(rebooked.outcome, 'COMPLETED');
    assert.notEqual(rebooked.entityId, entityId);
    const trips = await env.pool.query<{ status: string }>('SELECT status FROM trips WHERE intent_key = $1 ORDER BY id', [booked.intentKey]);
    assert.deepEqual(trips.rows, [{ status: 'RELEASED' }, { status: 'COMPLETED' }]);
    assert.equal(await roomsFree(place), 4);
  });

  void it('refuses a start that asks for more time than a trip may take, before any side effect', TIMEOUT, async () => {
    const place = await newPlaces();
    await assert.rejects(client.start('trip', tripTo(place), { idempotencyKey: `t-${randomUUID()}`, deadlineMs: TRIP_DEADLINE_MS + 1 }), { name: 'SagaInputError', code: 'INVALID_INPUT' });
    assert.equal(await roomsFree(place), 5);
  });

  void it('refuses a malformed trip before any side effect', TIMEOUT, async () => {
    const place = await newPlaces();
    await assert.rejects(
      client.start('trip', { ...tripTo(place), hotel: { hotel: place.hotel, checkIn: '2027-05-04', checkOut: '2027-05-01' } }, { idempotencyKey: `t-${randomUUID()}` }),
      { name: 'SagaInputError', code: 'INVALID_INPUT' },
    );
    assert.equal(await roomsFree(place), 5);
  });
});

/** Resolves when the airline's first processing of a hold on `flight` reaches `event`. */
function waitForAirline(event: 'started' | 'settled', flight: string): Promise<void> {
  return new Promise((resolve) => {
    const listener = (f: string) => {
      if (f !== flight) return;
      airlineHolds.off(event, listener);
      resolve();
    };
    airlineHolds.on(event, listener);
  });
}
