/**
 * Checks that Redis and PostgreSQL answer (one clear line naming the URL if not), creates the
 * database when missing and applies pending migrations, and makes the development secrets in the
 * data folder when missing (scripts/dev-secrets.ts). Used by `make dev` and `make demo`.
 */
import path from 'node:path';
import { loadConfigOrExit } from '../src/config';
import { createRedis } from '../src/rms/connection';
import { ensureDatabase } from '../src/db/migrate';
import { devSecretsPath, ensureDevSecrets } from './dev-secrets';
import { migrateOrders } from '../examples/orders/src/migrate';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  // The Redis the RMS will use: REDIS_URL, or the Redis Cluster of REDIS_CLUSTER_NODES (make stack).
  const nodes = config.redis.clusterNodes?.map((n) => `${n.host}:${n.port}`).join(',');
  const where = nodes ? `${nodes} (REDIS_CLUSTER_NODES)` : `${config.redis.url} (REDIS_URL)`;
  const redis = createRedis({ ...config.redis, commandTimeoutMs: 3000 });
  redis.on('error', () => {});
  try {
    // The cluster client queues commands while it finds no node, with no deadline of its own.
    await Promise.race([redis.ping(), new Promise((_, reject) => setTimeout(() => reject(new Error('no answer in 3 s')), 3000).unref())]);
  } catch (err) {
    fail(`Redis is not reachable at ${where}: ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
  try {
    if (await ensureDatabase(config.db.url)) console.log(`prepare: created database ${new URL(config.db.url).pathname.slice(1)}`);
  } catch (err) {
    fail(`PostgreSQL is not reachable at ${redact(config.db.url)} (DATABASE_URL): ${(err as Error).message}`);
  }
  const applied = await migrateOrders(config.db.url, (line) => console.error(line));
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
