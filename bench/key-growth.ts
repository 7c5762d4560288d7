/**
 * Benchmark 6: what a run of finished sagas leaves in Redis. Many intents are reserved and finalised
 * (a tenth of them then undone: their markers become tombstones), with the marker retention of
 * ENTITY_EXISTS_TTL_MS set short; the keys under the run's prefix are counted right after, and again
 * once the retention has passed. Target: 0 keys per finished intent (before fences ended: 2).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { Rms, createRedis, intentKey } from '../src/rms';
import { sagaSessionId } from '../src/sagas';
import { usedMemory } from './lib/environment';
import { inParallel } from './lib/load';
import type { BenchResult } from './lib/report';
import type { BenchContext } from './lib/rounds';
import { spread } from './lib/stats';

const LEASE_MS = 60_000;
const CASES = { after: 'right after the last finalise', retained: 'after the retention' } as const;
const CONTENDER = 'ours';
/** Longest wait, past the retention, for Redis's expiry to take the keys out of SCAN's sight. */
const EXPIRY_SLACK_MS = 30_000;

interface Count {
  keys: number;
  withoutTtl: number;
}

async function countKeys(redis: Redis, pattern: string, withTtls: boolean): Promise<Count> {
  let keys = 0;
  let withoutTtl = 0;
  for await (const batch of redis.scanStream({ match: pattern, count: 5000 })) {
    const found = batch as string[];
    keys += found.length;
    if (withTtls && found.length > 0) {
      const pipeline = redis.pipeline();
      for (const key of found) pipeline.pttl(key);
      for (const [, ttl] of (await pipeline.exec()) ?? []) if (ttl === -1) withoutTtl++;
    }
  }
  return { keys, withoutTtl };
}

/** Runs benchmark 6. */
export async function keyGrowth({ config, sizes, progress }: BenchContext): Promise<BenchResult> {
  const { intents: count, retentionMs } = sizes.keyGrowth;
  const prefix = `${config.redis.keyPrefix}kg:`;
  const redis = createRedis(config.redis) as Redis;
  const rms = new Rms(redis, { keyPrefix: prefix });
  const secret = randomBytes(32);
  const nonce = randomBytes(6).toString('hex');
  try {
    const m0 = await usedMemory(redis);
    progress.update(`key-growth: ${count.toLocaleString('en-US')} intents reserved and finalised`);
    await inParallel(count, async (i) => {
      const intent = intentKey('order', { bench: nonce, i }, secret);
      const sessionId = sagaSessionId('default', `order-${randomUUID()}`);
      const held = await rms.reserve({ intent, sessionId, leaseMs: LEASE_MS });
      if (held.status !== 'SUCCESS') throw new Error(`key-growth: reserve answered ${held.status}`);
      const owner = { intent, sessionId, fencingToken: held.fencingToken };
      const done = await rms.finalize({ ...owner, existsTtlMs: retentionMs });
      if (done.status !== 'FINALIZED') throw new Error(`key-growth: finalize answered ${done.status}`);
      // Every tenth saga is undone after it finalised, as a compensation does: free, then release.
      if (i % 10 === 0) {
        await rms.free({ intent, fencingToken: held.fencingToken, existsTtlMs: retentionMs });
        await rms.release(owner);
      }
    });
    const finishedAt = performance.now();
    const after = await countKeys(redis, `${prefix}*`, true);
    const m1 = await usedMemory(redis);

    progress.update(`key-growth: waiting out the ${retentionMs} ms retention`);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, retentionMs - (performance.now() - finishedAt))));
    // Expired keys leave SCAN's sight at once; Redis's active expiry frees their memory over the next
    // seconds. Count until none is left (or the slack is spent).
    let retained = await countKeys(redis, `${prefix}*`, true);
    const deadline = performance.now() + EXPIRY_SLACK_MS;
    while (retained.keys > 0 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      retained = await countKeys(redis, `${prefix}*`, true);
    }
    const m2 = await usedMemory(redis);

    const row = (caseName: string, c: Count, memory: number) => ({
      case: caseName,
      contender: CONTENDER,
      baseline: true,
      // One round: the figures are counts of one run.
      figures: [
        { metric: 'keys', ...spread([c.keys]) },
        { metric: 'perIntent', ...spread([c.keys / count]) },
        { metric: 'withoutTtl', ...spread([c.withoutTtl]) },
        { metric: 'memory', ...spread([memory / 2 ** 20]) },
      ],
    });
    const perIntent = retained.keys / count;
    return {
      name: 'key-growth',
      title: '6. Keys left behind by finished sagas',
      baseline: 'none: the target is absolute (0 keys per finished intent after the retention; 2 before fences ended)',
      method:
        `${count.toLocaleString('en-US')} fresh order intents, each reserved (lease ${LEASE_MS / 1000} s) and finalised with Rms (256 in flight), every tenth then undone (free, release) as a compensation does; ` +
        `marker retention ${retentionMs} ms (ENTITY_EXISTS_TTL_MS). Keys counted with SCAN under the run's own prefix "${prefix}", TTLs read with PTTL; ` +
        `the second count once the retention has passed (then every ${500} ms, for at most ${EXPIRY_SLACK_MS / 1000} s more, until none is left). ` +
        "used_memory is the whole server's, the delta from before the run: other clients of the same Redis show in it.",
      columns: [
        { metric: 'keys', label: 'keys', better: 'lower', digits: 0 },
        { metric: 'perIntent', label: 'keys per intent', better: 'lower', digits: 2 },
        { metric: 'withoutTtl', label: 'keys without a TTL', better: 'lower', digits: 0 },
        { metric: 'memory', label: 'used_memory delta (MiB)', better: 'lower', digits: 1 },
      ],
      rows: [row(CASES.after, after, m1 - m0), row(CASES.retained, retained, m2 - m0)],
      targets: [
        {
          case: CASES.retained,
          contender: CONTENDER,
          requirement: '0 keys per finished intent',
          measured: `${retained.keys} keys (${perIntent.toFixed(2)} per intent)`,
          met: retained.keys === 0,
        },
        {
          case: CASES.after,
          contender: CONTENDER,
          requirement: 'no key without a TTL',
          measured: `${after.withoutTtl} of ${after.keys}`,
          met: after.withoutTtl === 0,
        },
      ],
      chartMetric: 'keys',
      details: { intents: count, retentionMs, prefix, after, retained, usedMemory: { before: m0, after: m1, retained: m2 } },
    };
  } finally {
    redis.disconnect();
  }
}
