/**
 * Benchmark 1: RMS reserve throughput and latency. Reserve + release cycles over a large keyspace at
 * several concurrencies: ours (Rms through ioredis) against the raw limit (redis-benchmark sending the
 * same scripts by EVALSHA), the seed's multi-round-trip flow, and node-redlock.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import Redlock, { ExecutionError } from 'redlock';
import { Rms, createRedis, intentKeys } from '../src/rms';
import { scriptSource } from '../src/rms/scripts';
import { CpuMeter } from './lib/cpu';
import { deleteKeys } from './lib/environment';
import { forDuration, meteredLoopContender } from './lib/load';
import { findRedisBenchmark, redisBenchmark } from './lib/redis-benchmark';
import { cpuNote, figureOf, ratioOf, ratioTarget, withCpu, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { caseRows, type BenchContext, type Contender } from './lib/rounds';

/** The lease every contender asks for. */
const LEASE_MS = 30_000;

/**
 * Intents are `bench:` + 31 'A' + a 12-digit number: 43 base64url characters after the scope, as
 * intentKey() makes them, and exactly the shape redis-benchmark gives `__rand_int__`.
 */
const INTENT_STEM = `bench:${'A'.repeat(31)}`;
const intentOf = (n: number) => `${INTENT_STEM}${String(n).padStart(12, '0')}`;

const CONTENDERS = { limit: 'limit (redis-benchmark)', ours: 'ours (Rms)', seed: 'seed flow', redlock: 'redlock' } as const;

/** Runs benchmark 1. */
export async function rmsReserve({ config, sizes, progress }: BenchContext): Promise<BenchResult> {
  const { concurrencies, roundMs, warmupMs, keyspace } = sizes.rms;
  const prefix = `${config.redis.keyPrefix}rms:`;
  const binary = findRedisBenchmark();
  if (!binary) progress.log('bench: redis-benchmark not found (PATH or $REDIS_BENCHMARK): the limit is left out');
  const admin = createRedis(config.redis) as Redis;
  // One connection, as a worker process has (createWorker makes one client); more connections
  // measured slower here, since the Node process then writes and reads more, smaller packets.
  const redis = createRedis(config.redis) as Redis;
  const rms = new Rms(redis, { keyPrefix: prefix });
  const redlock = new Redlock([redis], { retryCount: 0 });
  const meter = new CpuMeter(admin);
  const sessionOf = Array.from({ length: Math.max(...concurrencies) }, () => randomUUID());
  const keysOf = (n: number) => intentKeys(prefix, intentOf(n));
  const rows: Row[] = [];
  const details: Record<string, unknown> = { leaseMs: LEASE_MS, keyspace, nodeConnections: 1 };

  try {
    const reserveSha = (await admin.script('LOAD', scriptSource('reserve.lua'))) as string;
    const releaseSha = (await admin.script('LOAD', scriptSource('release.lua'))) as string;
    // The tag of a key, 16 characters as intentTag makes them (__rand_int__ expands to 12 digits).
    const randomKey = 'AAAA__rand_int__';
    const limitSession = randomUUID();

    for (const concurrency of concurrencies) {
      /** A Node contender: `cycle` does one reserve + release on lane `lane` and returns the reserve's latency. */
      const nodeContender = (name: string, cycle: (lane: number, n: number) => Promise<number>): Contender =>
        meteredLoopContender(name, meter, 'µs', (warmup) => forDuration(concurrency, warmup ? warmupMs : roundMs), (lane) => cycle(lane, randomInt(keyspace)));

      const ours = nodeContender(CONTENDERS.ours, async (lane, n) => {
        const intent = intentOf(n);
        const sessionId = sessionOf[lane]!;
        const t0 = performance.now();
        const answer = await rms.reserve({ intent, sessionId, leaseMs: LEASE_MS });
        const ms = performance.now() - t0;
        if (answer.status === 'SUCCESS') await rms.release({ intent, sessionId, fencingToken: answer.fencingToken });
        return ms;
      });

      // The seed's flow: take the lock, then look for the entity, each a round trip of its own.
      const seed = nodeContender(CONTENDERS.seed, async (lane, n) => {
        const keys = keysOf(n);
        const t0 = performance.now();
        const taken = await redis.set(keys.processing, `${sessionOf[lane]}:${Date.now()}`, 'EX', LEASE_MS / 1000, 'NX');
        if (taken === null) return performance.now() - t0;
        if ((await redis.get(keys.entityExists)) !== null) {
          await redis.del(keys.processing);
          return performance.now() - t0;
        }
        const ms = performance.now() - t0;
        await redis.del(keys.processing);
        return ms;
      });

      const redlocked = nodeContender(CONTENDERS.redlock, async (_lane, n) => {
        const keys = keysOf(n);
        const t0 = performance.now();
        try {
          const lock = await redlock.acquire([keys.processing], LEASE_MS);
          const ms = performance.now() - t0;
          await lock.release();
          return ms;
        } catch (err) {
          // Locked by another lane (retryCount 0): an answer, like CONFLICT.
          if (err instanceof ExecutionError) return performance.now() - t0;
          throw err;
        }
      });

      // The limit of a cycle: redis-benchmark runs the reserve script, then the release script, at
      // the same client count; a cycle costs the time of one of each (1/rate_reserve + 1/rate_release).
      // The tool draws each __rand_int__ on its own, so the two keys name two random intents:
      // fine on one server, and all absent in this keyspace, so the script takes our SUCCESS path.
      // Its release finds no lease of its own (NOT_OWNER): one DEL less than ours.
      let calibratedRps = 5000;
      const scriptRates: { reserveRps: number; releaseRps: number }[] = [];
      const limit: Contender = {
        name: CONTENDERS.limit,
        run: async ({ warmup }) => {
          const seconds = (warmup ? warmupMs : roundMs) / 1000;
          const requests = Math.max(concurrency * 20, Math.round(calibratedRps * seconds));
          const common = { clients: concurrency, requests, keyspace, timeoutMs: 120_000 };
          const stop = await meter.start();
          const reserve = await redisBenchmark(binary!, config.redis.url, {
            ...common,
            command: ['EVALSHA', reserveSha, '3', `${prefix}p{${randomKey}}`, `${prefix}e{${randomKey}}`, `${prefix}d{${randomKey}}`, limitSession, String(LEASE_MS), ''],
          });
          const release = await redisBenchmark(binary!, config.redis.url, {
            ...common,
            command: ['EVALSHA', releaseSha, '2', `${prefix}p{${randomKey}}`, `${prefix}d{${randomKey}}`, `${limitSession}:1`, '', '0'],
          });
          const { redis: redisCpu = Number.NaN } = await stop();
          calibratedRps = reserve.rps;
          if (!warmup) scriptRates.push({ reserveRps: reserve.rps, releaseRps: release.rps });
          const figures = { throughput: 1 / (1 / reserve.rps + 1 / release.rps), p50: reserve.p50, p99: reserve.p99 };
          return withCpu(figures, { redis: redisCpu }, requests, 'µs');
        },
      };

      const contenders = [...(binary ? [limit] : []), ours, seed, redlocked];
      rows.push(...(await caseRows('rms-reserve', `${concurrency} in flight`, CONTENDERS.limit, contenders, sizes.rounds, progress)));
      if (scriptRates.length > 0) details[`limitScriptRates@${concurrency}`] = scriptRates;
      progress.update(`rms-reserve ${concurrency} in flight: deleting keys`);
      await deleteKeys(admin, `${prefix}*`);
    }
  } finally {
    await deleteKeys(admin, `${prefix}*`).catch(() => undefined);
    admin.disconnect();
    redis.disconnect();
  }

  const withRatio = withRatios(rows);
  return {
    name: 'rms-reserve',
    title: '1. RMS reserve: reserve + release cycles',
    baseline: `the limit: redis-benchmark sending reserve.lua and release.lua by EVALSHA with the same keys, arguments and client count; its cycle rate is 1 / (1/reserve rate + 1/release rate), its latency the reserve script's`,
    method:
      `Each cycle reserves a random intent of ${keyspace.toLocaleString('en-US')} (lease ${LEASE_MS} ms) and releases it; latency is the reserve call alone. ` +
      `N in flight = N concurrent callers in one Node process sharing one ioredis connection made by createRedis, as in a worker process (the same for every Node contender); redis-benchmark uses N connections. ` +
      `Seed flow: SET processing NX EX, GET entity_exists (DEL on duplicate), release DEL. redlock: node-redlock 5 acquire/release on the same Redis, retryCount 0.`,
    columns: [
      { metric: 'throughput', label: 'cycles/s', better: 'higher', digits: 0 },
      { metric: 'p50', label: 'reserve p50 ms', better: 'lower', digits: 3 },
      { metric: 'p99', label: 'reserve p99 ms', better: 'lower', digits: 3 },
    ],
    rows: withRatio,
    targets: targetsOf(withRatio, concurrencies.includes(64) ? '64 in flight' : undefined, binary !== undefined),
    chartMetric: 'throughput',
    notes: concurrencies.includes(64) ? [cpuNote(withRatio, '64 in flight', 'µs', 'cycle')] : [],
    details,
  };
}

function targetsOf(rows: Row[], caseName: string | undefined, haveLimit: boolean): TargetCheck[] {
  if (!caseName) return [];
  const throughputTo = (other: string) => ratioOf(rows, caseName, CONTENDERS.ours, other, 'throughput');
  const check = (requirement: string, ratio: number, met: boolean) => ratioTarget(caseName, CONTENDERS.ours, requirement, ratio, met);
  const toLimit = haveLimit ? throughputTo(CONTENDERS.limit) : Number.NaN;
  const toSeed = throughputTo(CONTENDERS.seed);
  const toRedlock = throughputTo(CONTENDERS.redlock);
  const p99 = figureOf(rows, caseName, CONTENDERS.ours, 'p99').median;
  return [
    ...(haveLimit ? [check('≥ 0.60× limit', toLimit, toLimit >= 0.6)] : []),
    check('≥ 2× seed flow', toSeed, toSeed >= 2),
    check('> redlock', toRedlock, toRedlock > 1),
    { case: caseName, contender: CONTENDERS.ours, requirement: 'p99 < 1 ms', measured: `${p99.toFixed(3)} ms`, met: p99 < 1 },
  ];
}
