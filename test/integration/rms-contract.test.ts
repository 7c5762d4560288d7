/**
 * The RMS contract, written once and run against the run's single Redis and a Redis Cluster of the
 * suite's own. Every test works under its own key prefix.
 */
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rms, RmsValidationError, intentKey, intentKeys, type ReserveResult } from '../../src/rms';
import { startBackend, testPrefix, waitForLeaseToPass, waitUntil, type RedisBackend } from '../helpers/redis-backends';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

const LONG_LEASE_MS = 30_000;
const SHORT_LEASE_MS = 60;

describe.each(['single', 'cluster'] as const)('the RMS on %s Redis', (kind) => {
  let backend: RedisBackend;
  let redis: Redis | Cluster;

  beforeAll(async () => {
    backend = await startBackend(kind);
    redis = backend.connect();
  });

  afterAll(async () => {
    await backend?.close();
  });

  /** An RMS under the test's own prefix, and a fresh intent. */
  function arrange(testName: string, label = 'intent') {
    const prefix = testPrefix(testName);
    return { prefix, rms: new Rms(redis, { keyPrefix: prefix }), intent: intentKey('order', { test: testName, label }, TEST_INTENT_SECRET) };
  }

  async function serverTimeMs(): Promise<number> {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  describe('reserve', () => {
    it('reserves a free intent with a token and an expiry taken from the server clock', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);

      const before = await serverTimeMs();
      const result = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: 10_000 });
      const after = await serverTimeMs();

      expect(result).toMatchObject({ status: 'SUCCESS', sessionId: 'session-a' });
      const success = result as Extract<ReserveResult, { status: 'SUCCESS' }>;
      expect(success.fencingToken).toMatch(/^[1-9][0-9]*$/);
      expect(success.expiresAt).toBeGreaterThanOrEqual(before + 10_000);
      expect(success.expiresAt).toBeLessThanOrEqual(after + 10_000);
      expect(await rms.inspect(intent)).toMatchObject({
        holder: { sessionId: 'session-a', fencingToken: success.fencingToken },
        exists: false,
      });
    });

    it('answers CONFLICT with the holder’s remaining lease to a second session', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      await reserveOk(rms, intent, 'session-a', 5000);

      const result = await rms.reserve({ intent, sessionId: 'session-b', leaseMs: 5000 });

      expect(result.status).toBe('CONFLICT');
      const { retryAfterMs } = result as Extract<ReserveResult, { status: 'CONFLICT' }>;
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(5000);
    });

    it('gives the holding session the same token again when it retries', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const first = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);

      const retry = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);

      expect(retry.fencingToken).toBe(first.fencingToken);
      expect([first.alreadyHeld, retry.alreadyHeld]).toEqual([false, true]);
      expect(retry.expiresAt).toBeLessThanOrEqual(first.expiresAt + 1); // not lengthened (1 ms of rounding)
    });

    it('answers DUPLICATE to everyone once the entity exists', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });

      const others = await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS });
      const same = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS });

      // The marker names its owner, so the owner's retry can tell its own entity from another's.
      expect(others).toEqual({ status: 'DUPLICATE', owner: { sessionTag: 'session-a', fencingToken: held.fencingToken } });
      expect(same).toEqual(others);
    });
  });

  describe('under real concurrency', () => {
    it('gives exactly one SUCCESS among 500 concurrent reserves of one intent from 8 connections', async ({ task }) => {
      const { prefix, intent } = arrange(task.fullName);
      const clients = Array.from({ length: 8 }, () => backend.connect());
      await Promise.all(clients.map((c) => c.ping()));
      const rmsPerClient = clients.map((c) => new Rms(c, { keyPrefix: prefix }));

      const results = await Promise.all(
        Array.from({ length: 500 }, (_, i) => rmsPerClient[i % 8]!.reserve({ intent, sessionId: `session-${i}`, leaseMs: LONG_LEASE_MS })),
      );

      const winners = results.filter((r) => r.status === 'SUCCESS');
      expect(winners).toHaveLength(1);
      expect(results.filter((r) => r.status === 'CONFLICT')).toHaveLength(499);
      expect((await rmsPerClient[0]!.inspect(intent)).holder?.sessionId).toBe(winners[0]!.sessionId);
    });

    it('gives exactly one SUCCESS per intent to 100 intents reserved 10 times each at once', async ({ task }) => {
      const { prefix } = arrange(task.fullName);
      const clients = Array.from({ length: 8 }, () => backend.connect());
      await Promise.all(clients.map((c) => c.ping()));
      const rmsPerClient = clients.map((c) => new Rms(c, { keyPrefix: prefix }));
      const intents = Array.from({ length: 100 }, (_, n) => intentKey('order', { test: task.fullName, n }, TEST_INTENT_SECRET));

      const calls = intents.flatMap((intent, n) =>
        Array.from({ length: 10 }, (_, copy) => ({ intent, sessionId: `intent-${n}-copy-${copy}`, client: rmsPerClient[(n + copy) % 8]! })),
      );
      const results = await Promise.all(
        calls.map(async ({ intent, sessionId, client }) => ({ intent, result: await client.reserve({ intent, sessionId, leaseMs: LONG_LEASE_MS }) })),
      );

      const successes = results.filter((r) => r.result.status === 'SUCCESS');
      expect(successes).toHaveLength(100);
      expect(new Set(successes.map((s) => s.intent)).size).toBe(100);
      expect(results.filter((r) => r.result.status === 'CONFLICT')).toHaveLength(900);
    });
  });

  describe('fencing tokens', () => {
    it('strictly increase over 1,000 reserve/release cycles of one intent', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const tokens: bigint[] = [];

      for (let i = 0; i < 1000; i++) {
        const held = await reserveOk(rms, intent, `session-${i}`, LONG_LEASE_MS);
        tokens.push(BigInt(held.fencingToken));
        expect(await rms.release({ intent, sessionId: `session-${i}`, fencingToken: held.fencingToken })).toEqual({ status: 'RELEASED' });
      }

      const notIncreasing = tokens.filter((token, i) => i > 0 && token <= tokens[i - 1]!);
      expect(notIncreasing).toEqual([]);
    });

    it('stay above a token marked from PostgreSQL', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.release({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });
      // A token far ahead of the clock, as if PostgreSQL recorded it on a server whose clock ran fast.
      const marked = (BigInt(held.fencingToken) + 10n ** 15n).toString();
      await rms.markExists({ intent, fencingToken: marked });
      await rms.free({ intent, fencingToken: marked });

      const next = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);

      expect(BigInt(next.fencingToken)).toBeGreaterThan(BigInt(marked));
    });

    it('raise gives the holder a token above the floor and its own, keeping the lease and its end', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      const before = await rms.inspect(intent);
      // A floor far ahead of the clock, as a row written under a clock that ran fast would hold.
      const floor = (BigInt(held.fencingToken) + 10n ** 12n).toString();

      const raised = await rms.raise({ intent, sessionId: 'session-a', fencingToken: held.fencingToken, floor });
      const after = await rms.inspect(intent);

      expect(raised).toEqual({ status: 'RAISED', fencingToken: (BigInt(floor) + 1n).toString() });
      expect(after.holder).toMatchObject({ sessionId: 'session-a', fencingToken: (BigInt(floor) + 1n).toString() });
      expect(after.holder!.remainingMs).toBeLessThanOrEqual(before.holder!.remainingMs);
      expect(after.holder!.remainingMs).toBeGreaterThan(LONG_LEASE_MS - 5_000);
      // The old token is no one's now: the holder goes on with the new one only.
      expect(await rms.extend({ intent, sessionId: 'session-a', fencingToken: held.fencingToken, leaseMs: LONG_LEASE_MS })).toEqual({ status: 'LOST' });
      expect(await rms.release({ intent, sessionId: 'session-a', fencingToken: (BigInt(floor) + 1n).toString() })).toEqual({ status: 'RELEASED' });
    });

    it('raise with a floor below the holder’s token still gives a higher token, and by anyone else is LOST', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);

      const intruder = await rms.raise({ intent, sessionId: 'session-b', fencingToken: held.fencingToken, floor: '1' });
      const raised = await rms.raise({ intent, sessionId: 'session-a', fencingToken: held.fencingToken, floor: '1' });

      expect(intruder).toEqual({ status: 'LOST' });
      expect(raised.status).toBe('RAISED');
      expect(BigInt((raised as { fencingToken: string }).fencingToken)).toBeGreaterThan(BigInt(held.fencingToken));
    });

    it('are refused with RMS_CORRUPT over a tombstone that names no token, and nothing is written', async ({ task }) => {
      const { rms, intent, prefix } = arrange(task.fullName);
      await redis.set(intentKeys(prefix, intent).entityExists, '{freed}:x');

      await expect(rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS })).rejects.toMatchObject({
        name: 'RmsReplyError',
        message: expect.stringContaining('RMS_CORRUPT entity_exists holds a tombstone that names no token'),
      });
      expect(await redis.exists(intentKeys(prefix, intent).processing)).toBe(0);
    });
  });

  describe('retention (invariant 9: no key without an end)', () => {
    it('gives every key it writes an end, and leaves no key once leases, markers and tombstones have lapsed', async ({ task }) => {
      const { rms, prefix } = arrange(task.fullName);
      // Long enough that the keys are still there to be listed on a loaded machine; a key that lapsed
      // before its PTTL was read had an end, so only -1 (no expiry) counts as endless.
      const ttl = 1500;
      const intents = ['finalised', 'finalised-then-freed', 'released', 'freed-unfinalised', 'repaired', 'repaired-then-freed', 'lapsed'].map(
        (label) => ({ label, intent: arrange(task.fullName, label).intent }),
      );
      for (const { label, intent } of intents) {
        const held = label.startsWith('repaired') ? undefined : await reserveOk(rms, intent, `s-${label.length}`, label === 'lapsed' ? ttl : LONG_LEASE_MS);
        const owner = { intent, sessionId: `s-${label.length}`, fencingToken: held?.fencingToken ?? '42' };
        if (label.startsWith('finalised')) expect(await rms.finalize({ ...owner, existsTtlMs: ttl })).toEqual({ status: 'FINALIZED' });
        if (label.startsWith('repaired')) expect(await rms.markExists({ ...owner, existsTtlMs: ttl })).toEqual({ status: 'MARKED' });
        // A saga that ends undone or released records its session as ended, kept `ttl` too.
        const ended = { sessionId: owner.sessionId, retentionMs: ttl };
        if (label.endsWith('freed') || label === 'freed-unfinalised') await rms.free({ intent, fencingToken: owner.fencingToken, existsTtlMs: ttl, ended });
        if (label === 'released' || label === 'freed-unfinalised') expect(await rms.release({ ...owner, ended })).toEqual({ status: 'RELEASED' });
      }

      const written = await backend.keys(`${prefix}*`);
      const endless = [];
      for (const key of written) if ((await redis.pttl(key)) === -1) endless.push(key);
      expect(written.length).toBeGreaterThanOrEqual(5);
      expect(endless).toEqual([]);
      await waitUntil('every key lapses', async () => (await backend.keys(`${prefix}*`)).length === 0, ttl + 5000);
    });
  });

  describe('ended sessions (a retry of an ended saga\'s key is answered from that saga)', () => {
    it('release with ended records the session: asked with answerEnded it alone is told ENDED, whoever holds the intent', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const a = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      expect(await rms.release({ intent, sessionId: 'session-a', fencingToken: a.fencingToken, ended: { retentionMs: LONG_LEASE_MS } })).toEqual({ status: 'RELEASED' });
      const b = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);

      expect(await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS, answerEnded: true })).toEqual({ status: 'ENDED' });
      // Not asked: the lease's holder answers, as ever; another session is not told ENDED.
      expect(await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS })).toMatchObject({ status: 'CONFLICT' });
      expect(await rms.reserve({ intent, sessionId: 'session-c', leaseMs: LONG_LEASE_MS, answerEnded: true })).toMatchObject({ status: 'CONFLICT' });
      expect(b.endedCount).toBe(1);
      expect(await rms.inspect(intent)).toMatchObject({ holder: { sessionId: 'session-b', fencingToken: b.fencingToken } });
    });

    it('free with ended records the session before the marker goes, and a release retried after RELEASED records it too', async ({ task }) => {
      const { rms, intent, prefix } = arrange(task.fullName);
      const a = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: a.fencingToken });
      expect(await rms.free({ intent, fencingToken: a.fencingToken, ended: { sessionId: 'session-a', retentionMs: LONG_LEASE_MS } })).toEqual({ status: 'FREED' });
      const b = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);
      await rms.release({ intent, sessionId: 'session-b', fencingToken: b.fencingToken });
      expect(await rms.release({ intent, sessionId: 'session-b', fencingToken: b.fencingToken, ended: { retentionMs: LONG_LEASE_MS } })).toEqual({ status: 'NOT_OWNER' });

      expect(await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS, answerEnded: true })).toEqual({ status: 'ENDED' });
      expect(await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS, answerEnded: true })).toEqual({ status: 'ENDED' });
      const ttl = await redis.pttl(intentKeys(prefix, intent).endedSessions);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(LONG_LEASE_MS);
    });

    it('answers DUPLICATE to a session that still holds the lease once another\'s entity is marked, and deletes that lease', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const a = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      // Another saga's entity, marked from its row (a late finalise's repair) while A still holds its lease.
      await rms.markExists({ intent, fencingToken: String(BigInt(a.fencingToken) - 1n), sessionTag: 'session-b' });

      const confirm = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS });

      expect(confirm).toMatchObject({ status: 'DUPLICATE', owner: { sessionTag: 'session-b' } });
      expect((await rms.inspect(intent)).holder).toBeUndefined();
    });

    it('rememberEnded restores what Redis lost, and SUCCESS says how many sessions ended', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      expect((await reserveOk(rms, intent, 'session-c', SHORT_LEASE_MS)).endedCount).toBe(0);

      expect(await rms.rememberEnded({ intent, sessionTags: ['session-a', 'session-b'], retentionMs: LONG_LEASE_MS })).toEqual({ endedCount: 2 });

      expect(await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS, answerEnded: true })).toEqual({ status: 'ENDED' });
      await waitForLeaseToPass(rms, intent);
      expect((await reserveOk(rms, intent, 'session-d', LONG_LEASE_MS)).endedCount).toBe(2);
      await expect(rms.rememberEnded({ intent, sessionTags: [], retentionMs: LONG_LEASE_MS })).rejects.toBeInstanceOf(RmsValidationError);
    });
  });

  describe('leases', () => {
    it('extend moves the expiry of a held lease', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', 1000);

      const extended = await rms.extend({ intent, sessionId: 'session-a', fencingToken: held.fencingToken, leaseMs: LONG_LEASE_MS });

      expect(extended.status).toBe('EXTENDED');
      expect((extended as { expiresAt: number }).expiresAt).toBeGreaterThan(held.expiresAt);
      expect((await rms.inspect(intent)).holder?.remainingMs).toBeGreaterThan(1000);
    });

    it('extend by another session or with another token is LOST and changes nothing', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', 5000);
      const otherToken = (BigInt(held.fencingToken) + 1n).toString();

      const bySession = await rms.extend({ intent, sessionId: 'session-b', fencingToken: held.fencingToken, leaseMs: LONG_LEASE_MS });
      const byToken = await rms.extend({ intent, sessionId: 'session-a', fencingToken: otherToken, leaseMs: LONG_LEASE_MS });

      expect(bySession).toEqual({ status: 'LOST' });
      expect(byToken).toEqual({ status: 'LOST' });
      expect((await rms.inspect(intent)).holder?.remainingMs).toBeLessThanOrEqual(5000);
    });

    it('a holder whose lease passed can neither extend, finalize nor release', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const stale = await reserveOk(rms, intent, 'session-a', SHORT_LEASE_MS);
      await waitForLeaseToPass(rms, intent);
      const token = stale.fencingToken;

      const extended = await rms.extend({ intent, sessionId: 'session-a', fencingToken: token, leaseMs: LONG_LEASE_MS });
      const finalized = await rms.finalize({ intent, sessionId: 'session-a', fencingToken: token });
      const released = await rms.release({ intent, sessionId: 'session-a', fencingToken: token });

      expect([extended, finalized, released]).toEqual([{ status: 'LOST' }, { status: 'LOST' }, { status: 'NOT_OWNER' }]);
      const after = await rms.inspect(intent);
      expect(after.holder).toBeUndefined();
      expect(after.exists).toBe(false);
    });

    it('after a lease passes a new session takes over with a higher token, untouchable by the stale holder', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const stale = await reserveOk(rms, intent, 'session-a', SHORT_LEASE_MS);
      await waitForLeaseToPass(rms, intent);

      const fresh = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);
      const staleCalls = [
        await rms.extend({ intent, sessionId: 'session-a', fencingToken: stale.fencingToken, leaseMs: LONG_LEASE_MS }),
        await rms.finalize({ intent, sessionId: 'session-a', fencingToken: stale.fencingToken }),
        await rms.release({ intent, sessionId: 'session-a', fencingToken: stale.fencingToken }),
      ];

      expect(BigInt(fresh.fencingToken)).toBeGreaterThan(BigInt(stale.fencingToken));
      expect(staleCalls).toEqual([{ status: 'LOST' }, { status: 'LOST' }, { status: 'NOT_OWNER' }]);
      const after = await rms.inspect(intent);
      expect(after.holder).toMatchObject({ sessionId: 'session-b', fencingToken: fresh.fencingToken });
      expect(after.exists).toBe(false);
    });

    it('release by another session or with another token leaves the lease intact', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      const otherToken = (BigInt(held.fencingToken) - 1n).toString();

      const bySession = await rms.release({ intent, sessionId: 'session-b', fencingToken: held.fencingToken });
      const byToken = await rms.release({ intent, sessionId: 'session-a', fencingToken: otherToken });

      expect([bySession, byToken]).toEqual([{ status: 'NOT_OWNER' }, { status: 'NOT_OWNER' }]);
      expect((await rms.inspect(intent)).holder).toMatchObject({ sessionId: 'session-a', fencingToken: held.fencingToken });
    });

    it('release by the holder frees the intent for the next session', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);

      const released = await rms.release({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });
      const next = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);

      expect(released).toEqual({ status: 'RELEASED' });
      expect(BigInt(next.fencingToken)).toBeGreaterThan(BigInt(held.fencingToken));
    });
  });

  describe('finalize', () => {
    it('answers FINALIZED to the holder and to its retry, records the token and drops the lease', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      const input = { intent, sessionId: 'session-a', fencingToken: held.fencingToken };

      const first = await rms.finalize(input);
      const retry = await rms.finalize(input);

      expect([first, retry]).toEqual([{ status: 'FINALIZED' }, { status: 'FINALIZED' }]);
      const after = await rms.inspect(intent);
      expect(after).toMatchObject({ exists: true, existsToken: held.fencingToken });
      expect(after.holder).toBeUndefined();
    });

    it('by a session that never held the lease is LOST and writes nothing', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);

      const result = await rms.finalize({ intent, sessionId: 'session-b', fencingToken: held.fencingToken });

      expect(result).toEqual({ status: 'LOST' });
      expect(await rms.inspect(intent)).toMatchObject({ exists: false, holder: { sessionId: 'session-a' } });
    });

    it('by a holder whose saga was undone (freed) while it still held the lease is FREED and writes nothing', async ({ task }) => {
      // A finalize attempt that outlived its timeout: its saga compensated (the row undone, the
      // marker freed) before releasing the lease, and the late attempt runs in that gap.
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      const input = { intent, sessionId: 'session-a', fencingToken: held.fencingToken };
      await rms.free({ intent, fencingToken: held.fencingToken });

      const late = await rms.finalize(input);

      expect(late).toEqual({ status: 'FREED' });
      expect(await rms.inspect(intent)).toMatchObject({ exists: false, freedToken: held.fencingToken, holder: { sessionId: 'session-a' } });
      // The saga's own release then ends it: the intent is free for the next request.
      await rms.release(input);
      expect((await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS })).status).toBe('SUCCESS');
    });

    it('by a late holder whose free met the tombstone of an earlier saga is FREED too (the newer tombstone replaces the older)', async ({ task }) => {
      // Found by rms-model.test.ts: saga A created and freed the intent (tombstone tA); saga B reserved
      // (tB), its finalize was given up and its undo freed tB while it still held the lease.
      const { rms, intent } = arrange(task.fullName);
      const a = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: a.fencingToken });
      await rms.free({ intent, fencingToken: a.fencingToken });
      const b = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);
      await rms.free({ intent, fencingToken: b.fencingToken });
      expect((await rms.inspect(intent)).freedToken).toBe(b.fencingToken);

      const late = await rms.finalize({ intent, sessionId: 'session-b', fencingToken: b.fencingToken });

      expect(late).toEqual({ status: 'FREED' });
      expect((await rms.inspect(intent)).exists).toBe(false);
      // An older saga's free never replaces a newer tombstone.
      await rms.free({ intent, fencingToken: a.fencingToken });
      expect((await rms.inspect(intent)).freedToken).toBe(b.fencingToken);
    });

    it('with existsTtlMs lets the marker lapse, after which the intent can be reserved again', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken, existsTtlMs: 80 });
      expect((await rms.inspect(intent)).exists).toBe(true);
      await waitUntil('the marker lapses', async () => !(await rms.inspect(intent)).exists);

      const next = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);

      expect(BigInt(next.fencingToken)).toBeGreaterThan(BigInt(held.fencingToken));
    });
  });

  describe('free and markExists', () => {
    it('never lets a late read-repair bring back a marker its owner freed (the intent stays free)', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });
      // A repair read the REGISTERED row (token t1) before the saga compensated and freed the marker;
      // its write comes after, as would a late finalize attempt whose lease was gone.
      await rms.free({ intent, fencingToken: held.fencingToken });

      await rms.markExists({ intent, fencingToken: held.fencingToken, sessionTag: 'session-a' });

      expect((await rms.inspect(intent)).exists).toBe(false);
      const next = await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS });
      expect(next.status).toBe('SUCCESS');
      // The next owner's own marker and repair work as before.
      await rms.finalize({ intent, sessionId: 'session-b', fencingToken: (next as { fencingToken: string }).fencingToken });
      expect(await rms.inspect(intent)).toMatchObject({ exists: true, existsSessionTag: 'session-b' });
    });

    it('refuses a late read-repair of a token freed while Redis had no marker (after data loss)', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);

      const freed = await rms.free({ intent, fencingToken: '42' });
      const repaired = await rms.markExists({ intent, fencingToken: '42', sessionTag: 'session-a' });

      expect([freed, repaired]).toEqual([{ status: 'NOT_OWNER' }, { status: 'FREED' }]);
      expect(await rms.inspect(intent)).toMatchObject({ exists: false, freedToken: '42' });
      expect((await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS })).status).toBe('SUCCESS');
    });

    it('free with another token leaves the marker in place', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });

      const result = await rms.free({ intent, fencingToken: (BigInt(held.fencingToken) + 1n).toString() });

      expect(result).toEqual({ status: 'NOT_OWNER' });
      expect(await rms.inspect(intent)).toMatchObject({ exists: true, existsToken: held.fencingToken });
      expect((await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS })).status).toBe('DUPLICATE');
    });

    it('free with the own token removes the marker and the intent is reserved again with a higher token', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });

      const freed = await rms.free({ intent, fencingToken: held.fencingToken });
      const next = await reserveOk(rms, intent, 'session-b', LONG_LEASE_MS);

      expect(freed).toEqual({ status: 'FREED' });
      expect(BigInt(next.fencingToken)).toBeGreaterThan(BigInt(held.fencingToken));
    });

    it('markExists marks an intent Redis did not know, so reserving it is DUPLICATE', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);

      const marked = await rms.markExists({ intent, fencingToken: '42' });

      expect(marked).toEqual({ status: 'MARKED' });
      expect(await rms.inspect(intent)).toEqual({ intent, exists: true, existsToken: '42' });
      expect((await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS })).status).toBe('DUPLICATE');
    });

    it('markExists records the owner PostgreSQL names, and free by its token removes that marker', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);

      await rms.markExists({ intent, fencingToken: '42', sessionTag: 'session-a' });

      expect(await rms.reserve({ intent, sessionId: 'session-b', leaseMs: LONG_LEASE_MS })).toEqual({
        status: 'DUPLICATE',
        owner: { sessionTag: 'session-a', fencingToken: '42' },
      });
      expect(await rms.free({ intent, fencingToken: '4' })).toEqual({ status: 'NOT_OWNER' });
      expect(await rms.free({ intent, fencingToken: '42' })).toEqual({ status: 'FREED' });
    });

    it('keeps working on a marker written before owners were kept (the bare token)', async ({ task }) => {
      const { rms, intent, prefix } = arrange(task.fullName);
      await redis.set(intentKeys(prefix, intent).entityExists, '42');

      const duplicate = await rms.reserve({ intent, sessionId: 'session-a', leaseMs: LONG_LEASE_MS });
      await rms.markExists({ intent, fencingToken: '41', sessionTag: 'session-b' });
      const kept = await rms.inspect(intent);
      const freed = await rms.free({ intent, fencingToken: '42' });

      expect(duplicate).toEqual({ status: 'DUPLICATE', owner: { fencingToken: '42' } });
      expect(kept).toMatchObject({ exists: true, existsToken: '42' });
      expect(kept.existsSessionTag).toBeUndefined();
      expect(freed).toEqual({ status: 'FREED' });
    });

    it('markExists with an older token keeps the newer marker, so its owner can still free it', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      const held = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);
      await rms.finalize({ intent, sessionId: 'session-a', fencingToken: held.fencingToken });

      await rms.markExists({ intent, fencingToken: (BigInt(held.fencingToken) - 1n).toString() });

      expect(await rms.inspect(intent)).toMatchObject({ exists: true, existsToken: held.fencingToken });
      expect(await rms.free({ intent, fencingToken: held.fencingToken })).toEqual({ status: 'FREED' });
    });

    it('markExists with an expiry lets the marker lapse', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);
      await rms.markExists({ intent, fencingToken: '7', existsTtlMs: 80 });

      await waitUntil('the marker lapses', async () => !(await rms.inspect(intent)).exists);
      const next = await reserveOk(rms, intent, 'session-a', LONG_LEASE_MS);

      expect(BigInt(next.fencingToken)).toBeGreaterThan(7n);
    });
  });

  describe('inspect', () => {
    it('reports nothing for an intent never touched', async ({ task }) => {
      const { rms, intent } = arrange(task.fullName);

      const inspection = await rms.inspect(intent);

      expect(inspection).toEqual({ intent, exists: false });
    });
  });

  describe('hostile input', () => {
    it('hashes hostile intent data into safe keys or refuses it, and writes no other key', async ({ task }) => {
      const { prefix, rms } = arrange(task.fullName);
      const hashed: unknown[] = [
        { 'key with spaces': 'value with spaces' },
        { 'new\nline': 'carriage\r\nreturn', tab: '\t' },
        { '{': '}', 'x}{y': '{{}}', '}{': ['{', '}'] },
        { emoji: '🧨💥', rtl: '\u202Eevil', nul: '\u0000', lone: '\uD800', cjk: '注文' },
        'order:x}{y',
        ['*', '?', '[a-z]', '\\', '%', '\u0085'],
        'y'.repeat(60_000),
      ];
      const refused: unknown[] = [{ big: 'x'.repeat(1024 * 1024) }, 'z'.repeat(64 * 1024 + 1), { nested: [undefined] }];

      const reserved = await Promise.all(
        hashed.map((data, i) => rms.reserve({ intent: intentKey('order', data, TEST_INTENT_SECRET), sessionId: `session-${i}`, leaseMs: LONG_LEASE_MS })),
      );
      const refusals = refused.map((data) => catchError(() => intentKey('order', data, TEST_INTENT_SECRET)));

      expect(reserved.map((r) => r.status)).toEqual(hashed.map(() => 'SUCCESS'));
      for (const refusal of refusals) expect(refusal).toBeInstanceOf(RmsValidationError);
      const keys = await backend.keys(`${prefix}*`);
      expect(keys).toHaveLength(hashed.length); // the lease, and nothing else, per intent
      const safe = new RegExp(`^${escapeRegExp(prefix)}[pe]\\{[A-Za-z0-9_-]{16}\\}$`);
      expect(keys.filter((key) => !safe.test(key))).toEqual([]);
    });

    it('refuses hostile intent strings before writing any key', async ({ task }) => {
      const { prefix, rms, intent: valid } = arrange(task.fullName);
      const digest = valid.slice('order:'.length);
      const hostile: unknown[] = [
        'order:x}{y',
        `${valid}\n`,
        `order:\n${digest.slice(1)}`,
        `order:{${digest.slice(2)}}`,
        `order:${digest.slice(1)}`,
        `order:${digest}x`,
        `order:${digest.slice(0, 42)}=`,
        `order:${digest.slice(0, 41)}+/`,
        `Order:${digest}`,
        ` order:${digest}`,
        `${'a'.repeat(65)}:${digest}`,
        `${'a'.repeat(10_000)}:${digest}`,
        `order ${digest}`,
        'order',
        '',
        undefined,
        42,
        { toString: () => valid },
      ];

      const errors = await Promise.all(
        hostile.flatMap((intent) => {
          const bad = intent as string;
          return [
            rejection(rms.reserve({ intent: bad, sessionId: 'session-a', leaseMs: LONG_LEASE_MS })),
            rejection(rms.extend({ intent: bad, sessionId: 'session-a', fencingToken: '1', leaseMs: LONG_LEASE_MS })),
            rejection(rms.finalize({ intent: bad, sessionId: 'session-a', fencingToken: '1' })),
            rejection(rms.release({ intent: bad, sessionId: 'session-a', fencingToken: '1' })),
            rejection(rms.free({ intent: bad, fencingToken: '1' })),
            rejection(rms.markExists({ intent: bad, fencingToken: '1' })),
            rejection(rms.raise({ intent: bad, sessionId: 'session-a', fencingToken: '1', floor: '1' })),
            rejection(rms.inspect(bad)),
          ];
        }),
      );

      expect(errors).toHaveLength(hostile.length * 8);
      for (const error of errors) {
        expect(error).toBeInstanceOf(RmsValidationError);
        expect((error as RmsValidationError).field).toBe('intent');
      }
      expect(await backend.keys(`${prefix}*`)).toEqual([]);
    });
  });
});

async function reserveOk(rms: Rms, intent: string, sessionId: string, leaseMs: number) {
  const result = await rms.reserve({ intent, sessionId, leaseMs });
  if (result.status !== 'SUCCESS') throw new Error(`expected SUCCESS for ${sessionId}, got ${JSON.stringify(result)}`);
  return result;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  return new Error('resolved, but a rejection was expected');
}

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return new Error('returned, but a throw was expected');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
