/**
 * Helpers of the Temporal benchmarks: a client on the run's dev server, order inputs, the closed loop
 * of completed workflows (saga-throughput, scale-out), bounded waits, visibility counts.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { SagaClient, type StartedSaga } from '../../src/client';

import { SagaOutcome } from '../../src/shared';
import type { CpuMeter } from './cpu';
import { meteredLoopContender, timed } from './load';
import type { Contender } from './rounds';
import type { WorkerFleet } from './workers';
import { type OrderInput } from '../../test/fixtures/orders';
import { sagaTypesFor } from '../../test/fixtures/orders';

/**
 * A SagaClient on the saga workers' task queue (the gate: its own Redis, PostgreSQL and Temporal
 * connections) and the Temporal client underneath it, so a bare start uses the same connection as a
 * saga's; `close` closes them.
 */
export async function connectClients(workers: WorkerFleet): Promise<{ client: Client; sagas: SagaClient; close: () => Promise<void> }> {
  const sagas = await SagaClient.connect({ sagas: sagaTypesFor(workers.sagaConfig), config: workers.sagaConfig });
  return { client: sagas.temporal, sagas, close: () => sagas.close() };
}

/** A new order that succeeds: its own customer (so its own intent), one widget, a card that is charged. */
export function freshOrder(): OrderInput {
  return { customer: `bench-${randomUUID()}`, items: [{ sku: 'widget', quantity: 1, priceCents: 1000 }], payment: { card: '4242424242424242' } };
}

/**
 * The longest a benchmark waits for one saga to end. A saga takes seconds even on a busy machine; one
 * still open after this has lost its worker process, and the run stops saying so instead of hanging.
 */
const SAGA_END_TIMEOUT_MS = 120_000;

/**
 * Waits for the saga `workflowId` to end; anything but COMPLETED, or no end within
 * {@link SAGA_END_TIMEOUT_MS}, throws, naming `label`. The bound is a timer beside the wait, not an
 * abort signal: a signal would turn on async hooks in the process being measured (src/temporal.ts).
 */
export async function untilCompleted(sagas: SagaClient, label: string, workflowId: string): Promise<void> {
  const state = (await within(`${label}: waiting for ${workflowId} to end`, SAGA_END_TIMEOUT_MS, [sagas.result(workflowId)]))[0]!;
  if (state.outcome !== SagaOutcome.COMPLETED) throw new Error(`${label}: ${workflowId} ended ${state.outcome} (${state.reason})`);
}

/**
 * Starts one order saga of `cart` (a new one by default) through the gate (`SagaClient.start`) under a
 * new idempotency key and waits for it to end COMPLETED; anything else throws, naming `label`. Returns
 * what the start answered (its workflow id, to read its history afterwards; its intent key).
 */
export async function completeOrderSaga(sagas: SagaClient, label: string, cart: unknown = freshOrder()): Promise<StartedSaga> {
  const started = await sagas.start('order', cart, { idempotencyKey: randomUUID() });
  await untilCompleted(sagas, label, started.workflowId);
  return started;
}

/** The load of a closed loop of workflows: how many in flight, how many per round, how long a round may last. */
export interface WorkflowLoad {
  inFlight: number;
  perRound: number;
  roundMs: number;
}

/**
 * A contender that keeps `load.inFlight` workflows in flight, each started as soon as one ends
 * (`complete` runs one to its end), `load.perRound` per round (one per lane in the warm-up). Its
 * figures ({@link meteredLoopContender}): throughput (completed/s), p50/p99 (ms, start to end of one
 * workflow), CPU ms per workflow by component of `meter`, and the machine's `busy` share.
 */
export function closedLoopContender(name: string, meter: CpuMeter, load: WorkflowLoad, complete: () => Promise<unknown>): Contender {
  const loop = (warmup: boolean) => ({ concurrency: load.inFlight, durationMs: load.roundMs, maxOps: warmup ? load.inFlight : load.perRound });
  return meteredLoopContender(name, meter, 'ms', loop, async () => (await timed(complete)).ms);
}

/** Waits for `promises`, or rejects naming `what` after `timeoutMs`. */
export async function within<T>(what: string, timeoutMs: number, promises: Promise<T>[]): Promise<T[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done after ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([Promise.all(promises), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** How many workflow executions (open and closed) Temporal's visibility lists on `taskQueue`. */
export async function countOnTaskQueue(client: Client, taskQueue: string): Promise<number> {
  return (await client.workflow.count(`TaskQueue = "${taskQueue}"`)).count;
}

/**
 * Waits until visibility lists `workflowId` (a start reaches visibility asynchronously), checking
 * every 50 ms; rejects after `timeoutMs`. A count read afterwards includes that workflow.
 */
export async function untilVisible(client: Client, workflowId: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await client.workflow.count(`WorkflowId = "${workflowId}"`)).count === 0) {
    if (Date.now() > deadline) throw new Error(`${workflowId}: not listed by visibility after ${timeoutMs} ms`);
    await delay(50);
  }
}
