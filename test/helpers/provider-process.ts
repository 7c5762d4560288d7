/**
 * The example payment provider in a process of its own, for tests that kill it. Imported, it starts
 * such processes ({@link startProviderProcess}); run as a script (`node --import tsx` this file), it
 * is one: a provider on DATABASE_URL, listening on 127.0.0.1:PROVIDER_PORT (0: a free port), that
 * exits with status 137 right after committing a charge or refund whose key is PROVIDER_CRASH_ON_KEY,
 * before answering it (as a process killed between commit and reply would).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { createProviderServer, ensureProviderSchema } from '../fixtures/orders';

const LISTENING = 'provider-process: listening on ';

/** A provider process started by {@link startProviderProcess}. */
export interface ProviderProcess {
  child: ChildProcess;
  /** The provider's base URL. */
  url: string;
  port: number;
  /** Resolves with the exit code once the process exited. */
  exited: Promise<number | null>;
  /** Everything it wrote to stdout and stderr so far. */
  output: () => string;
}

const started = new Set<ChildProcess>();

/** Kills every provider process a test started and did not see exit (for afterAll). */
export function killProviderProcesses(): void {
  for (const child of started) child.kill('SIGKILL');
}

/** Starts a provider process; resolves once it listens. */
export async function startProviderProcess(options: { databaseUrl: string; crashOnKey?: string; port?: number }): Promise<ProviderProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', __filename], {
    cwd: path.resolve(__dirname, '../..'),
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      PROVIDER_CRASH_ON_KEY: options.crashOnKey ?? '',
      PROVIDER_PORT: String(options.port ?? 0),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      started.delete(child);
      resolve(code);
    }),
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', () => {
      const match = new RegExp(`${LISTENING}http://127\\.0\\.0\\.1:(\\d+)`).exec(output);
      if (match) resolve(Number(match[1]));
    });
    void exited.then((code) => reject(new Error(`provider process exited (${code}) before listening:\n${output}`)));
  });
  return { child, url: `http://127.0.0.1:${port}`, port, exited, output: () => output };
}

async function main(): Promise<void> {
  const crashOnKey = process.env.PROVIDER_CRASH_ON_KEY ?? '';
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4, application_name: 'provider-process' });
  pool.on('error', () => {});
  await ensureProviderSchema(pool);
  const app = createProviderServer({
    pool,
    log: (line) => process.stdout.write(`${line}\n`),
    hooks: {
      afterCommit: (_op, key) => {
        if (crashOnKey !== '' && key === crashOnKey) process.exit(137);
      },
    },
  });
  await app.listen({ host: '127.0.0.1', port: Number(process.env.PROVIDER_PORT ?? 0) });
  process.stdout.write(`${LISTENING}http://127.0.0.1:${(app.server.address() as AddressInfo).port}\n`);
  process.once('SIGTERM', () => void app.close().then(() => pool.end()));
}

if (path.resolve(process.argv[1] ?? '') === __filename) {
  main().catch((err: unknown) => {
    process.stderr.write(`provider-process: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
