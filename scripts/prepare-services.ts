/**
 * Checks that Redis and PostgreSQL answer (one clear line naming the URL if not), creates the
 * database when missing and applies pending migrations, and makes the development secrets in the
 * data folder when missing (scripts/dev-secrets.ts). Used by `make dev` and `make demo`.
 */
import path from 'node:path';
import { Redis } from 'ioredis';
import { loadConfigOrExit } from '../src/config';
import { ensureDatabase, migrate } from '../src/db/migrate';
import { devSecretsPath, ensureDevSecrets } from './dev-secrets';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const redis = new Redis(config.redis.url, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    fail(`Redis is not reachable at ${config.redis.url} (REDIS_URL): ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
  try {
    if (await ensureDatabase(config.db.url)) console.log(`prepare: created database ${new URL(config.db.url).pathname.slice(1)}`);
  } catch (err) {
    fail(`PostgreSQL is not reachable at ${redact(config.db.url)} (DATABASE_URL): ${(err as Error).message}`);
  }
  const applied = await migrate(config.db.url, (line) => console.error(line));
  console.log(applied.length ? `prepare: applied migrations ${applied.join(', ')}` : 'prepare: database schema up to date');
  const dataDir = process.env.TEMPORAL_DEV_DATA_DIR ?? path.join(__dirname, '..', '.data');
  const { made } = ensureDevSecrets(dataDir);
  if (made.length > 0) {
    console.log(`prepare: made development secrets (${made.join(', ')}) in ${devSecretsPath(dataDir)}; for a worker or bin/saga by hand: set -a; . ${devSecretsPath(dataDir)}; set +a`);
  }
}

function redact(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

function fail(line: string): never {
  process.stderr.write(`${line}\n`);
  process.exit(69);
}

main().catch((err: unknown) => {
  process.stderr.write(`prepare: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
