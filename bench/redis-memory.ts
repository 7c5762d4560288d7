/**
 * Benchmark 5: Redis memory per live reservation (the lease, `p{<tag>}`) and per `entity_exists`
 * marker (`e{<tag>}`), against Redis's own floor for one key: an empty value with a TTL, under a name
 * as short as a counter allows, measured in the same run. `used_memory` deltas over many keys (what a
 * deployment pays, hash tables included) and MEMORY USAGE of sampled keys.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { Rms, createRedis, intentKey, intentKeys, sessionTag } from '../src/rms';
import { sagaSessionId } from '../src/sagas';
import { usedMemory } from './lib/environment';
import { inParallel } from './lib/load';
import { figureOf, withRatios, type BenchResult } from './lib/report';
import { rowsOf, type BenchContext, type RoundFigures } from './lib/rounds';

/** The seed articles' estimate of one reservation's payload, in bytes. */
const SEED_ESTIMATE_BYTES = 76;
const LEASE_MS = 300_000;
const SAMPLE = 200;
const CASES = { live: 'live reservation', exists: 'entity_exists marker' } as const;
const CONTENDERS = {
  floor: "Redis's floor: used_memory delta",
  floorUsage: "Redis's floor: MEMORY USAGE",
  delta: 'ours: used_memory delta',
  usage: 'ours: MEMORY USAGE',
  payload: 'ours: key + value bytes',
  seed: 'seed estimate',
} as const;
/** The targets: used_memory per key as a multiple of the floor's. */
const TARGETS = { live: 1.5, exists: 1.3 } as const;

/** Bytes of the keyspaces' hash tables (entries and bucket arrays of every db), from MEMORY STATS. */
async function hashTables(redis: Redis): Promise<number> {
  const stats = (await redis.call('MEMORY', 'STATS')) as unknown[];
  let total = 0;
  for (let i = 0; i < stats.length; i += 2) {
    if (typeof stats[i] === 'string' && (stats[i] as string).startsWith('db.') && Array.isArray(stats[i + 1])) {
      const db = stats[i + 1] as unknown[];
      for (let j = 1; j < db.length; j += 2) total += Number(db[j]);
    }
  }
  return total;
}

/**
 * Waits until Redis has shrunk its hash tables after a deletion (its cron does, about ten times a
 * second), so every measurement starts from the same small tables and pays the same growth: without
 * it the floor measured right after a deletion would skip the growth that ours pays, or the reverse.
 */
async function settle(redis: Redis, floorBytes: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await hashTables(redis)) > floorBytes && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

async function memoryUsage(redis: Redis, keys: string[]): Promise<number> {
  let total = 0;
  for (const key of keys) total += Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
  return total / keys.length;
}

async function unlinkAll(redis: Redis, keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 1000) await redis.unlink(...keys.slice(i, i + 1000));
}

/** Runs benchmark 5. */
export async function redisMemory({ config, sizes, progress }: BenchContext): Promise<BenchResult> {
  const { keys: count, rounds } = sizes.memory;
  // The run's prefix itself (no sub-prefix), so the keys are as long as a deployment's but for 4 bytes.
  const prefix = config.redis.keyPrefix;
  const redis = createRedis(config.redis) as Redis;
  const rms = new Rms(redis, { keyPrefix: prefix });
  const byCase = { live: new Map<string, RoundFigures[]>(), exists: new Map<string, RoundFigures[]>() };
  const push = (which: keyof typeof byCase, contender: string, bytes: number) => {
    const list = byCase[which].get(contender) ?? [];
    list.push({ bytes });
    byCase[which].set(contender, list);
  };
  const perRound: Record<string, number>[] = [];
  let keyLengths: Record<string, number> = {};

  try {
    // The tables as they are before any key of this benchmark, with room for a little other traffic.
    const idleTables = (await hashTables(redis)) + 64 * 1024;
    for (let round = 0; round < rounds; round++) {
      const label = `redis-memory round ${round + 1}/${rounds}`;
      await settle(redis, idleTables);

      // The floor: `count` keys named by a counter under the same prefix, empty values, a TTL each.
      progress.update(`${label}: Redis's floor, ${count.toLocaleString('en-US')} empty keys with a TTL`);
      const floorKeys = Array.from({ length: count }, (_, i) => `${prefix}${i.toString(36)}`);
      const f0 = await usedMemory(redis);
      for (let i = 0; i < count; i += 1000) {
        const batch = redis.pipeline();
        for (const key of floorKeys.slice(i, i + 1000)) batch.set(key, '', 'PX', LEASE_MS);
        await batch.exec();
      }
      const f1 = await usedMemory(redis);
      const floorUsage = await memoryUsage(redis, floorKeys.slice(0, SAMPLE));
      await unlinkAll(redis, floorKeys);
      await settle(redis, idleTables);

      const nonce = randomBytes(6).toString('hex');
      const intents = Array.from({ length: count }, (_, i) => intentKey('order', { bench: nonce, i }, randomBytes(32)));
      // A saga's session id is the digest of its workflow id (sagaSessionId), as the gate takes it.
      const sessions = intents.map(() => sagaSessionId('default', `order-${randomUUID()}`));
      const tokens: string[] = new Array<string>(count);
      const all = intents.map((intent) => intentKeys(prefix, intent));
      const sample = all.slice(0, SAMPLE);

      const m0 = await usedMemory(redis);
      progress.update(`${label}: reserving ${count.toLocaleString('en-US')} intents`);
      await inParallel(count, async (i) => {
        const answer = await rms.reserve({ intent: intents[i]!, sessionId: sessions[i]!, leaseMs: LEASE_MS });
        if (answer.status !== 'SUCCESS') throw new Error(`redis-memory: reserve answered ${answer.status}`);
        tokens[i] = answer.fencingToken;
      });
      const m1 = await usedMemory(redis);
      const processingUsage = await memoryUsage(redis, sample.map((k) => k.processing));

      progress.update(`${label}: finalising them (markers with a TTL, as ENTITY_EXISTS_TTL_MS gives them)`);
      await inParallel(count, async (i) => {
        const answer = await rms.finalize({ intent: intents[i]!, sessionId: sessions[i]!, fencingToken: tokens[i]!, existsTtlMs: LEASE_MS });
        if (answer.status !== 'FINALIZED') throw new Error(`redis-memory: finalize answered ${answer.status}`);
      });
      const m2 = await usedMemory(redis);
      const existsUsage = await memoryUsage(redis, sample.map((k) => k.entityExists));
      progress.update(`${label}: deleting them`);
      await unlinkAll(redis, all.map((k) => k.entityExists));

      const floor = (f1 - f0) / count;
      const live = (m1 - m0) / count;
      const exists = (m2 - m0) / count;
      perRound.push({ floorDelta: floor, floorUsage, liveDelta: live, processingUsage, existsDelta: exists, existsUsage });
      const first = all[0]!;
      keyLengths = {
        floorKey: floorKeys[count - 1]!.length,
        processingKey: first.processing.length,
        processingValue: `${sessions[0]}:${tokens[0]}`.length,
        entityExistsKey: first.entityExists.length,
        // The marker records its owner: <session tag>:<token>, as Rms.finalize has finalize.lua write it.
        entityExistsValue: `${sessionTag(sessions[0]!)}:${tokens[0]}`.length,
      };
      for (const which of ['live', 'exists'] as const) {
        push(which, CONTENDERS.floor, floor);
        push(which, CONTENDERS.floorUsage, floorUsage);
      }
      push('live', CONTENDERS.delta, live);
      push('live', CONTENDERS.usage, processingUsage);
      push('live', CONTENDERS.payload, keyLengths.processingKey! + keyLengths.processingValue!);
      push('live', CONTENDERS.seed, SEED_ESTIMATE_BYTES);
      push('exists', CONTENDERS.delta, exists);
      push('exists', CONTENDERS.usage, existsUsage);
      push('exists', CONTENDERS.payload, keyLengths.entityExistsKey! + keyLengths.entityExistsValue!);
      push('exists', CONTENDERS.seed, SEED_ESTIMATE_BYTES);
    }
  } finally {
    redis.disconnect();
  }

  const rows = withRatios([...rowsOf(CASES.live, CONTENDERS.floor, byCase.live), ...rowsOf(CASES.exists, CONTENDERS.floor, byCase.exists)]);
  const target = (which: keyof typeof TARGETS) => {
    const ratio = figureOf(rows, CASES[which], CONTENDERS.delta, 'bytes').ratio ?? Number.NaN;
    return {
      case: CASES[which],
      contender: CONTENDERS.delta,
      requirement: `≤ ${TARGETS[which]}× Redis's floor`,
      measured: `${ratio.toFixed(2)}×`,
      met: ratio <= TARGETS[which],
    };
  };
  return {
    name: 'redis-memory',
    title: '5. Redis memory per reservation',
    baseline: "Redis's floor: one key with an empty value and a TTL, named by a counter under the same prefix",
    method:
      `Per round, each time from hash tables shrunk back to their size before the run (MEMORY STATS), so both pay the same table growth: ${count.toLocaleString('en-US')} floor keys are set (empty value, PX), measured and deleted; then ${count.toLocaleString('en-US')} fresh order intents are reserved with Rms.reserve (session id: a 22-character digest of a workflow id, as sagaSessionId makes it), then finalised with a marker TTL, then their markers deleted. ` +
      `used_memory (INFO memory) is read between the steps (the marker figure is the delta from before the reservations, once the leases are gone), MEMORY USAGE (SAMPLES 0) on ${SAMPLE} keys of each kind. ` +
      `Key prefix "${prefix}" (${prefix.length} bytes; the default "rs:" has 3). No warm-up: the figures do not depend on one.`,
    columns: [{ metric: 'bytes', label: 'bytes', better: 'lower', digits: 0 }],
    rows,
    targets: [target('live'), target('exists')],
    chartMetric: 'bytes',
    details: { keys: count, prefix, keyLengths, perRound },
  };
}
