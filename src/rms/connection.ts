/** The Redis connection of the RMS: one instance or a Redis Cluster, from the `redis` config. */
import { Cluster, Redis } from 'ioredis';
import type { Config } from '../config';

/** Options of {@link createRedis}: the `redis` part of the config. */
export type RedisOptions = Config['redis'];

/**
 * Creates the ioredis client. Commands fail after `commandTimeoutMs` instead of queueing forever
 * while Redis is away, so callers see the outage promptly.
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
