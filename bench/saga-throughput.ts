/**
 * Benchmark 4: completed `order` sagas per second with 1 and 2 worker processes, against a bare
 * workflow running as many no-op activities on as many bench worker processes: the Temporal ceiling.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { createRedis } from '../src/rms';

import { CpuMeter, childrenNamed, named, treesOf } from './lib/cpu';
import { cpuNote, figureOf, formatRatio, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { rowsOf, runRounds, type BenchContext } from './lib/rounds';
import { closedLoopContender, completeOrderSaga, connectClients } from './lib/temporal-load';
import { noopActivitiesWorkflow } from './workflows';
import { orderSaga } from '../test/fixtures/orders';

/**
 * What one order saga runs: planSaga and reserveIntent as local activities (confirming the gate's
 * reservation), then writeEntity, finalizeEntity, one runStep per step and completeEntity.
 */
const SAGA_LOCAL_ACTIVITIES = 2;
const SAGA_ACTIVITIES = 3 + orderSaga.steps.length;
const CONTENDERS = { bare: `bare workflow (${SAGA_LOCAL_ACTIVITIES} local + ${SAGA_ACTIVITIES} no-op activities)`, saga: 'order saga' } as const;

/** Runs benchmark 4. */
export async function sagaThroughput({ sizes, progress, workers }: BenchContext): Promise<BenchResult> {
  const { workerCounts, perRound, inFlight, roundMs } = sizes.sagas;
  const { client, sagas, close } = await connectClients(workers);
  const redis = createRedis(workers.sagaConfig.redis) as Redis;
  const meter = new CpuMeter(redis, {
    temporal: childrenNamed('temporal'),
    'saga workers': treesOf(() => workers.sagaPids),
    'bench workers': treesOf(() => workers.barePids),
    postgres: named('postgres'),
  });
  const rows: Row[] = [];
  try {
    for (const count of workerCounts) {
      await workers.scaleTo(count);
      const caseName = `${count} worker process${count === 1 ? '' : 'es'}`;
      const load = { inFlight, perRound, roundMs };
      const bare = closedLoopContender(CONTENDERS.bare, meter, load, async () => {
        await client.workflow.execute(noopActivitiesWorkflow, {
          taskQueue: workers.bareConfig.temporal.taskQueue,
          workflowId: `bench-bare-${randomUUID()}`,
          args: [SAGA_ACTIVITIES, SAGA_LOCAL_ACTIVITIES],
        });
      });
      const saga = closedLoopContender(CONTENDERS.saga, meter, load, () => completeOrderSaga(sagas, 'saga-throughput'));
      rows.push(...rowsOf(caseName, CONTENDERS.bare, await runRounds([bare, saga], sizes.sagas.rounds, progress, `saga-throughput ${caseName}`)));
    }
  } finally {
    redis.disconnect();
    await close();
  }

  const withRatio = withRatios(rows);
  const targets: TargetCheck[] = [...new Set(withRatio.map((r) => r.case))].map((caseName) => {
    const ratio = figureOf(withRatio, caseName, CONTENDERS.saga, 'throughput').ratio ?? Number.NaN;
    return { case: caseName, contender: CONTENDERS.saga, requirement: '≥ 0.9× bare ceiling', measured: formatRatio(ratio), met: ratio >= 0.9 };
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
      { metric: 'p50', label: 'p50 ms', better: 'lower', digits: 0 },
      { metric: 'p99', label: 'p99 ms', better: 'lower', digits: 0 },
    ],
    rows: withRatio,
    targets,
    chartMetric: 'throughput',
    notes: [...new Set(withRatio.map((r) => r.case))].map((c) => cpuNote(withRatio, c, 'ms', 'workflow')),
  };
}
