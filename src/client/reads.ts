/**
 * SagaClient's reads: a saga's result and status, and the listing of sagas by their search
 * attributes. An ended saga is read from its history, with no worker; a saga of another owner than
 * the call's scope is answered as a missing one (see ownedDescription).
 */
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { SagaInputError } from '../sagas';
import { ErrorType, RESERVATION_SAGA_WORKFLOW, SagaAbort, SagaOutcome, SagaPhase, type SagaEnd, type SagaMemo, type SagaState } from '../shared/saga';
import { SagaEndedError, ownedDescription, temporalClientLibrary, temporalDefinitions, type ClientCore, type OwnerScope } from './core';

/** One saga in a listing. */
export interface SagaSummary {
  workflowId: string;
  runId: string;
  status: string;
  type?: string;
  phase?: string;
  outcome?: string;
  intentKey?: string;
  startTime: string;
}

/** Filters of {@link SagaClient.list}. */
export interface ListFilter extends OwnerScope {
  type?: string;
  outcome?: string;
  phase?: string;
  /** At most this many (newest first). @default 100 */
  limit?: number;
  /** Only sagas whose workflow id starts with one of these (e.g. one HTTP client's `order-<client>.`). */
  workflowIdPrefixes?: readonly string[];
}

const VISIBILITY_VALUE = /^[A-Za-z0-9_.:-]{1,200}$/;

/** See {@link SagaClient.result}. */
export async function result(core: ClientCore, workflowId: string, options: OwnerScope = {}): Promise<SagaState> {
  const owner = core.scope(options);
  if (owner !== undefined) await ownedDescription((await core.temporalClient()).workflow.getHandle(workflowId), owner);
  return resultOf(core, workflowId);
}

/** The result (see SagaClient.result) of a saga the client already knows it may read. */
export async function resultOf(core: ClientCore, workflowId: string): Promise<SagaState> {
  try {
    return (await (await core.temporalClient()).workflow.getHandle(workflowId).result()) as SagaState;
  } catch (err) {
    const rejected = await rejectedState(err);
    if (rejected) return rejected;
    throw err;
  }
}

/** The final state of an ended saga, from its history (no worker needed). */
export async function finalState(core: ClientCore, workflowId: string): Promise<SagaState> {
  try {
    return await resultOf(core, workflowId);
  } catch (err) {
    const { WorkflowFailedError } = await temporalClientLibrary();
    if (err instanceof WorkflowFailedError) {
      throw new SagaEndedError(workflowId, 'FAILED', `saga ${workflowId} failed without an answer: ${err.cause?.message ?? err.message}`);
    }
    throw err;
  }
}

/** See {@link SagaClient.status}. */
export async function status(core: ClientCore, workflowId: string, options: OwnerScope = {}): Promise<{ workflowId: string; status: string; state: SagaState; url: string }> {
  const owner = core.scope(options);
  const [client, { stateQuery }] = await Promise.all([core.temporalClient(), temporalDefinitions()]);
  const handle = client.workflow.getHandle(workflowId);
  const description = await ownedDescription(handle, owner);
  const status = description.status.name;
  const state = status === 'RUNNING' ? await handle.query(stateQuery) : await endedState(core, workflowId, description);
  return { workflowId, status, state, url: core.url(workflowId) };
}

/** An ended saga's final state, from its result, or from what its execution records when it has none. */
export async function endedState(core: ClientCore, workflowId: string, description: WorkflowExecutionDescription): Promise<SagaState> {
  if (description.status.name === 'COMPLETED' || description.status.name === 'FAILED') {
    try {
      return await resultOf(core, workflowId);
    } catch (err) {
      const { WorkflowFailedError } = await temporalClientLibrary();
      if (!(err instanceof WorkflowFailedError)) throw err;
    }
  }
  return recordedState(description);
}

/** See {@link SagaClient.list}. */
export async function list(core: ClientCore, filter: ListFilter = {}): Promise<SagaSummary[]> {
  const scope = core.scope(filter);
  const clauses = [`WorkflowType = "${RESERVATION_SAGA_WORKFLOW}"`, `TaskQueue = "${core.options.taskQueue}"`];
  for (const [name, value] of [
    ['SagaType', filter.type],
    ['SagaOutcome', filter.outcome],
    ['SagaPhase', filter.phase],
  ] as const) {
    if (value === undefined) continue;
    if (!VISIBILITY_VALUE.test(value)) throw new SagaInputError(`invalid ${name} filter ${JSON.stringify(value)}`, ErrorType.INVALID_INPUT);
    clauses.push(`${name} = "${value}"`);
  }
  if (filter.workflowIdPrefixes !== undefined) {
    const prefixes = filter.workflowIdPrefixes.map((prefix) => {
      if (!VISIBILITY_VALUE.test(prefix)) throw new SagaInputError(`invalid workflow id prefix ${JSON.stringify(prefix)}`, ErrorType.INVALID_INPUT);
      return `WorkflowId STARTS_WITH "${prefix}"`;
    });
    // No prefix: nothing can match (an empty OR would match everything).
    if (prefixes.length === 0) return [];
    clauses.push(`(${prefixes.join(' OR ')})`);
  }
  const limit = filter.limit ?? 100;
  const out: SagaSummary[] = [];
  const [client, { INTENT_KEY, SAGA_OUTCOME, SAGA_PHASE, SAGA_TYPE }] = await Promise.all([core.temporalClient(), temporalDefinitions()]);
  for await (const wf of client.workflow.list({ query: clauses.join(' AND '), pageSize: Math.min(limit, 1000) })) {
    const owner = ((wf.memo ?? {}) as SagaMemo).owner;
    if (scope !== undefined && owner !== undefined && owner !== scope) continue;
    const attrs = wf.typedSearchAttributes;
    out.push({
      workflowId: wf.workflowId,
      runId: wf.runId,
      status: wf.status.name,
      type: attrs.get(SAGA_TYPE),
      phase: attrs.get(SAGA_PHASE),
      outcome: attrs.get(SAGA_OUTCOME),
      intentKey: attrs.get(INTENT_KEY),
      startTime: wf.startTime.toISOString(),
    });
    if (out.length >= limit) break;
  }
  return out;
}

/**
 * How a saga ended, from its workflow's status and its `SagaOutcome` search attribute; undefined
 * while it runs. A REJECTED saga fails its workflow (see REJECTED_FAILS_PATCH).
 */
export function endOf(status: string, outcome: string | undefined): SagaEnd | undefined {
  switch (status) {
    case 'RUNNING':
      return undefined;
    case 'COMPLETED':
      return outcome as SagaOutcome | undefined;
    case 'FAILED':
      return outcome === SagaOutcome.REJECTED ? SagaOutcome.REJECTED : SagaAbort.FAILED;
    case 'TERMINATED':
      return SagaAbort.TERMINATED;
    case 'TIMED_OUT':
      return SagaAbort.TIMED_OUT;
    default:
      return SagaAbort.CANCELED;
  }
}

/**
 * What an ended saga's execution records when the saga recorded no state of its own (terminated,
 * timed out, or failed before its plan): its memo and search attributes, its end, and an error
 * saying so.
 */
export async function recordedState(description: WorkflowExecutionDescription): Promise<SagaState> {
  const { INTENT_KEY, SAGA_PHASE, SAGA_TYPE } = await temporalDefinitions();
  const attributes = description.typedSearchAttributes;
  const memo = (description.memo ?? {}) as SagaMemo;
  const end = endOf(description.status.name, undefined) ?? SagaAbort.FAILED;
  const phase = attributes.get(SAGA_PHASE) as SagaPhase | undefined;
  return {
    type: attributes.get(SAGA_TYPE) ?? '',
    idempotencyKey: '',
    requestHash: memo.requestHash ?? '',
    intentKey: attributes.get(INTENT_KEY) ?? '',
    phase: phase ?? SagaPhase.RESERVING,
    outcome: end,
    ...(memo.reservation ? { reservation: memo.reservation } : {}),
    stepsDone: [],
    compensationsRun: [],
    errors: [{ at: phase ?? SagaPhase.RESERVING, type: end, message: `the saga's workflow ended ${end} before the saga recorded its state; its history shows the steps it ran` }],
  };
}

/** The final state a REJECTED saga failed its workflow with, when `err` is that failure. */
async function rejectedState(err: unknown): Promise<SagaState | undefined> {
  const { WorkflowFailedError, ApplicationFailure } = await temporalClientLibrary();
  if (!(err instanceof WorkflowFailedError)) return undefined;
  const cause = err.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== ErrorType.SAGA_REJECTED) return undefined;
  const [state] = cause.details ?? [];
  return typeof state === 'object' && state !== null ? (state as SagaState) : undefined;
}
