/** The Redis connection of the RMS: one instance or a Redis Cluster, from the `redis` config. */
import { Cluster, Redis } from 'ioredis';
import type { Config } from '../config';

/** Options of {@link createRedis}: the `redis` part of the config. */
export type RedisOptions = Config['redis'];

/**
 * Creates the ioredis client. Commands fail after `commandTimeoutMs` instead of queueing forever
 * while Redis is away, so callers see the outage promptly: each command carries that timeout (also
 * while it waits in the offline queue), and every second failed reconnection fails the queued
 * commands with `MaxRetriesPerRequestError`, whichever comes first.
 *
 * On a Cluster, these options apply per node. While no node is reachable at all, the Cluster client
 * holds commands in its own offline queue, where no per-command timeout applies; `Rms` puts its
 * own deadline (the same `commandTimeoutMs`) around every command for that reason. Other users of a
 * Cluster client need a deadline of their own.
 */
export function createRedis(options: RedisOptions): Redis | Cluster {
  const common = {
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.commandTimeoutMs,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
  };
  if (options.clusterNodes && options.clusterNodes.length > 0) {
    return new Cluster(options.clusterNodes, { redisOptions: common, scaleReads: 'master' });
  }
  return new Redis(options.url, common);
}
