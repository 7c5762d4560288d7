/**
 * What `saga list` and `saga status` print without `--json`: a table with its column headers, and a
 * saga's state in a few lines, saying "planning" rather than an empty intent key.
 */
import type { SagaSummary } from './client';
import type { SagaState } from './shared';

/** The sagas as a table: a header, then one row each, columns two spaces apart; `no sagas` for none. */
export function sagaListText(rows: readonly Pick<SagaSummary, 'workflowId' | 'status' | 'phase' | 'outcome'>[]): string {
  if (rows.length === 0) return 'no sagas';
  const table = [['WORKFLOW ID', 'STATUS', 'PHASE', 'OUTCOME'], ...rows.map((r) => [r.workflowId, r.status, r.phase ?? '-', r.outcome ?? '-'])];
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)));
  return table.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')).join('\n');
}

/** A saga's status in lines: workflow status and phase, its intent (or that it is still being planned), steps, errors and UI link. */
export function sagaStatusText(s: { workflowId: string; status: string; state: SagaState; url: string }): string {
  const { state } = s;
  // The intent key comes with the saga's plan: none yet while it plans, none at all if planning refused it.
  const intent = state.intentKey
    ? `intent ${state.intentKey}${state.fencingToken ? `, fencing token ${state.fencingToken}` : ''}${state.entityId ? `, entity ${state.entityId}` : ''}`
    : s.status === 'RUNNING'
      ? 'intent: planning (the worker has not derived it yet)'
      : 'intent: none (the saga ended before it was planned)';
  return [
    `${s.workflowId}: ${s.status}, phase ${state.phase}${state.outcome ? `, outcome ${state.outcome}` : ''}${state.reason ? ` (${state.reason})` : ''}`,
    intent,
    `steps done: ${state.stepsDone.join(', ') || '-'}; compensations run: ${state.compensationsRun.join(', ') || '-'}`,
    ...state.errors.map((e) => `error at ${e.at}: ${e.type ? `[${e.type}] ` : ''}${e.message}`),
    `UI: ${s.url}`,
  ].join('\n');
}
