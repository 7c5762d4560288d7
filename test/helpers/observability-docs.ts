/** The PromQL of docs/observability/ (the Grafana dashboard and the alerting rules), for the tests that check it. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

const ROOT = path.resolve(__dirname, '../..');

interface Dashboard {
  panels: { type: string; title: string; targets?: { expr: string }[] }[];
  templating: { list: { definition?: string }[] };
}
interface AlertRules {
  groups: { rules: { alert: string; expr: string }[] }[];
}

export const DASHBOARD = JSON.parse(readFileSync(path.join(ROOT, 'docs/observability/grafana-dashboard.json'), 'utf8')) as Dashboard;
export const ALERTS = parse(readFileSync(path.join(ROOT, 'docs/observability/prometheus-alerts.yml'), 'utf8')) as AlertRules;

/** Every PromQL expression of the dashboard (panels and variables) and of the alerting rules. */
export const EXPRESSIONS: readonly string[] = [
  ...DASHBOARD.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
  ...DASHBOARD.templating.list.flatMap((v) => (v.definition ? [v.definition] : [])),
  ...ALERTS.groups.flatMap((g) => g.rules.map((r) => r.expr)),
];

/** The series names with `prefix` (e.g. `saga_`, `temporal_`) that an expression reads. */
export function seriesOf(expr: string, prefix: string): string[] {
  return [...expr.matchAll(new RegExp(`\\b${prefix}[a-z_]+`, 'g'))].map((m) => m[0]).filter((name) => name !== 'saga_type');
}

/** The label names an expression groups or matches by. */
export function labelsUsed(expr: string): string[] {
  const grouped = [...expr.matchAll(/\bby \(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((l) => l.trim()));
  const matched = [...expr.matchAll(/\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/([a-z_]+)\s*(?:=~|!=|!~|=)/g)].map((l) => l[1]!));
  return [...grouped, ...matched].filter((l) => l !== '');
}
