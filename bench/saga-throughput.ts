/**
 * Benchmark 4: completed `order` sagas per second with 1 and 2 worker processes, against a bare
 * workflow running as many no-op activities on as many bench worker processes: the Temporal ceiling.
 * After each case, what one workflow of each kind cost: Temporal's work from a few histories, and
 * PostgreSQL's transactions and connections per saga (bench/lib/workflow-cost.ts).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createRedis } from '../src/rms';

import { devServerMeter } from './lib/cpu';
import { baselineRatio, cpuNote, formatNumber, latencyColumns, ratioTarget, withRatios, type BenchResult, type Row } from './lib/report';
import { caseRows, type BenchContext } from './lib/rounds';
import { closedLoopContender, completeOrderSaga, connectClients } from './lib/temporal-load';
import { PG_STATS_SETTLE_MS, databaseCounterReader, historyCostText, sampleHistoryCost, type HistorySample } from './lib/workflow-cost';
import { workerProcesses } from './lib/workers';
import { noopActivitiesWorkflow } from './workflows';
import { orderSaga } from '../test/fixtures/orders';

/**
 * What one order saga runs: planSaga and reserveIntent as local activities (confirming the gate's
 * reservation), then writeEntity, finalizeEntity, one runStep per step and completeEntity.
 */
const SAGA_LOCAL_ACTIVITIES = 2;
const SAGA_ACTIVITIES = 3 + orderSaga.steps.length;
const CONTENDERS = { bare: `bare workflow (${SAGA_LOCAL_ACTIVITIES} local + ${SAGA_ACTIVITIES} no-op activities)`, saga: 'order saga' } as const;
/** Completed workflows of each kind whose history is read after a case: a sample, not a load on the server. */
const HISTORY_SAMPLE = 5;

/** What one workflow of each kind cost at one case: Temporal from sampled histories, PostgreSQL per saga. */
interface CaseCost {
  case: string;
  bare: HistorySample;
  saga: HistorySample;
  /** Order sagas completed in the case, warm-up included: the divisor of the PostgreSQL figures. */
  sagas: number;
  /** Deltas of the run's database over the case (pg_stat_database), and the same per completed saga. */
  postgres: { transactions: number; sessions: number; transactionsPerSaga: number; sessionsPerSaga: number };
}

/** The cost model of one case, as a line under the table. */
function costNote(c: CaseCost): string {
  const pgText =
    `PostgreSQL, the run's database over the case (pg_stat_database deltas ÷ ${c.sagas} order sagas completed, warm-up included; read ${PG_STATS_SETTLE_MS / 1000} s after the last saga, once every backend has flushed its counters): ` +
    `${formatNumber(c.postgres.transactionsPerSaga, 1)} transactions per saga (xact_commit + xact_rollback: a statement outside BEGIN … COMMIT counts as one; not round trips), ` +
    `${formatNumber(c.postgres.sessionsPerSaga, 2)} connections opened per saga (sessions: ${c.postgres.sessions}, the pools filling up included). ` +
    `They include the gate's lookup, the worker's activities and the example payment provider (in this process); the bare workflow does not touch PostgreSQL`;
  return (
    `Cost per workflow at ${c.case} (median of the last ${HISTORY_SAMPLE} completed of each kind, from their Temporal histories): ` +
    `bare workflow: ${historyCostText(c.bare)}; order saga: ${historyCostText(c.saga)}. ` +
    `Heartbeats leave no history event and are not counted (the activities with a heartbeat timeout heartbeat as they start, then every HEARTBEAT_INTERVAL_MS). ${pgText}.`
  );
}

/** Runs benchmark 4. */
export async function sagaThroughput({ sizes, progress, workers }: BenchContext): Promise<BenchResult> {
  const { workerCounts, perRound, inFlight, roundMs } = sizes.sagas;
  const { client, sagas, close } = await connectClients(workers);
  const redis = createRedis(workers.sagaConfig.redis) as Redis;
  const meter = devServerMeter(redis, { 'saga workers': () => workers.sagaPids, 'bench workers': () => workers.barePids });
  const pgCounters = await databaseCounterReader(workers.sagaConfig.db.url);
  const rows: Row[] = [];
  const costs: CaseCost[] = [];
  try {
    for (const count of workerCounts) {
      await workers.scaleTo(count);
      const caseName = workerProcesses(count);
      const load = { inFlight, perRound, roundMs };
      // The ids of the completed workflows, for the histories read after the case.
      const bareIds: string[] = [];
      const sagaIds: string[] = [];
      const bare = closedLoopContender(CONTENDERS.bare, meter, load, async () => {
        const workflowId = `bench-bare-${randomUUID()}`;
        await client.workflow.execute(noopActivitiesWorkflow, { taskQueue: workers.bareConfig.temporal.taskQueue, workflowId, args: [SAGA_ACTIVITIES, SAGA_LOCAL_ACTIVITIES] });
        bareIds.push(workflowId);
      });
      const saga = closedLoopContender(CONTENDERS.saga, meter, load, async () => {
        sagaIds.push((await completeOrderSaga(sagas, 'saga-throughput')).workflowId);
      });
      const before = await pgCounters.read();
      rows.push(...(await caseRows('saga-throughput', caseName, CONTENDERS.bare, [bare, saga], sizes.sagas.rounds, progress)));
      progress.update(`saga-throughput ${caseName}: reading ${HISTORY_SAMPLE} histories of each kind, waiting for PostgreSQL's counters`);
      const [bareCost, sagaCost] = await Promise.all([
        sampleHistoryCost(client, bareIds, HISTORY_SAMPLE),
        sampleHistoryCost(client, sagaIds, HISTORY_SAMPLE),
        delay(PG_STATS_SETTLE_MS),
      ]);
      const after = await pgCounters.read();
      const transactions = after.transactions - before.transactions;
      const sessions = after.sessions - before.sessions;
      costs.push({
        case: caseName,
        bare: bareCost,
        saga: sagaCost,
        sagas: sagaIds.length,
        postgres: { transactions, sessions, transactionsPerSaga: transactions / sagaIds.length, sessionsPerSaga: sessions / sagaIds.length },
      });
    }
  } finally {
    redis.disconnect();
    await pgCounters.close();
    await close();
  }

  const withRatio = withRatios(rows);
  const cases = [...new Set(withRatio.map((r) => r.case))];
  const targets = cases.map((caseName) => {
    const ratio = baselineRatio(withRatio, caseName, CONTENDERS.saga, 'throughput');
    return ratioTarget(caseName, CONTENDERS.saga, '≥ 0.9× bare ceiling', ratio, ratio >= 0.9);
  });
  return {
    name: 'saga-throughput',
    title: '4. Saga throughput: completed workflows per second',
    baseline: `the Temporal ceiling: a bare workflow running ${SAGA_LOCAL_ACTIVITIES} no-op local activities and ${SAGA_ACTIVITIES} no-op activities in sequence (as many of each as an order saga runs), on as many bench worker processes (bench/bare-worker.ts, same Worker settings)`,
    method:
      `${inFlight} workflows in flight from one client, each started as soon as one ends; ${perRound} per round. Order sagas are started with SagaClient.start (the gate: reserve in Redis, one PostgreSQL lookup, one workflow.start) and ` +
      `must end COMPLETED (plan and confirm the reservation, fenced write, finalise, charge through the example payment provider over HTTP, reserve stock, complete); the bare workflow is started with workflow.execute. Worker processes: src/worker.ts and bench/bare-worker.ts under tsx. ` +
      `p50/p99: start to end of one workflow. CPU by process: the dev server, the worker process trees, every PostgreSQL backend of the server (whoever it serves), Redis (INFO cpu), and this process (the client, and the payment provider, which runs in it).`,
    columns: [
      { metric: 'throughput', label: 'completed/s', better: 'higher', digits: 1 },
      ...latencyColumns(0),
    ],
    rows: withRatio,
    targets,
    chartMetric: 'throughput',
    notes: [...cases.map((c) => cpuNote(withRatio, c, 'ms', 'workflow')), ...costs.map(costNote)],
    details: { costPerWorkflow: costs },
  };
}
