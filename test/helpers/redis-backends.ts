/**
 * The Redis backends an RMS suite runs against, written once and run per backend (node-redlock runs
 * one suite against an instance and a cluster): the shared single instance of the run, a Redis
 * Cluster of the suite's own, and, for data-loss tests, a single server of the suite's own.
 * Clients come from the project's `createRedis`, so the suites exercise the real connection settings.
 */
import { Cluster, type Redis } from 'ioredis';
import { inject } from 'vitest';
import { Rms } from '../../src/rms';
import { createRedis } from '../../src/rms/connection';
import { testConfig } from './context';
import { startRedisCluster, startRedisServer } from './redis-servers';

/** Deadline of one command in these suites: generous for a 2-core machine under load. */
export const TEST_COMMAND_TIMEOUT_MS = 2000;

/** A running backend and the clients opened on it. */
export interface RedisBackend {
  readonly kind: BackendKind;
  /** A new client (closed by `close()`). */
  connect(): Redis | Cluster;
  /** Every key matching `pattern`, over every master. */
  keys(pattern: string): Promise<string[]>;
  /** Loses every key, as a restart without persistence does; only for backends the suite owns. */
  loseAllData?(): Promise<void>;
  /** Kills every server, runs `whileDown`, then starts them again (without data); only for backends the suite owns. */
  outage?(whileDown: () => Promise<void>): Promise<void>;
  /** Closes the clients and stops what the backend started. */
  close(): Promise<void>;
}

/** The backends: `single` is the run's shared instance; the `own-` ones are started for the suite. */
export type BackendKind = 'single' | 'cluster' | 'own-single';

/** Starts (or connects to) a backend. */
export async function startBackend(kind: BackendKind): Promise<RedisBackend> {
  const clients: (Redis | Cluster)[] = [];
  const closeClients = async () => {
    await Promise.all(clients.splice(0).map((c) => c.quit().catch(() => c.disconnect())));
  };
  const track = <T extends Redis | Cluster>(client: T): T => {
    // Outages are provoked on purpose; the commands report them, the event would only be noise.
    client.on('error', () => {});
    clients.push(client);
    return client;
  };
  const base = { keyPrefix: 'unused:', commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS };

  if (kind === 'single') {
    const url = inject('redisUrl');
    return {
      kind,
      connect: () => track(createRedis({ ...base, url })),
      keys: (pattern) => scanAll(track(createRedis({ ...base, url })), pattern),
      close: closeClients,
    };
  }

  if (kind === 'own-single') {
    const server = await startRedisServer();
    return {
      kind,
      connect: () => track(createRedis({ ...base, url: server.url })),
      keys: (pattern) => scanAll(track(createRedis({ ...base, url: server.url })), pattern),
      async loseAllData() {
        await server.kill();
        await server.start();
      },
      async outage(whileDown) {
        await server.kill();
        try {
          await whileDown();
        } finally {
          await server.start();
        }
      },
      async close() {
        await closeClients();
        await server.stop();
      },
    };
  }

  const cluster = await startRedisCluster(3);
  const connect = () => track(createRedis({ ...base, url: 'redis://unused', clusterNodes: cluster.nodes }));
  return {
    kind,
    connect,
    keys: (pattern) => scanAll(connect(), pattern),
    loseAllData: () => cluster.restartWithoutData(),
    async outage(whileDown) {
      await cluster.kill();
      try {
        await whileDown();
      } finally {
        await cluster.startAgain();
      }
    },
    async close() {
      await closeClients();
      await cluster.stop();
    },
  };
}

/** Every key matching `pattern` on a single instance, or on every master of a cluster. */
async function scanAll(client: Redis | Cluster, pattern: string): Promise<string[]> {
  const nodes = client instanceof Cluster ? await clusterMasters(client) : [client];
  const found: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
  }
  return found.sort();
}

/**
 * Deletes every key under `prefix` in one step per server, as Redis loses its data (a restart without
 * persistence, a flush, a failover to a replica's earlier state): never the rest of a shared
 * instance's (no FLUSHALL). One script per master (KEYS, then UNLINK each, atomically): a wipe by
 * SCAN and one UNLINK per key would be a partial loss spread over many round trips, which Redis
 * never does on its own (only eviction loses some keys and keeps others; the docs require
 * `maxmemory-policy noeviction`), and which can separate an intent's keys from one another (seen
 * once in CI's fault run):
 *   wipe: lists d, e, p of intent X; UNLINK d (K1's ended saga), UNLINK e (K1's tombstone)
 *   K2, still holding p: finalise: e = K2's marker (a key the wipe did not list: it stays)
 *   wipe: UNLINK p                        K1's retry: DUPLICATE of K2, not its own COMPENSATED
 * Lost in one step, K2's lease goes with the rest: its finalise finds it LOST and repairs the marker
 * through markEntityExists, which restores the ended sessions from PostgreSQL first.
 * An intent's keys share a hash tag, so on a cluster they share a master and go in the same step.
 * Returns how many keys it deleted.
 */
export async function wipeKeys(client: Redis | Cluster, prefix: string): Promise<number> {
  const nodes = client instanceof Cluster ? await clusterMasters(client) : [client];
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  let deleted = 0;
  for (const node of nodes) deleted += Number(await node.eval(WIPE_SCRIPT, 0, pattern));
  return deleted;
}

const WIPE_SCRIPT = `
local deleted = 0
for _, key in ipairs(redis.call('KEYS', ARGV[1])) do deleted = deleted + redis.call('UNLINK', key) end
return deleted`;

async function clusterMasters(cluster: Cluster): Promise<Redis[]> {
  // The node list fills in once the client has read the slot map.
  await cluster.ping();
  return cluster.nodes('master');
}

/** The key prefix of the running test, unique per test and per backend (lives under the run's prefix). */
export function testPrefix(testFullName: string): string {
  return testConfig(testFullName).redis.keyPrefix;
}

/** An RMS on `client` under the running test's own prefix. */
export function rmsFor(client: Redis | Cluster, testFullName: string): Rms {
  return new Rms(client, { keyPrefix: testPrefix(testFullName) });
}

/**
 * Waits until the lease on `intent` has passed, by polling the remaining lease Redis reports (never a
 * fixed sleep): sleeps the reported remainder, checks again, and gives up after `timeoutMs`.
 */
export async function waitForLeaseToPass(rms: Rms, intent: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { holder } = await rms.inspect(intent);
    if (holder === undefined) return;
    if (Date.now() > deadline) throw new Error(`lease on ${intent} still held after ${timeoutMs} ms`);
    await sleep(Math.max(1, Math.min(holder.remainingMs, 50)));
  }
}

/** Waits until `check` holds, polling every few milliseconds; fails after `timeoutMs`. */
export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
