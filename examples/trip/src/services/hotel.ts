/**
 * The example hotel: holds a room at a hotel for a stay, and releases it (see hold-server.ts for
 * the HTTP API and its idempotency rules). Its tables are in schema `hotel`: `hotel.rooms` (rooms
 * free per hotel; one count for every night, to keep the example small), `hotel.holds` and
 * `hotel.idempotency_keys`.
 *
 * `POST /v1/holds` body: `{ hotel, check_in, check_out, reference }`; refusals `unknown_hotel` and
 * `sold_out`. `GET /v1/hotels/:hotel`: `{ hotel, rooms_available }`.
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { z } from 'zod';
import { createHoldServer, holdTablesSql, sendProblem, type HoldServerOptions } from './hold-server';

const isoDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date, YYYY-MM-DD');

const holdBody = z
  .object({
    hotel: z.string().min(1).max(64),
    check_in: isoDate,
    check_out: isoDate,
    reference: z.string().min(1).max(200),
  })
  .strict()
  .refine((b) => b.check_in < b.check_out, 'check_out must be after check_in');

/** The body of the hotel's `POST /v1/holds`. */
export type RoomHoldBody = z.infer<typeof holdBody>;

/** The hotel's tables (schema `hotel`), and its example hotels. */
export const HOTEL_SCHEMA_SQL = `
  ${holdTablesSql('hotel')}
  CREATE TABLE IF NOT EXISTS hotel.rooms (
    hotel           text    PRIMARY KEY,
    rooms_available integer NOT NULL CHECK (rooms_available >= 0)
  );
  INSERT INTO hotel.rooms (hotel, rooms_available) VALUES ('harbour-view', 100), ('tiny-inn', 1) ON CONFLICT (hotel) DO NOTHING;`;

/** Adds `rooms` free rooms at `hotel` (creating it): the hotel's back office, for tests and demos. */
export async function addRooms(pool: pg.Pool, hotel: string, rooms: number): Promise<void> {
  await pool.query(
    `INSERT INTO hotel.rooms (hotel, rooms_available) VALUES ($1, $2)
     ON CONFLICT (hotel) DO UPDATE SET rooms_available = hotel.rooms.rooms_available + EXCLUDED.rooms_available`,
    [hotel, rooms],
  );
}

/** The hotel's HTTP server, ready to `listen`. */
export function createHotelServer(options: HoldServerOptions<RoomHoldBody>): FastifyInstance {
  return createHoldServer<RoomHoldBody>(
    {
      name: 'hotel',
      body: holdBody,
      async take(tx, body) {
        const { rowCount } = await tx.query('UPDATE hotel.rooms SET rooms_available = rooms_available - 1 WHERE hotel = $1 AND rooms_available > 0', [body.hotel]);
        if (rowCount === 1) return { resource: body.hotel };
        const { rows } = await tx.query('SELECT 1 FROM hotel.rooms WHERE hotel = $1', [body.hotel]);
        return rows.length === 0
          ? { refused: { code: 'unknown_hotel', detail: `there is no hotel ${body.hotel}` } }
          : { refused: { code: 'sold_out', detail: `${body.hotel} has no room left` } };
      },
      async giveBack(tx, hotel) {
        await tx.query('UPDATE hotel.rooms SET rooms_available = rooms_available + 1 WHERE hotel = $1', [hotel]);
      },
      routes(app, pool) {
        app.get<{ Params: { hotel: string } }>('/v1/hotels/:hotel', async (request, reply) => {
          const { rows } = await pool.query<{ rooms_available: number }>('SELECT rooms_available FROM hotel.rooms WHERE hotel = $1', [request.params.hotel]);
          if (!rows[0]) return sendProblem(reply, 404, 'not_found', `there is no hotel ${request.params.hotel}`);
          return reply.send({ hotel: request.params.hotel, rooms_available: rows[0].rooms_available });
        });
      },
    },
    options,
  );
}
