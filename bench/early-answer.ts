/**
 * Benchmark 3: the early answer. SagaClient.start on the `order` type (update-with-start, answered
 * once the reservation is known) against a plain `client.workflow.start` of an empty workflow on the
 * same server, at 1 and 32 starts in flight.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { closedLoop } from './lib/load';
import { figureOf, formatNumber, withRatios, type BenchResult, type Row, type TargetCheck } from './lib/report';
import { rowsOf, runRounds, type BenchContext, type Contender } from './lib/rounds';
import { latencyPercentiles, spread } from './lib/stats';
import { answerPhases, connectClients, freshOrder, within, type AnswerPhases } from './lib/temporal-load';
import { emptyWorkflow } from './workflows';

const CONTENDERS = { start: 'workflow.start (empty)', saga: 'SagaClient.start (order)' } as const;
const DRAIN_TIMEOUT_MS = 180_000;

/** Runs benchmark 3. */
export async function earlyAnswer({ sizes, progress, workers }: BenchContext): Promise<BenchResult> {
  const { concurrencies, startsPerRound, roundMs } = sizes.earlyAnswer;
  await workers.scaleTo(1);
  const { client, sagas, close } = await connectClients(workers);
  const rows: Row[] = [];
  // Answers at 1 in flight (workflow id, latency), to split their time by phase afterwards.
  const answers: { workflowId: string; ms: number }[] = [];
  const phases: (AnswerPhases & { total: number })[] = [];
  try {
    for (const concurrency of concurrencies) {
      /**
       * A contender: `start` starts one workflow and returns a promise of its end (wrapped: an async
       * function returning a bare promise would wait for it). Each round waits for
       * every workflow it started to end, so the next round starts on an idle worker.
       */
      const contender = (name: string, start: () => Promise<{ end: Promise<unknown>; workflowId: string }>): Contender => ({
        name,
        run: async ({ warmup }) => {
          const ends: Promise<unknown>[] = [];
          const maxOps = warmup ? concurrency : startsPerRound(concurrency);
          const r = await closedLoop({
            concurrency,
            durationMs: roundMs,
            maxOps,
            op: async () => {
              const t0 = performance.now();
              const { end, workflowId } = await start();
              const ms = performance.now() - t0;
              end.catch(() => undefined);
              ends.push(end);
              if (name === CONTENDERS.saga && concurrency === 1 && !warmup) answers.push({ workflowId, ms });
              return ms;
            },
          });
          progress.update(`early-answer ${concurrency} in flight: waiting for ${ends.length} ${name} workflows to end`);
          await within(`${name}: ${ends.length} workflows`, DRAIN_TIMEOUT_MS, ends);
          const { p50, p99 } = latencyPercentiles(r.latencies, r.samples);
          return { throughput: r.throughput, p50, p99 };
        },
      });

      const plain = contender(CONTENDERS.start, async () => {
        const workflowId = `bench-empty-${randomUUID()}`;
        const handle = await client.workflow.start(emptyWorkflow, { taskQueue: workers.bareConfig.temporal.taskQueue, workflowId });
        return { end: handle.result(), workflowId };
      });
      const saga = contender(CONTENDERS.saga, async () => {
        const started = await sagas.start('order', freshOrder(), { idempotencyKey: randomUUID() });
        if (started.reservation.status !== 'SUCCESS') throw new Error(`early-answer: a fresh order was answered ${started.reservation.status}`);
        return { end: sagas.result(started.workflowId), workflowId: started.workflowId };
      });
      const results = await runRounds([plain, saga], sizes.earlyAnswer.rounds, progress, `early-answer ${concurrency} in flight`);
      rows.push(...rowsOf(`${concurrency} in flight`, CONTENDERS.start, results));
    }
    progress.update(`early-answer: reading ${answers.length} saga histories`);
    for (const { workflowId, ms } of answers) phases.push({ ...(await answerPhases(client, workflowId)), total: ms });
  } finally {
    await close();
  }

  const withRatio = withRatios(rows);
  const targets: TargetCheck[] = concurrencies.map((c) => {
    const p50 = figureOf(withRatio, `${c} in flight`, CONTENDERS.saga, 'p50').median;
    return { case: `${c} in flight`, contender: CONTENDERS.saga, requirement: 'p50 < 30 ms', measured: `${p50.toFixed(1)} ms`, met: p50 < 30 };
  });
  return {
    name: 'early-answer',
    title: '3. Early answer: time to the reservation answer',
    baseline: 'client.workflow.start of an empty workflow on the same dev server (answered once the start is recorded)',
    method:
      `N in flight = N concurrent starts from one client; each SagaClient.start is a fresh order (its own intent and idempotency key), answered SUCCESS after ` +
      `the worker (one src/worker.ts process) ran the reserve activity. Every round waits for all its workflows to end before the next. answers/s is over the round's starts only.`,
    columns: [
      { metric: 'p50', label: 'p50 ms', better: 'lower', digits: 1 },
      { metric: 'p99', label: 'p99 ms', better: 'lower', digits: 1 },
      { metric: 'throughput', label: 'answers/s', better: 'higher', digits: 0 },
    ],
    rows: withRatio,
    targets,
    chartMetric: 'p50',
    notes: phases.length > 0 ? [phaseNote(phases)] : [],
    details: { answerPhasesAt1InFlight: phases },
  };
}

/** Where the time of an answer at 1 in flight goes, from the sagas' histories (medians). */
function phaseNote(phases: (AnswerPhases & { total: number })[]): string {
  const median = (pick: (p: AnswerPhases & { total: number }) => number) => formatNumber(spread(phases.map(pick)).median, 1);
  return (
    `Where an answer's time goes at 1 in flight (median ms of ${phases.length} sagas, from their histories): ` +
    `total ${median((p) => p.total)}; tasks waiting for a worker poll (2 workflow tasks, 1 activity task) ${median((p) => p.dispatch)}; ` +
    `workflow tasks on the worker ${median((p) => p.workflowTasks)}; reserve activity (Redis + PostgreSQL) ${median((p) => p.activity)}; ` +
    `the rest (start and update calls, history writes) ${median((p) => p.total - p.dispatch - p.workflowTasks - p.activity)}.`
  );
}
