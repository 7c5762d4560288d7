/**
 * The example airline: holds a seat on a flight, and releases it (see hold-server.ts for the HTTP
 * API and its idempotency rules). Its tables are in schema `airline`: `airline.flights` (seats free
 * per flight; a flight is one departure), `airline.holds` and `airline.idempotency_keys`.
 *
 * `POST /v1/holds` body: `{ flight, reference }`; refusals `unknown_flight` and `sold_out`.
 * `GET /v1/flights/:flight`: `{ flight, seats_available }`.
 *
 * An airline is often slow to confirm a seat: `holdDelayMs` makes it so (the demo's
 * AIRLINE_HOLD_DELAY_MS, the tests' late answers).
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { z } from 'zod';
import { createHoldServer, holdTablesSql, sendProblem, type HoldServerOptions } from './hold-server';

const holdBody = z
  .object({
    flight: z.string().regex(/^[A-Z0-9]{2,3}[0-9]{1,4}(-[0-9]{8})?$/, 'must be a flight number, e.g. TS101 or TS101-20260501'),
    reference: z.string().min(1).max(200),
  })
  .strict();

/** The body of the airline's `POST /v1/holds`. */
export type SeatHoldBody = z.infer<typeof holdBody>;

/** The airline's tables (schema `airline`), and its example flights. */
export const AIRLINE_SCHEMA_SQL = `
  ${holdTablesSql('airline')}
  CREATE TABLE IF NOT EXISTS airline.flights (
    flight          text    PRIMARY KEY,
    seats_available integer NOT NULL CHECK (seats_available >= 0)
  );
  INSERT INTO airline.flights (flight, seats_available) VALUES ('TS101', 180), ('TS202', 1) ON CONFLICT (flight) DO NOTHING;`;

/** Adds `seats` free seats on `flight` (scheduling it): the airline's back office, for tests and demos. */
export async function addSeats(pool: pg.Pool, flight: string, seats: number): Promise<void> {
  await pool.query(
    `INSERT INTO airline.flights (flight, seats_available) VALUES ($1, $2)
     ON CONFLICT (flight) DO UPDATE SET seats_available = airline.flights.seats_available + EXCLUDED.seats_available`,
    [flight, seats],
  );
}

/** The airline's HTTP server, ready to `listen`. */
export function createAirlineServer(options: HoldServerOptions<SeatHoldBody>): FastifyInstance {
  return createHoldServer<SeatHoldBody>(
    {
      name: 'airline',
      body: holdBody,
      async take(tx, body) {
        const { rowCount } = await tx.query('UPDATE airline.flights SET seats_available = seats_available - 1 WHERE flight = $1 AND seats_available > 0', [body.flight]);
        if (rowCount === 1) return { resource: body.flight };
        const { rows } = await tx.query('SELECT 1 FROM airline.flights WHERE flight = $1', [body.flight]);
        return rows.length === 0
          ? { refused: { code: 'unknown_flight', detail: `there is no flight ${body.flight}` } }
          : { refused: { code: 'sold_out', detail: `flight ${body.flight} has no seat left` } };
      },
      async giveBack(tx, flight) {
        await tx.query('UPDATE airline.flights SET seats_available = seats_available + 1 WHERE flight = $1', [flight]);
      },
      routes(app, pool) {
        app.get<{ Params: { flight: string } }>('/v1/flights/:flight', async (request, reply) => {
          const { rows } = await pool.query<{ seats_available: number }>('SELECT seats_available FROM airline.flights WHERE flight = $1', [request.params.flight]);
          if (!rows[0]) return sendProblem(reply, 404, 'not_found', `there is no flight ${request.params.flight}`);
          return reply.send({ flight: request.params.flight, seats_available: rows[0].seats_available });
        });
      },
    },
    options,
  );
}
