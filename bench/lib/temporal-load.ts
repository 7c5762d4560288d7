/** Helpers of the Temporal benchmarks: a client on the run's dev server, order inputs, bounded waits. */
import { randomUUID } from 'node:crypto';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { SagaClient } from '../../src/client';
import type { OrderInput } from '../../src/sagas';
import { connectClient } from '../../src/temporal';
import type { WorkerFleet } from './workers';

/** A Temporal client and a SagaClient on the saga workers' task queue; `close` closes the connection. */
export async function connectClients(workers: WorkerFleet): Promise<{ client: Client; sagas: SagaClient; close: () => Promise<void> }> {
  const { temporal, saga } = workers.sagaConfig;
  const connection = await connectClient(temporal);
  const client = new Client({ connection, namespace: temporal.namespace });
  const sagas = new SagaClient({ client, taskQueue: temporal.taskQueue, uiUrl: temporal.uiUrl, timings: { ...saga, compensationAttempts: 5 } });
  return { client, sagas, close: () => connection.close() };
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

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/** Milliseconds of an early answer by phase, read from the saga's history (see {@link answerPhases}). */
export interface AnswerPhases {
  /** Tasks waiting to be taken by a worker poll (workflow and activity tasks, scheduled → started). */
  dispatch: number;
  /** Workflow tasks on the worker, with their round trip (started → completed). */
  workflowTasks: number;
  /** The reserve activity on the worker, with its round trip (started → completed). */
  activity: number;
  /** The first event to the update's completion: the part of the answer the history covers. */
  history: number;
}

/**
 * Splits the time from a saga's start to its reservation answer (the `reservation` update completed)
 * by phase, from the event times of its history.
 */
export async function answerPhases(client: Client, workflowId: string): Promise<AnswerPhases> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const at = (e: HistoryEvent) => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;
  const phases: AnswerPhases = { dispatch: 0, workflowTasks: 0, activity: 0, history: 0 };
  const first = events[0] ? at(events[0]) : 0;
  const times = new Map<number, number>();
  for (const e of events) {
    const t = at(e);
    times.set(Number(e.eventId), t);
    if (e.workflowTaskStartedEventAttributes) phases.dispatch += t - (times.get(Number(e.workflowTaskStartedEventAttributes.scheduledEventId)) ?? t);
    if (e.workflowTaskCompletedEventAttributes) phases.workflowTasks += t - (times.get(Number(e.workflowTaskCompletedEventAttributes.startedEventId)) ?? t);
    if (e.activityTaskStartedEventAttributes) phases.dispatch += t - (times.get(Number(e.activityTaskStartedEventAttributes.scheduledEventId)) ?? t);
    if (e.activityTaskCompletedEventAttributes) phases.activity += t - (times.get(Number(e.activityTaskCompletedEventAttributes.startedEventId)) ?? t);
    if (e.workflowExecutionUpdateCompletedEventAttributes) {
      phases.history = t - first;
      return phases;
    }
  }
  throw new Error(`${workflowId}: no completed update in its history`);
}
