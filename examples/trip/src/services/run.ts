/**
 * The example hotel and airline as one process (`npm run services`): their tables in DATABASE_URL
 * (`npm run migrate` first), listening on HOTEL_ADDRESS and AIRLINE_ADDRESS, until SIGINT or
 * SIGTERM. AIRLINE_HOLD_DELAY_MS makes the airline slow to hold a seat.
 */
import pg from 'pg';
import { hostPort, tripSettings } from '../settings';
import { createAirlineServer } from './airline';
import { createHotelServer } from './hotel';

async function main(): Promise<void> {
  const settings = tripSettings(process.env);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/trip_example', max: 10 });
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const hotel = createHotelServer({ pool, log });
  const airline = createAirlineServer({ pool, log, holdDelayMs: settings.AIRLINE_HOLD_DELAY_MS });
  for (const [name, server, address] of [['hotel', hotel, settings.HOTEL_ADDRESS], ['airline', airline, settings.AIRLINE_ADDRESS]] as const) {
    const url = await server.listen(hostPort(address));
    log(`services: ${name} listening on ${url}`);
  }
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
  });
  await Promise.all([hotel.close(), airline.close()]);
  await pool.end();
  log('services: stopped');
}

main().catch((err: unknown) => {
  process.stderr.write(`services: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
