/**
 * The hotel's and the airline's contract, what the trip's steps and compensations rely on: a hold
 * is made once per idempotency key, a release is answered only once the hold it names has settled,
 * and a release of a key no hold was made with voids it. Needs PostgreSQL only.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { startTestDatabase, type TestDatabase } from 'reservation-saga/testing';
import { migrateTrip } from '../src/migrate';
import { addSeats, createAirlineServer } from '../src/services/airline';
import { HoldRefusedError, HoldServiceClient, KeyInUseError, KeyVoidedError } from '../src/services/client';

const SLOW_MS = 1500;

let database: TestDatabase;
let pool: pg.Pool;
let server: FastifyInstance;
let airline: HoldServiceClient;
/** Does not wait while a key is in use: sees the service's 409 itself. */
let impatient: HoldServiceClient;

before(async () => {
  database = await startTestDatabase({ migrate: migrateTrip });
  pool = database.pool;
  server = createAirlineServer({ pool, holdDelayMs: (body) => (body.flight.startsWith('SL') ? SLOW_MS : 0) });
  await server.listen({ host: '127.0.0.1', port: 0 });
  const baseUrl = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
  airline = new HoldServiceClient({ name: 'airline', baseUrl, timeoutMs: 5000 });
  impatient = new HoldServiceClient({ name: 'airline', baseUrl, timeoutMs: 5000, waitWhileInUseMs: 0 });
});

after(async () => {
  await server?.close();
  await database?.stop();
});

let flights = 0;
async function flight(prefix = 'TS', seats = 3): Promise<string> {
  const name = `${prefix}${++flights}`;
  await addSeats(pool, name, seats);
  return name;
}
const seatsFree = async (f: string) => (await airline.get(`/v1/flights/${f}`)).seats_available;

void describe('a hold service (the airline)', () => {
  void it('holds once per idempotency key: a retry gets the same hold', async () => {
    const f = await flight();
    const key = `k-${randomUUID()}`;
    const first = await airline.hold(key, { flight: f, reference: 'r1' });
    const retry = await airline.hold(key, { flight: f, reference: 'r1' });
    assert.equal(retry.id, first.id);
    assert.equal(await seatsFree(f), 2);
  });

  void it('refuses a hold on a full flight, and keeps refusing it for that key', async () => {
    const f = await flight('TS', 0);
    const key = `k-${randomUUID()}`;
    await assert.rejects(airline.hold(key, { flight: f, reference: 'r' }), HoldRefusedError);
    await addSeats(pool, f, 1);
    await assert.rejects(airline.hold(key, { flight: f, reference: 'r' }), HoldRefusedError);
    assert.equal(await seatsFree(f), 1);
  });

  void it('releases a hold once, whatever the retries', async () => {
    const f = await flight();
    const holdKey = `k-${randomUUID()}`;
    await airline.hold(holdKey, { flight: f, reference: 'r' });
    const releaseKey = `k-${randomUUID()}`;
    assert.equal((await airline.release(releaseKey, holdKey)).status, 'released');
    assert.equal((await airline.release(releaseKey, holdKey)).status, 'released');
    assert.equal((await airline.release(`k-${randomUUID()}`, holdKey)).status, 'released');
    assert.equal(await seatsFree(f), 3);
  });

  void it('voids a key no hold was made with: a hold arriving later with it is refused and holds nothing', async () => {
    const f = await flight();
    const holdKey = `k-${randomUUID()}`;
    assert.equal((await airline.release(`k-${randomUUID()}`, holdKey)).status, 'voided');
    await assert.rejects(airline.hold(holdKey, { flight: f, reference: 'r' }), KeyVoidedError);
    assert.equal(await seatsFree(f), 3);
  });

  void it('answers a release 409 while the hold it names is being processed, and releases the late hold once it settled', async () => {
    const f = await flight('SL');
    const holdKey = `k-${randomUUID()}`;
    const late = airline.hold(holdKey, { flight: f, reference: 'r' });
    await new Promise((resolve) => setTimeout(resolve, SLOW_MS / 3));

    await assert.rejects(impatient.release(`k-${randomUUID()}`, holdKey), KeyInUseError);
    // A patient caller (as the trip's compensation is) waits for the hold to settle, then releases it.
    const released = await airline.release(`k-${randomUUID()}`, holdKey);

    assert.equal(released.status, 'released');
    assert.equal(released.holdId, (await late).id);
    assert.equal(await seatsFree(f), 3);
  });
});
