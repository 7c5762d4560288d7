/**
 * Benchmark 4: completed `order` sagas per second with 1 and 2 worker processes, against the workflow
 * a team would write itself around the same business writes (bench/baseline-workflow.ts: the order
 * row under a unique index on the intent, the charge at the payment provider, the stock, compensations
 * on failure; no gate, fencing or lease), and against a bare workflow running as many no-op activities
 * as the saga (the Temporal ceiling), each on as many worker processes of its own, in the same rounds.
 * After each case, what one workflow of each kind cost: Temporal's work from a few histories,
 * PostgreSQL's transactions and connections per workflow (bench/lib/workflow-cost.ts), and the
 * Temporal server's requests, persistence calls, history tasks and commands from its own counters
 * (bench/lib/server-work.ts).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createRedis } from '../src/rms';

import { checkBaseline, startBaseline } from './lib/baseline';
import { devServerMeter } from './lib/cpu';
import { baselineRatio, cpuNote, formatNumber, formatRatio, latencyColumns, ratioOf, ratioTarget, withRatios, type BenchResult, type Row } from './lib/report';
import { caseRows, type BenchContext, type Contender } from './lib/rounds';
import { closedLoopContender, completeOrderSaga, connectClients } from './lib/temporal-load';
import { PG_STATS_SETTLE_MS, databaseCounterReader, historyCostText, sampleHistoryCost, type DatabaseCounters, type HistorySample } from './lib/workflow-cost';
import { ServerWorkMeter, serverCounterReader, serverWorkJson, serverWorkText, type ServerWork } from './lib/server-work';
import { workerProcesses } from './lib/workers';
import { noopActivitiesWorkflow } from './workflows';
import { orderSaga } from '../test/fixtures/orders';

/**
 * What one order saga runs: planSaga and reserveIntent as local activities (confirming the gate's
 * reservation), then writeEntity (which registers the row and promotes the reservation) and one
 * runStep per step, the last of which, in PostgreSQL, completes the row (patch write-registers).
 */
const SAGA_LOCAL_ACTIVITIES = 2;
const SAGA_ACTIVITIES = 1 + orderSaga.steps.length;
const CONTENDERS = {
  baseline: 'hand-written workflow (same business I/O)',
  bare: `bare workflow (${SAGA_LOCAL_ACTIVITIES} local + ${SAGA_ACTIVITIES} no-op activities)`,
  saga: 'order saga',
} as const;
/** The targets for the order saga against the hand-written workflow. */
const TARGETS = { throughput: 0.85, cpu: 1.25 } as const;
/** Completed workflows of each kind whose history is read after a case: a sample, not a load on the server. */
const HISTORY_SAMPLE = 5;

/** PostgreSQL's work over a case on one database, and per workflow completed in it. */
interface PostgresCost {
  /** Workflows completed in the case, warm-up included: the divisor. */
  workflows: number;
  transactions: number;
  sessions: number;
  transactionsPerWorkflow: number;
  sessionsPerWorkflow: number;
  /**
   * Transactions per workflow less one per session opened: PostgreSQL counts a new session's
   * start-up as a transaction (measured on PostgreSQL 15: a connection that runs no statement adds
   * one to xact_commit), and sessions are opened while the pools fill, not per workflow.
   */
  statementTransactionsPerWorkflow: number;
}

/** What one workflow of each kind cost at one case: Temporal from sampled histories, PostgreSQL per workflow. */
interface CaseCost {
  case: string;
  baseline: HistorySample;
  bare: HistorySample;
  saga: HistorySample;
  /** The run's database (the saga's: gate, worker, its payment provider) and the baseline's own. */
  postgres: { saga: PostgresCost; baseline: PostgresCost };
  /** What the Temporal server did over each contender's runs, by its own counters (bench/lib/server-work.ts). */
  server: { saga: ServerWork; baseline: ServerWork };
}

/** The deltas from `before` to `after` over `workflows` completed workflows. */
function postgresCost(before: DatabaseCounters, after: DatabaseCounters, workflows: number): PostgresCost {
  const transactions = after.transactions - before.transactions;
  const sessions = after.sessions - before.sessions;
  return {
    workflows,
    transactions,
    sessions,
    transactionsPerWorkflow: transactions / workflows,
    sessionsPerWorkflow: sessions / workflows,
    statementTransactionsPerWorkflow: (transactions - sessions) / workflows,
  };
}

/** One database's cost in words. */
function postgresText(what: string, c: PostgresCost): string {
  return (
    `${what}: ${formatNumber(c.transactionsPerWorkflow, 1)} transactions per workflow (${c.transactions} for ${c.workflows}), ` +
    `${formatNumber(c.sessionsPerWorkflow, 2)} connections opened per workflow (sessions: ${c.sessions}, the pools filling up included), ` +
    `${formatNumber(c.statementTransactionsPerWorkflow, 1)} transactions per workflow besides the sessions' start-ups (PostgreSQL counts one per session opened)`
  );
}

/** The cost model of one case, as a line under the table. */
function costNote(c: CaseCost): string {
  const pgText =
    `PostgreSQL (pg_stat_database deltas over the case ÷ workflows completed in it, warm-up included; xact_commit + xact_rollback: a statement outside BEGIN … COMMIT counts as one, round trips do not; ` +
    `read ${PG_STATS_SETTLE_MS / 1000} s after the last workflow, once every backend has flushed its counters): ` +
    `${postgresText("order saga, the run's database (the gate's lookup, the saga worker's activities, its payment provider)", c.postgres.saga)}; ` +
    `${postgresText("hand-written workflow, its own database (its activities, its payment provider)", c.postgres.baseline)}; the bare workflow touches neither`;
  return (
    `Cost per workflow at ${c.case} (median of the last ${HISTORY_SAMPLE} completed of each kind, from their Temporal histories): ` +
    `hand-written workflow: ${historyCostText(c.baseline)}; bare workflow: ${historyCostText(c.bare)}; order saga: ${historyCostText(c.saga)}. ` +
    `Heartbeats leave no history event and are not counted here (the activities with a heartbeat timeout beat every HEARTBEAT_INTERVAL_MS, not as they start; the server's counts below include them). ${pgText}. ` +
    serverWorkText('order saga', c.server.saga, 'hand-written workflow', c.server.baseline)
  );
}

/** `contender` with one more figure a round: `cpuTotal`, the sum of its CPU per workflow over every process measured. */
function withTotalCpu(contender: Contender): Contender {
  return {
    name: contender.name,
    run: async (round) => {
      const figures = await contender.run(round);
      const total = Object.entries(figures)
        .filter(([metric]) => metric.startsWith('cpu:'))
        .reduce((sum, [, ms]) => sum + ms, 0);
      return { ...figures, cpuTotal: total };
    },
  };
}

/** Runs benchmark 4. */
export async function sagaThroughput({ config, serverMetricsUrl, sizes, progress, workers, onCleanup }: BenchContext): Promise<BenchResult> {
  const { workerCounts, perRound, inFlight, roundMs } = sizes.sagas;
  const baseline = await startBaseline(config, progress);
  onCleanup(baseline.close);
  const rows: Row[] = [];
  const costs: CaseCost[] = [];
  try {
    const { client, sagas, close } = await connectClients(workers);
    const redis = createRedis(workers.sagaConfig.redis) as Redis;
    const meter = devServerMeter(redis, { 'saga workers': () => workers.sagaPids, 'baseline workers': () => baseline.pids, 'bench workers': () => workers.barePids });
    const sagaCounters = await databaseCounterReader(workers.sagaConfig.db.url);
    const baselineCounters = await databaseCounterReader(baseline.config.db.url);
    const serverCounters = serverCounterReader(serverMetricsUrl, config.temporal.namespace);
    try {
      for (const count of workerCounts) {
        await Promise.all([workers.scaleTo(count), baseline.scaleTo(count)]);
        const caseName = workerProcesses(count);
        const load = { inFlight, perRound, roundMs };
        // The ids of the completed workflows, for the histories read after the case.
        const baselineIds: string[] = [];
        const bareIds: string[] = [];
        const sagaIds: string[] = [];
        const hand = closedLoopContender(CONTENDERS.baseline, meter, load, async () => {
          const { workflowId, result } = await baseline.order(client);
          if (result.outcome !== 'COMPLETED') throw new Error(`saga-throughput: hand-written workflow ${workflowId} ended ${JSON.stringify(result)}`);
          baselineIds.push(workflowId);
        });
        const bare = closedLoopContender(CONTENDERS.bare, meter, load, async () => {
          const workflowId = `bench-bare-${randomUUID()}`;
          await client.workflow.execute(noopActivitiesWorkflow, { taskQueue: workers.bareConfig.temporal.taskQueue, workflowId, args: [SAGA_ACTIVITIES, SAGA_LOCAL_ACTIVITIES] });
          bareIds.push(workflowId);
        });
        const saga = closedLoopContender(CONTENDERS.saga, meter, load, async () => {
          sagaIds.push((await completeOrderSaga(sagas, 'saga-throughput')).workflowId);
        });
        // The server's counters around each contender's runs, by the workflows each completed.
        const server = new ServerWorkMeter(serverCounters);
        const counted = [
          server.wrap(withTotalCpu(hand), () => baselineIds.length),
          server.wrap(withTotalCpu(bare), () => bareIds.length),
          server.wrap(withTotalCpu(saga), () => sagaIds.length),
        ];
        const before = await Promise.all([sagaCounters.read(), baselineCounters.read()]);
        rows.push(...(await caseRows('saga-throughput', caseName, CONTENDERS.baseline, counted, sizes.sagas.rounds, progress)));
        progress.update(`saga-throughput ${caseName}: reading ${HISTORY_SAMPLE} histories of each kind, waiting for PostgreSQL's counters`);
        const [baselineCost, bareCost, sagaCost] = await Promise.all([
          sampleHistoryCost(client, baselineIds, HISTORY_SAMPLE),
          sampleHistoryCost(client, bareIds, HISTORY_SAMPLE),
          sampleHistoryCost(client, sagaIds, HISTORY_SAMPLE),
          delay(PG_STATS_SETTLE_MS),
        ]);
        const after = await Promise.all([sagaCounters.read(), baselineCounters.read()]);
        costs.push({
          case: caseName,
          baseline: baselineCost,
          bare: bareCost,
          saga: sagaCost,
          postgres: { saga: postgresCost(before[0], after[0], sagaIds.length), baseline: postgresCost(before[1], after[1], baselineIds.length) },
          server: { saga: server.work.get(CONTENDERS.saga)!, baseline: server.work.get(CONTENDERS.baseline)! },
        });
      }
      // After the last reading, so that its workflows count in no case: a baseline that answers
      // wrongly (no duplicate refused, no compensation) ends the run instead of being reported.
      progress.update('saga-throughput: checking the hand-written workflow’s answers (duplicate, declined card, short stock)');
      await checkBaseline(client, baseline);
    } finally {
      redis.disconnect();
      await sagaCounters.close();
      await baselineCounters.close();
      await close();
    }
  } finally {
    await baseline.close();
  }

  const withRatio = withRatios(rows);
  const cases = [...new Set(withRatio.map((r) => r.case))];
  const targets = cases.flatMap((caseName) => {
    const throughput = baselineRatio(withRatio, caseName, CONTENDERS.saga, 'throughput');
    const cpu = baselineRatio(withRatio, caseName, CONTENDERS.saga, 'cpuTotal');
    return [
      ratioTarget(caseName, CONTENDERS.saga, `throughput ≥ ${TARGETS.throughput}× hand-written`, throughput, throughput >= TARGETS.throughput),
      ratioTarget(caseName, CONTENDERS.saga, `CPU per workflow ≤ ${TARGETS.cpu}× hand-written`, cpu, cpu <= TARGETS.cpu),
    ];
  });
  // The previous baseline, for the record: the order saga against the bare workflow, round by round.
  const againstBare = cases.map(
    (c) =>
      `Order saga ÷ bare workflow at ${c}: ${formatRatio(ratioOf(withRatio, c, CONTENDERS.saga, CONTENDERS.bare, 'throughput'))} completed/s, ` +
      `${formatRatio(ratioOf(withRatio, c, CONTENDERS.saga, CONTENDERS.bare, 'cpuTotal'))} CPU per workflow (hand-written ÷ bare: ` +
      `${formatRatio(ratioOf(withRatio, c, CONTENDERS.baseline, CONTENDERS.bare, 'throughput'))} and ${formatRatio(ratioOf(withRatio, c, CONTENDERS.baseline, CONTENDERS.bare, 'cpuTotal'))}).`,
  );
  return {
    name: 'saga-throughput',
    title: '4. Saga throughput: completed workflows per second',
    baseline:
      `the workflow a team would write itself around the order saga's business writes (bench/baseline-workflow.ts, bench/baseline-activities.ts): one activity per effect, ` +
      `the order row PENDING under a unique index on the intent (customer and cart; a duplicate gets the unique violation), the charge at the example payment provider under an idempotency key, ` +
      `the stock taken and recorded in one transaction, the order COMPLETED; on a failure the refund, the stock released and the order FAILED, in reverse order; ` +
      `no gate, no fencing, no lease; in a database of its own with a payment provider of its own in this process, on as many baseline worker processes (bench/baseline-worker.ts: the saga worker's Worker and pool settings and data converter), ` +
      `started with workflow.execute. Its answers to a duplicate, a declined card, a short stock and a failed order's cart are checked after the last case (a wrong answer ends the run)`,
    method:
      `${inFlight} workflows in flight from one client, each started as soon as one ends; ${perRound} per round. Order sagas are started with SagaClient.start (the gate: reserve in Redis, one PostgreSQL lookup, one workflow.start) and ` +
      `must end COMPLETED (plan and confirm the reservation, fenced write, finalise, charge through the example payment provider over HTTP, reserve stock, complete); the hand-written workflow and the bare workflow ` +
      `(${SAGA_LOCAL_ACTIVITIES} no-op local activities and ${SAGA_ACTIVITIES} no-op activities in sequence, as many of each as an order saga runs: the Temporal ceiling) are started with workflow.execute, the hand-written one must end COMPLETED. ` +
      `Worker processes: src/worker.ts, bench/baseline-worker.ts and bench/bare-worker.ts under tsx, as many of each. ` +
      `p50/p99: start to end of one workflow. CPU per workflow: the sum over the processes measured (the dev server, the three kinds of worker process trees, every PostgreSQL backend of the server (whoever it serves), Redis (INFO cpu), and this process: the client and both payment providers); by process under the table`,
    columns: [
      { metric: 'throughput', label: 'completed/s', better: 'higher', digits: 1 },
      ...latencyColumns(0),
      { metric: 'cpuTotal', label: 'CPU ms/workflow', better: 'lower', digits: 1 },
    ],
    rows: withRatio,
    targets,
    chartMetric: 'throughput',
    notes: [...cases.map((c) => cpuNote(withRatio, c, 'ms', 'workflow')), ...againstBare, ...costs.map(costNote)],
    details: { costPerWorkflow: costs.map((c) => ({ ...c, server: { saga: serverWorkJson(c.server.saga), baseline: serverWorkJson(c.server.baseline) } })) },
  };
}
