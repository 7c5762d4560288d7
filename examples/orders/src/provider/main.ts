/** Runs the example payment provider as a service (what `saga payment-provider` starts). */
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { ensureProviderSchema } from './schema';
import { createProviderServer } from './server';

/** Options of {@link runPaymentProvider}. */
export interface RunPaymentProviderOptions {
  /** The database its tables live in (schema `payment_provider`). */
  databaseUrl: string;
  /** Where it listens. */
  host: string;
  /** Port to listen on (0: a free one). */
  port: number;
  /**
   * Receives one line per charge or refund outcome (see {@link createProviderServer}).
   * @default a line on stdout
   */
  log?: (line: string) => void;
}

/** A running provider. */
export interface RunningPaymentProvider {
  /** The URL it listens on, e.g. `http://127.0.0.1:8235` (the bound port when the config asks for port 0). */
  url: string;
  /** Stops accepting requests, lets those in flight finish, and ends its database pool. */
  close(): Promise<void>;
}

/**
 * Starts the example payment provider: a pool on `databaseUrl`, schema `payment_provider` made if
 * missing, and the server listening on `host` and `port`. Installs no signal handlers: the caller
 * decides when to {@link RunningPaymentProvider.close}.
 */
export async function runPaymentProvider(options: RunPaymentProviderOptions): Promise<RunningPaymentProvider> {
  const log = options.log ?? ((line: string) => void process.stdout.write(`${line}\n`));
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 10 });
  // An idle connection that PostgreSQL ends (a restart, a terminated backend) reports here; without a
  // listener the error would end the process. The pool opens a new connection when one is needed.
  pool.on('error', (err) => log(`payment provider: PostgreSQL connection lost: ${err.message}`));
  try {
    await ensureProviderSchema(pool);
    const app = createProviderServer({ pool, log });
    try {
      await app.listen({ host: options.host, port: options.port });
    } catch (err) {
      await app.close();
      throw err;
    }
    const { port } = app.server.address() as AddressInfo;
    const host = options.host.includes(':') ? `[${options.host}]` : options.host;
    return {
      url: `http://${host}:${port}`,
      async close() {
        try {
          await app.close();
        } finally {
          await pool.end();
        }
      },
    };
  } catch (err) {
    await pool.end();
    throw err;
  }
}
