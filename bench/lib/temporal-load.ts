/** Helpers of the Temporal benchmarks: a client on the run's dev server, order inputs, bounded waits, visibility counts. */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { SagaClient } from '../../src/client';
import type { OrderInput } from '../../src/sagas';
import type { WorkerFleet } from './workers';

/**
 * A SagaClient on the saga workers' task queue (the gate: its own Redis, PostgreSQL and Temporal
 * connections) and the Temporal client underneath it, so a bare start uses the same connection as a
 * saga's; `close` closes them.
 */
export async function connectClients(workers: WorkerFleet): Promise<{ client: Client; sagas: SagaClient; close: () => Promise<void> }> {
  const sagas = await SagaClient.connect(workers.sagaConfig);
  return { client: sagas.temporal, sagas, close: () => sagas.close() };
}

/** A new order that succeeds: its own customer (so its own intent), one widget, a card that is charged. */
export function freshOrder(): OrderInput {
  return { customer: `bench-${randomUUID()}`, items: [{ sku: 'widget', quantity: 1, priceCents: 1000 }], payment: { card: '4242424242424242' } };
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
