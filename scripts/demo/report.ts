/**
 * The demo's summary, as printed: one row per request, then what the gate counted. Rejected requests
 * have no saga and so no UI link; the gate's counts are where they are counted.
 */
import { REJECTED_AT_GATE, type DemoRow } from './scenario';

/** The columns of the summary table, in order (docs/demo.md's example table shows the same). */
export const DEMO_COLUMNS = ['request', 'intent', 'answer', 'answer ms', 'fencing token', 'outcome', 'as expected', 'Temporal UI'] as const;

/** The summary table, plain text; the UI link last so a narrow terminal wraps only that. */
export function formatTable(rows: readonly DemoRow[]): string {
  const shortIntent = (k: string) => (k.length > 18 ? `${k.slice(0, 17)}…` : k);
  const header = [...DEMO_COLUMNS];
  const numeric = header.indexOf('answer ms');
  const cells = rows.map((r) => [
    r.request,
    shortIntent(r.intentKey),
    r.answer,
    r.answerMs === undefined ? '-' : r.answerMs.toFixed(1),
    r.fencingToken ?? '-',
    `${r.outcome}${r.reason && r.reason !== r.outcome ? ` (${r.reason})` : ''}`,
    r.ok ? 'yes' : `NO: ${r.expected}`,
    r.url ?? '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const pad = (v: string, i: number) => (i === numeric ? v.padStart(widths[i]!) : v.padEnd(widths[i]!));
  const line = (c: string[]) => c.map((v, i) => (i === c.length - 1 ? v : pad(v, i))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/**
 * What the gate counted (`SagaClient.gateCounts`: every answer of `start`, retries included), and
 * whether that agrees with the table's requests through the gate. Rejected requests have no saga
 * page, so the gate's counts are where they show up.
 */
export function gateReport(counts: Readonly<Record<string, number>>, rows: readonly DemoRow[]): { text: string; ok: boolean } {
  const viaGate = rows.filter((r) => r.viaGate);
  const mismatches = ['SUCCESS', 'DUPLICATE', 'CONFLICT']
    .map((status) => ({ status, table: viaGate.filter((r) => r.answer === status).length, gate: counts[status] ?? 0 }))
    .filter((m) => m.table !== m.gate);
  const text = [
    `The gate's answers (SagaClient.gateCounts): ${Object.entries(counts).map(([status, n]) => `${status} ${n}`).join(', ')}.`,
    `Requests ${REJECTED_AT_GATE} (DUPLICATE, CONFLICT) start no saga, so they have no page in the Temporal UI:`,
    'the gate\'s counts are where they are counted.',
    ...mismatches.map((m) => `NO: the gate counted ${m.gate} ${m.status} answers, the table shows ${m.table}`),
  ].join('\n');
  return { text, ok: mismatches.length === 0 };
}
