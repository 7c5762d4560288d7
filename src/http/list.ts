/**
 * A caller's own sagas, by search attributes: SagaClient.list's query, restricted to workflow ids in
 * the caller's namespace (`WorkflowId STARTS_WITH "<type>-<client id>."`), so a listing is never
 * filled with, or cut short by, other clients' sagas.
 */
import type { Client } from '@temporalio/client';
import type { SagaSummary } from '../client';
import { INTENT_KEY, SAGA_OUTCOME, SAGA_PHASE, SAGA_TYPE } from '../shared/search-attributes';
import { RESERVATION_SAGA_WORKFLOW } from '../shared/saga';

/** What {@link listSagas} lists. */
export interface ListQuery {
  taskQueue: string;
  /** Workflow-id prefixes, any of which a saga's id starts with (at least one). */
  workflowIdPrefixes: string[];
  outcome?: string;
  phase?: string;
  limit: number;
}

const VISIBILITY_VALUE = /^[A-Za-z0-9_.:-]{1,200}$/;

/** The sagas matching `query`, newest first. @throws TypeError on a value a visibility query cannot hold. */
export async function listSagas(temporal: Client, query: ListQuery): Promise<SagaSummary[]> {
  const quoted = (value: string) => {
    if (!VISIBILITY_VALUE.test(value)) throw new TypeError(`invalid list filter ${JSON.stringify(value)}`);
    return `"${value}"`;
  };
  const clauses = [
    `WorkflowType = ${quoted(RESERVATION_SAGA_WORKFLOW)}`,
    `TaskQueue = ${quoted(query.taskQueue)}`,
    `(${query.workflowIdPrefixes.map((p) => `WorkflowId STARTS_WITH ${quoted(p)}`).join(' OR ')})`,
  ];
  if (query.outcome !== undefined) clauses.push(`SagaOutcome = ${quoted(query.outcome)}`);
  if (query.phase !== undefined) clauses.push(`SagaPhase = ${quoted(query.phase)}`);
  const out: SagaSummary[] = [];
  for await (const wf of temporal.workflow.list({ query: clauses.join(' AND '), pageSize: Math.min(query.limit, 1000) })) {
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
    if (out.length >= query.limit) break;
  }
  return out;
}
