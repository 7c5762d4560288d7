import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { inject, describe, expect, it } from 'vitest';
import { sagaTypes } from '../fixtures/orders';
import { smokeWorkflow } from '../../src/workflows';
import { createRedis } from '../../src/rms/connection';
import { SMOKE_COUNTER_TTL_MS } from '../../src/shared';
import { dataConverterOf } from '../../src/temporal';
import { createWorker } from '../../src/worker';
import { testConfig } from '../helpers/context';

describe('the whole chain', () => {
  it('runs a workflow whose activity touches Redis and PostgreSQL on the real dev server', async () => {
    const config = testConfig('smoke');
    const nativeConnection = await NativeConnection.connect({ address: config.temporal.address });
    const { worker, redis, pool, close } = await createWorker({
      sagas: sagaTypes,
      config,
      connection: nativeConnection,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    const connection = await Connection.connect({ address: config.temporal.address });
    const probe = createRedis(config.redis);
    const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter: dataConverterOf(config) });
    try {
      const result = await worker.runUntil(async () => {
        const first = await client.workflow.execute(smokeWorkflow, {
          taskQueue: config.temporal.taskQueue,
          workflowId: `smoke-${Date.now()}-1`,
          args: ['chain'],
        });
        const second = await client.workflow.execute(smokeWorkflow, {
          taskQueue: config.temporal.taskQueue,
          workflowId: `smoke-${Date.now()}-2`,
          args: ['chain'],
        });
        return [first, second];
      });
      await close();

      expect(result[0]!.redisCounter).toBe(1);
      expect(result[1]!.redisCounter).toBe(2);
      expect(result[0]!.migrationsApplied).toBeGreaterThanOrEqual(1);
      // The counter expires: any starter may name one, and none stays in Redis for good.
      const ttl = await probe.pttl(`${config.redis.keyPrefix}smoke:{chain}`);
      expect(ttl).toBeGreaterThan(SMOKE_COUNTER_TTL_MS - 60_000);
      expect(ttl).toBeLessThanOrEqual(SMOKE_COUNTER_TTL_MS);
      // Shutdown closed the clients the worker owned.
      await expect(redis.ping()).rejects.toThrow();
      expect(pool.ended).toBe(true);
    } finally {
      await connection.close();
      await nativeConnection.close();
      await probe.del(`${config.redis.keyPrefix}smoke:{chain}`);
      probe.disconnect();
    }
  });
});
