/**
 * Per-test isolation derived from the test's name: its own task queue and Redis key prefix inside
 * the run's database and Temporal namespace (set up once by global-setup.ts).
 */
import { createHash } from 'node:crypto';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config';
import { TEST_CODEC_KEYS, TEST_INTENT_SECRET } from './secrets';

/** A config for one test: the run's services, a task queue and a key prefix of the test's own. */
export function testConfig(testName: string, overrides: NodeJS.ProcessEnv = {}): Config {
  const slug = testName.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 40);
  const digest = createHash('sha256').update(testName).digest('hex').slice(0, 8);
  return loadConfig({
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_NAMESPACE: inject('temporalNamespace'),
    TEMPORAL_TASK_QUEUE: `test-${slug}-${digest}`,
    DATABASE_URL: inject('databaseUrl'),
    REDIS_URL: inject('redisUrl'),
    // The sagas' Redis Cluster on `make test-stack`; unset, REDIS_URL serves.
    ...(inject('redisClusterNodes') ? { REDIS_CLUSTER_NODES: inject('redisClusterNodes') } : {}),
    REDIS_KEY_PREFIX: `${inject('runPrefix')}${digest}:`,
    INTENT_KEY_SECRET: TEST_INTENT_SECRET.toString('base64'),
    SAGA_CODEC_KEYS: TEST_CODEC_KEYS,
    ...overrides,
  });
}
