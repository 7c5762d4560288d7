/**
 * The installed package as an ES module app uses it. scripts/test-package compiles this file with
 * the app's own tsc (strict, nodenext) against the tarball's declarations, then runs it with node:
 * each of the four entries imports by name, its names are the CommonJS entry's very objects (one
 * copy of the module state however the package is loaded), and a declaration goes end to end
 * through the client, worker and HTTP entries' pure functions.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { z } from 'zod';
import { defineSaga, fencedTable, loadConfig, sagaTypesOf, SagaClient, StepRejectedError, type Config, type StartedSaga } from 'reservation-saga';
import * as client from 'reservation-saga';
import { createWorker, fencedTableSql, migrate, type AppWorker } from 'reservation-saga/worker';
import * as worker from 'reservation-saga/worker';
import { createSagaServer, openApiDocument } from 'reservation-saga/http';
import * as http from 'reservation-saga/http';
import { startTestEnvironment, TemporalCliNotFoundError, TestEnvironmentError, type SagaTestEnvironment } from 'reservation-saga/testing';
import * as testing from 'reservation-saga/testing';

const require = createRequire(import.meta.url);
for (const [entry, esm] of [['reservation-saga', client], ['reservation-saga/worker', worker], ['reservation-saga/http', http], ['reservation-saga/testing', testing]] as const) {
  const cjs = require(entry) as Record<string, unknown>;
  const names = Object.keys(cjs).filter((name) => name !== '__esModule');
  assert.ok(names.length > 0, `${entry} exports nothing`);
  assert.deepEqual(Object.keys(esm).sort(), names.sort(), `${entry}: the ES module entry exports the CommonJS entry's names`);
  for (const name of names) assert.equal((esm as Record<string, unknown>)[name], cjs[name], `${entry}: ${name} is one object under import and require`);
}

const bookingSchema = z.object({ room: z.string().min(1), night: z.iso.date() }).strict();
const booking = defineSaga({
  type: 'booking',
  scope: 'booking',
  schema: bookingSchema,
  intent: (input) => ({ room: input.room, night: input.night }),
  table: fencedTable('bookings', ['room', 'night']),
  row: (input) => ({ room: input.room, night: input.night }),
  steps: [{ step: 'confirm', compensation: 'release' }],
  handlers: {
    confirm: async (tx, { intentKey }) => {
      const { rowCount } = await tx.query('UPDATE bookings SET confirmed = true WHERE intent_key = $1', [intentKey]);
      if (rowCount !== 1) throw new StepRejectedError('no such booking', 'MISSING');
      return { confirmed: true };
    },
    release: async () => ({ released: true }),
  },
});
const types = sagaTypesOf([booking]);
assert.deepEqual(Object.keys(types), ['booking']);
assert.match(fencedTableSql('bookings', 'room text NOT NULL, night date NOT NULL'), /last_fencing_token/);
const document = openApiDocument(types) as { paths: Record<string, unknown> };
assert.ok(Object.keys(document.paths).some((path) => path.startsWith('/v1/sagas')), 'the OpenAPI document has the saga routes');
const config: Config = loadConfig({ INTENT_KEY_SECRET: Buffer.alloc(32, 2).toString('base64'), SAGA_CODEC_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}` });
assert.equal(typeof config.temporal.taskQueue, 'string');

// Typed, not called: what an app writes around the four entries.
export async function startBooking(sagaClient: SagaClient, room: string): Promise<StartedSaga> {
  return sagaClient.start('booking', { room, night: '2026-12-24' }, { idempotencyKey: `booking-${room}` });
}
export const connect = () => SagaClient.connect({ sagas: [booking], config });
// A client connected with the app's declarations takes only their names, each with its own input.
export async function typedStarts(): Promise<void> {
  const typed = await connect();
  await typed.start('booking', { room: '101', night: '2026-12-24' });
  // @ts-expect-error -- a misspelt saga type does not compile
  await typed.start('bookin', { room: '101', night: '2026-12-24' });
  // @ts-expect-error -- nor an input of another shape
  await typed.start('booking', { room: 101 });
}
export const startWorker = (): Promise<AppWorker> => createWorker({ sagas: [booking], config });
export const ready = (): Promise<string[]> => migrate(config.db.url);
export const server = () => createSagaServer;
// An app's test: the environment's client takes only the app's saga types.
export async function testedBooking(): Promise<void> {
  const env: SagaTestEnvironment<[typeof booking]> = await startTestEnvironment({ sagas: [booking], migrate: (url) => migrate(url) });
  await env.client.start('booking', { room: '101', night: '2026-12-24' });
  // @ts-expect-error -- a misspelt saga type does not compile
  await env.client.start('bookin', { room: '101', night: '2026-12-24' });
  await env.stop();
}
assert.ok(new TemporalCliNotFoundError('none') instanceof TestEnvironmentError);
console.log('consumer.mts: the four entries import by name, typecheck under strict, and share the CommonJS build');
