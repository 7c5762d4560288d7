/**
 * Invariant 4: losing all Redis data never yields a lower fencing token nor lets a stale holder
 * finalize. Run against servers the suite owns (never the shared instance): a single `redis-server`
 * and a three-master cluster, both without persistence, killed with SIGKILL and started again.
 */
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rms, RmsUnavailableError, intentKey } from '../../src/rms';
import { startBackend, testPrefix, waitUntil, type RedisBackend } from '../helpers/redis-backends';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

const LEASE_MS = 30_000;

describe.each(['own-single', 'cluster'] as const)('the RMS when %s Redis loses its data', (kind) => {
  let backend: RedisBackend;
  let redis: Redis | Cluster;

  beforeAll(async () => {
    backend = await startBackend(kind);
    redis = backend.connect();
  });

  afterAll(async () => {
    await backend?.close();
  });

  function arrange(testName: string) {
    return { rms: new Rms(redis, { keyPrefix: testPrefix(testName) }), intent: intentKey('order', { test: testName }, TEST_INTENT_SECRET) };
  }

  /** Waits until the client reaches the restarted server(s) again. */
  async function waitForRedis(rms: Rms, intent: string): Promise<void> {
    await waitUntil(
      'Redis answers again',
      async () => {
        try {
          await rms.inspect(intent);
          return true;
        } catch (err) {
          if (err instanceof RmsUnavailableError) return false;
          throw err;
        }
      },
      20_000,
    );
  }

  it('keeps tokens strictly increasing over 1,000 reserve/release cycles and across a restart without data', async ({ task }) => {
    const { rms, intent } = arrange(task.fullName);
    const tokens: bigint[] = [];
    for (let i = 0; i < 1000; i++) {
      const held = await rms.reserve({ intent, sessionId: `before-${i}`, leaseMs: LEASE_MS });
      if (held.status !== 'SUCCESS') throw new Error(`unexpected ${held.status}`);
      tokens.push(BigInt(held.fencingToken));
      await rms.release({ intent, sessionId: `before-${i}`, fencingToken: held.fencingToken });
    }

    await backend.loseAllData!();
    await waitForRedis(rms, intent);
    const forgotten = await rms.inspect(intent);
    const after = await rms.reserve({ intent, sessionId: 'after', leaseMs: LEASE_MS });
    if (after.status === 'SUCCESS') tokens.push(BigInt(after.fencingToken));

    expect(forgotten).toEqual({ intent, exists: false }); // Redis really forgot the intent
    expect(after.status).toBe('SUCCESS');
    expect(tokens).toHaveLength(1001);
    expect(tokens.filter((token, i) => i > 0 && token <= tokens[i - 1]!)).toEqual([]);
  });

  it('lets a holder from before the loss neither extend nor finalize', async ({ task }) => {
    const { rms, intent } = arrange(task.fullName);
    const held = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LEASE_MS });
    if (held.status !== 'SUCCESS') throw new Error(`unexpected ${held.status}`);

    await backend.loseAllData!();
    await waitForRedis(rms, intent);
    const extended = await rms.extend({ intent, sessionId: 'session-a', fencingToken: held.fencingToken, leaseMs: LEASE_MS });
    const finalized = await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });

    expect([extended, finalized]).toEqual([{ status: 'LOST' }, { status: 'LOST' }]);
    expect((await rms.inspect(intent)).exists).toBe(false);
  });

  it('reports RmsUnavailableError while Redis is down and serves again once it is back', async ({ task }) => {
    const { rms, intent } = arrange(task.fullName);
    await rms.inspect(intent);
    let duringOutage: unknown;

    await backend.outage!(async () => {
      duringOutage = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LEASE_MS }).catch((err: unknown) => err);
    });
    await waitForRedis(rms, intent);
    const afterOutage = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LEASE_MS });

    expect(duringOutage).toBeInstanceOf(RmsUnavailableError);
    expect((duringOutage as RmsUnavailableError).cause).toBeDefined();
    expect(afterOutage.status).toBe('SUCCESS');
  });
});
