/**
 * The RMS's limit counters (admit.lua, count-out.lua), written once and run against the run's single
 * Redis and a Redis Cluster of the suite's own: a caller's counters share one slot, an admission is
 * all or nothing and never exceeds a limit under concurrency, and every entry has an end.
 */
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rms, RmsValidationError, limitKeys, limitTag, scopeValueDigest, type AdmitResult } from '../../src/rms';
import { startBackend, testPrefix, waitUntil, type RedisBackend } from '../helpers/redis-backends';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

const HOLD_MS = 60_000;

describe.each(['single', 'cluster'] as const)('limit counters on %s Redis', (kind) => {
  let backend: RedisBackend;
  let redis: Redis | Cluster;

  beforeAll(async () => {
    backend = await startBackend(kind);
    redis = backend.connect();
  });

  afterAll(async () => {
    await backend?.close();
  });

  /** An RMS under the test's own prefix and a caller's tag. */
  function arrange(testName: string) {
    const prefix = testPrefix(testName);
    return { prefix, rms: new Rms(redis, { keyPrefix: prefix }), tag: limitTag('order', `caller-${testName.length}`) };
  }

  const admitted = (results: AdmitResult[]) => results.filter((r) => r.status === 'ADMITTED').length;

  it('admits exactly the limit of 50 concurrent sessions, refusing the others with a wait and counting nothing for them', async ({ task }) => {
    const { prefix, rms, tag } = arrange(task.fullName);

    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => rms.admit({ tag, counters: [{ id: '0', inFlight: 5 }], sessionId: `session-${i}`, holdMs: HOLD_MS })));

    expect(admitted(results)).toBe(5);
    for (const r of results.filter((x) => x.status === 'LIMITED')) expect(r).toEqual({ status: 'LIMITED', retryAfterMs: 1000, limit: 'IN_FLIGHT' });
    expect(await redis.zcard(limitKeys(prefix, tag, '0').inFlight)).toBe(5);
  });

  it('admits a session counted already again without counting it twice, and counts it out once', async ({ task }) => {
    const { prefix, rms, tag } = arrange(task.fullName);
    const counters = [{ id: '0', inFlight: 1 }];

    expect(await rms.admit({ tag, counters, sessionId: 'session-a', holdMs: HOLD_MS })).toEqual({ status: 'ADMITTED', alreadyCounted: false });
    expect(await rms.admit({ tag, counters, sessionId: 'session-a', holdMs: HOLD_MS })).toEqual({ status: 'ADMITTED', alreadyCounted: true });
    expect(await rms.admit({ tag, counters, sessionId: 'session-b', holdMs: HOLD_MS })).toMatchObject({ status: 'LIMITED', limit: 'IN_FLIGHT' });

    expect(await rms.countOut({ tag, counters: ['0'], sessionId: 'session-a' })).toEqual({ status: 'COUNTED_OUT' });
    expect(await rms.countOut({ tag, counters: ['0'], sessionId: 'session-a' })).toEqual({ status: 'NOT_COUNTED' });
    // An emptied set is gone.
    expect(await redis.exists(limitKeys(prefix, tag, '0').inFlight)).toBe(0);
    expect(await rms.admit({ tag, counters, sessionId: 'session-b', holdMs: HOLD_MS })).toEqual({ status: 'ADMITTED', alreadyCounted: false });
  });

  it('admits against every counter or none: a full caller counter counts nothing in the scope value\'s', async ({ task }) => {
    const { prefix, rms, tag } = arrange(task.fullName);
    const customer = (name: string) => `1:${scopeValueDigest(name, TEST_INTENT_SECRET)}`;
    const counters = (name: string) => [{ id: '0', inFlight: 2 }, { id: customer(name), inFlight: 1 }];

    expect((await rms.admit({ tag, counters: counters('alice'), sessionId: 'a1', holdMs: HOLD_MS })).status).toBe('ADMITTED');
    expect(await rms.admit({ tag, counters: counters('alice'), sessionId: 'a2', holdMs: HOLD_MS })).toMatchObject({ status: 'LIMITED', limit: 'IN_FLIGHT' });
    expect((await rms.admit({ tag, counters: counters('bob'), sessionId: 'b1', holdMs: HOLD_MS })).status).toBe('ADMITTED');
    expect(await rms.admit({ tag, counters: counters('carol'), sessionId: 'c1', holdMs: HOLD_MS })).toMatchObject({ status: 'LIMITED', limit: 'IN_FLIGHT' });

    expect(await redis.zcard(limitKeys(prefix, tag, '0').inFlight)).toBe(2);
    expect(await redis.zcard(limitKeys(prefix, tag, customer('carol')).inFlight)).toBe(0);
    expect(await rms.countOut({ tag, counters: ['0', customer('alice')], sessionId: 'a1' })).toEqual({ status: 'COUNTED_OUT' });
    expect(await redis.zcard(limitKeys(prefix, tag, customer('alice')).inFlight)).toBe(0);
  });

  it('admits R starts in a second and tells the next when the oldest is a second old; counting out gives no start back', async ({ task }) => {
    const { prefix, rms, tag } = arrange(task.fullName);
    const counters = [{ id: '0', perSecond: 3 }];

    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => rms.admit({ tag, counters, sessionId: `s${i}`, holdMs: HOLD_MS })));
    expect(admitted(results)).toBe(3);
    for (const r of results.filter((x) => x.status === 'LIMITED')) {
      expect(r).toMatchObject({ status: 'LIMITED', limit: 'RATE' });
      expect(r.status === 'LIMITED' && r.retryAfterMs).toBeGreaterThan(0);
      expect(r.status === 'LIMITED' && r.retryAfterMs).toBeLessThanOrEqual(1000);
    }
    const firstIn = results.map((r, i) => ({ r, i })).filter(({ r }) => r.status === 'ADMITTED').map(({ i }) => `s${i}`);
    await rms.countOut({ tag, counters: ['0'], sessionId: firstIn[0]! });
    expect((await rms.admit({ tag, counters, sessionId: 'later', holdMs: HOLD_MS })).status).toBe('LIMITED');
    // The starts' set ends with its window (invariant 9).
    const ttl = await redis.pttl(limitKeys(prefix, tag, '0').starts);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1000);
  });

  it('stops counting an entry never counted out once its hold has passed (a terminated saga), and every set has an end', async ({ task }) => {
    const { prefix, rms, tag } = arrange(task.fullName);
    const counters = [{ id: '0', inFlight: 1 }];

    expect((await rms.admit({ tag, counters, sessionId: 'terminated', holdMs: 150 })).status).toBe('ADMITTED');
    const ttl = await redis.pttl(limitKeys(prefix, tag, '0').inFlight);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(150);
    expect((await rms.admit({ tag, counters, sessionId: 'next', holdMs: HOLD_MS })).status).toBe('LIMITED');

    await waitUntil('the hold to pass', async () => (await rms.admit({ tag, counters, sessionId: 'next', holdMs: HOLD_MS })).status === 'ADMITTED');
    expect(await redis.zrange(limitKeys(prefix, tag, '0').inFlight, 0, -1)).toEqual(['next']);
    expect(await redis.pttl(limitKeys(prefix, tag, '0').inFlight)).toBeGreaterThan(150);
  });

  it('refuses malformed input before anything is sent', async ({ task }) => {
    const { rms, tag } = arrange(task.fullName);
    const ok = { tag, counters: [{ id: '0', inFlight: 1 }], sessionId: 's', holdMs: HOLD_MS };
    for (const bad of [
      { ...ok, tag: 'not-a-tag' },
      { ...ok, counters: [] },
      { ...ok, counters: [{ id: '0}x', inFlight: 1 }] },
      { ...ok, counters: [{ id: '0', inFlight: 1 }, { id: '0', perSecond: 1 }] },
      { ...ok, counters: [{ id: '0', inFlight: 0 }] },
      { ...ok, sessionId: 'a:b' },
      { ...ok, holdMs: 0 },
    ]) {
      await expect(rms.admit(bad)).rejects.toBeInstanceOf(RmsValidationError);
    }
    await expect(rms.countOut({ tag, counters: ['{x}'], sessionId: 's' })).rejects.toBeInstanceOf(RmsValidationError);
  });
});
