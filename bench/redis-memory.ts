/**
 * Benchmark 5: Redis memory per live reservation (the `processing` lease plus the intent's `fence`)
 * and per `entity_exists` key: MEMORY USAGE of sampled keys and the `used_memory` delta over many
 * keys, against the seed articles' 76-byte payload estimate.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { Rms, createRedis, intentKey, intentKeys } from '../src/rms';
import { sagaSessionId } from '../src/sagas';
import { closedLoop } from './lib/load';
import { figureOf, withRatios, type BenchResult } from './lib/report';
import { rowsOf, type BenchContext, type RoundFigures } from './lib/rounds';

/** The seed articles' estimate of one reservation's payload, in bytes. */
const SEED_ESTIMATE_BYTES = 76;
const LEASE_MS = 300_000;
const SAMPLE = 200;
const CASES = { live: 'live reservation (processing + fence)', exists: 'entity_exists key' } as const;
const CONTENDERS = { seed: 'seed estimate', payload: 'key + value bytes', usage: 'MEMORY USAGE', delta: 'used_memory delta' } as const;

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
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
  const split: Record<string, number>[] = [];
  let keyLengths: Record<string, number> = {};

  try {
    for (let round = 0; round < rounds; round++) {
      const label = `redis-memory round ${round + 1}/${rounds}`;
      const nonce = randomBytes(6).toString('hex');
      const intents = Array.from({ length: count }, (_, i) => intentKey('order', { bench: nonce, i }, randomBytes(32)));
      // A saga's session id is the digest of its workflow id (sagaSessionId), as the gate takes it.
      const sessions = intents.map(() => sagaSessionId('default', `order-${randomUUID()}`));
      const tokens: string[] = new Array<string>(count);
      const all = intents.map((intent) => intentKeys(prefix, intent));
      const sample = all.slice(0, SAMPLE);

      const m0 = await usedMemory(redis);
      progress.update(`${label}: reserving ${count.toLocaleString('en-US')} intents`);
      await closedLoop({
        concurrency: 256,
        durationMs: 600_000,
        maxOps: count,
        op: async (_lane, i) => {
          const answer = await rms.reserve({ intent: intents[i]!, sessionId: sessions[i]!, leaseMs: LEASE_MS });
          if (answer.status !== 'SUCCESS') throw new Error(`redis-memory: reserve answered ${answer.status}`);
          tokens[i] = answer.fencingToken;
          return null;
        },
      });
      const m1 = await usedMemory(redis);
      const processingUsage = await memoryUsage(redis, sample.map((k) => k.processing));
      const fenceUsage = await memoryUsage(redis, sample.map((k) => k.fence));

      progress.update(`${label}: finalising them`);
      await closedLoop({
        concurrency: 256,
        durationMs: 600_000,
        maxOps: count,
        op: async (_lane, i) => {
          const answer = await rms.finalize({ intent: intents[i]!, sessionId: sessions[i]!, fencingToken: tokens[i]! });
          if (answer.status !== 'FINALIZED') throw new Error(`redis-memory: finalize answered ${answer.status}`);
          return null;
        },
      });
      const m2 = await usedMemory(redis);
      const existsUsage = await memoryUsage(redis, sample.map((k) => k.entityExists));
      progress.update(`${label}: deleting them`);
      await unlinkAll(redis, all.map((k) => k.fence));
      const m3 = await usedMemory(redis);
      await unlinkAll(redis, all.map((k) => k.entityExists));
      const m4 = await usedMemory(redis);

      const fence = (m2 - m3) / count;
      const live = (m1 - m0) / count;
      split.push({ liveDelta: live, processingDelta: live - fence, fenceDelta: fence, processingUsage, fenceUsage });
      const first = all[0]!;
      keyLengths = {
        processingKey: first.processing.length,
        processingValue: `${sessions[0]}:${tokens[0]}`.length,
        fenceKey: first.fence.length,
        fenceValue: tokens[0]!.length,
        entityExistsKey: first.entityExists.length,
        // The marker records its owner: <session>:<token>, as finalize.lua writes it.
        entityExistsValue: `${sessions[0]}:${tokens[0]}`.length,
      };
      push('live', CONTENDERS.seed, SEED_ESTIMATE_BYTES);
      push('live', CONTENDERS.payload, keyLengths.processingKey! + keyLengths.processingValue! + keyLengths.fenceKey! + keyLengths.fenceValue!);
      push('live', CONTENDERS.usage, processingUsage + fenceUsage);
      push('live', CONTENDERS.delta, live);
      push('exists', CONTENDERS.seed, SEED_ESTIMATE_BYTES);
      push('exists', CONTENDERS.payload, keyLengths.entityExistsKey! + keyLengths.entityExistsValue!);
      push('exists', CONTENDERS.usage, existsUsage);
      push('exists', CONTENDERS.delta, (m3 - m4) / count);
    }
  } finally {
    redis.disconnect();
  }

  const rows = withRatios([...rowsOf(CASES.live, CONTENDERS.seed, byCase.live), ...rowsOf(CASES.exists, CONTENDERS.seed, byCase.exists)]);
  const live = figureOf(rows, CASES.live, CONTENDERS.delta, 'bytes').median;
  return {
    name: 'redis-memory',
    title: '5. Redis memory per reservation',
    baseline: `the seed articles' payload estimate, ${SEED_ESTIMATE_BYTES} bytes`,
    method:
      `Per round, ${count.toLocaleString('en-US')} fresh order intents are reserved with Rms.reserve (session id: a 22-character digest of a workflow id, as sagaSessionId makes it), then finalised, then their fence and entity_exists keys deleted; ` +
      `used_memory (INFO memory) is read between the steps, MEMORY USAGE (SAMPLES 0) on ${SAMPLE} keys of each kind. ` +
      `Key prefix "${prefix}" (${prefix.length} bytes; the default "rs:" has 3). No warm-up: the figures do not depend on one.`,
    columns: [{ metric: 'bytes', label: 'bytes', better: 'lower', digits: 0 }],
    rows,
    targets: [
      {
        case: CASES.live,
        contender: CONTENDERS.delta,
        requirement: '≤ 120 B per live reservation',
        measured: `${live.toFixed(0)} B`,
        met: live <= 120,
      },
    ],
    chartMetric: 'bytes',
    details: { keys: count, prefix, keyLengths, perRound: split },
  };
}
