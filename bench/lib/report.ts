/**
 * What every benchmark returns, and how results become the stdout table and the JSON file. Every
 * figure carries its ratio to the baseline row of the same case, measured in the same run.
 */
import { spread, type Spread } from './stats';

/** One measured figure of a row (e.g. throughput, p50), across rounds. */
export interface Figure extends Spread {
  /** Key of the column it belongs to (see {@link Column}). */
  metric: string;
  /**
   * Ratio to the baseline row of the same case and metric: the median of the per-round ratios (each
   * round runs the baseline and this contender seconds apart, so drift on a shared machine cancels
   * out); absent on the baseline itself.
   */
  ratio?: number;
}

/** A column of a benchmark's table. */
export interface Column {
  metric: string;
  /** Header, with its unit, e.g. `cycles/s`. */
  label: string;
  /** Which way is better, for the reader and for the chart. */
  better: 'higher' | 'lower';
  /** Decimal places when printed. */
  digits: number;
}

/** The p50 and p99 columns (`p50 ms`, `p99 ms`: lower is better) with `digits` decimals. */
export function latencyColumns(digits: number): Column[] {
  return [
    { metric: 'p50', label: 'p50 ms', better: 'lower', digits },
    { metric: 'p99', label: 'p99 ms', better: 'lower', digits },
  ];
}

/** The columns of the benchmarks that time an answer of SagaClient.start: p50 and p99 (ms), answers/s. */
export const ANSWER_COLUMNS: Column[] = [...latencyColumns(3), { metric: 'throughput', label: 'answers/s', better: 'higher', digits: 0 }];

/** One contender in one case (e.g. `ours` at 64 clients). */
export interface Row {
  case: string;
  contender: string;
  /** The row the others in its case are divided by. */
  baseline: boolean;
  figures: Figure[];
}

/** A target of the issue, judged on this run's medians. */
export interface TargetCheck {
  case: string;
  contender: string;
  /** What is required, e.g. `≥ 0.60× limit`. */
  requirement: string;
  /** What was measured, e.g. `0.63×`. */
  measured: string;
  met: boolean;
}

/** The outcome of one benchmark. */
export interface BenchResult {
  /** File-friendly name, e.g. `rms-reserve`. */
  name: string;
  title: string;
  /** What the baseline row is. */
  baseline: string;
  /** How it was measured, in a sentence or two (printed under the table). */
  method: string;
  columns: Column[];
  rows: Row[];
  targets: TargetCheck[];
  /** The metric the chart shows. */
  chartMetric: string;
  /** The chart's value axis: `log` when the figures span orders of magnitude. @default linear */
  chartScale?: 'linear' | 'log';
  /** Lines printed under the table: where the time goes (see {@link cpuNote}). */
  notes?: string[];
  /** Anything else worth keeping in the JSON (settings, raw tool output figures). */
  details?: Record<string, unknown>;
  /** 1-minute load average of the machine before and after the benchmark (filled in by the harness). */
  load?: { start: number; end: number };
}

/** The machine and software a run measured. */
export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  os: string;
  node: string;
  redis: string;
  postgres: string;
  temporalCli: string;
  /** 1-minute load average when the run started and when it ended: other work on the machine skews figures. */
  loadAverage: { start: number; end: number };
}

/** The whole JSON document. */
export interface RunReport {
  startedAt: string;
  durationS: number;
  mode: 'full' | 'quick';
  command: string;
  machine: Machine;
  benchmarks: BenchResult[];
}

/**
 * The median of `figure`'s per-round ratios to `base` (round i to round i); the ratio of the medians
 * when the round counts differ (a constant baseline).
 */
export function roundRatio(figure: Spread, base: Spread): number {
  if (figure.rounds.length !== base.rounds.length || base.rounds.some((v) => !(v > 0))) return figure.median / base.median;
  return spread(figure.rounds.map((v, i) => v / base.rounds[i]!)).median;
}

/** Fills in every figure's ratio to the baseline row of its case (see {@link Figure.ratio}). */
export function withRatios(rows: Row[]): Row[] {
  return rows.map((row) => {
    const base = rows.find((r) => r.case === row.case && r.baseline);
    if (!base || row.baseline) return row;
    return {
      ...row,
      figures: row.figures.map((f) => {
        const b = base.figures.find((x) => x.metric === f.metric);
        return b && b.median > 0 ? { ...f, ratio: roundRatio(f, b) } : f;
      }),
    };
  });
}

/** The figure `metric` of the row `contender` in `caseName`, or a clear error. */
export function figureOf(rows: Row[], caseName: string, contender: string, metric: string): Figure {
  const f = rows.find((r) => r.case === caseName && r.contender === contender)?.figures.find((x) => x.metric === metric);
  if (!f) throw new Error(`no ${metric} figure for ${contender} at ${caseName}`);
  return f;
}

/** `metric` of `contender` against `other` in `caseName`, round by round (see {@link roundRatio}). */
export function ratioOf(rows: Row[], caseName: string, contender: string, other: string, metric: string): number {
  return roundRatio(figureOf(rows, caseName, contender, metric), figureOf(rows, caseName, other, metric));
}

/** The ratio of `metric` of `contender` to the baseline row of `caseName` (see {@link Figure.ratio}); NaN where there is none. */
export function baselineRatio(rows: Row[], caseName: string, contender: string, metric: string): number {
  return figureOf(rows, caseName, contender, metric).ratio ?? Number.NaN;
}

/** A target judged on a ratio (`met` says whether `ratio` meets `requirement`), printed as a ratio. */
export function ratioTarget(caseName: string, contender: string, requirement: string, ratio: number, met: boolean): TargetCheck {
  return { case: caseName, contender, requirement, measured: formatRatio(ratio), met };
}

/** A number with thousands separators and `digits` decimals. */
export function formatNumber(value: number, digits: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** A ratio: two significant digits below 10, whole numbers above. */
export function formatRatio(ratio: number): string {
  if (!Number.isFinite(ratio)) return 'n/a';
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio >= 1 ? ratio.toFixed(2) : ratio.toPrecision(2)}×`;
}

/** `median ±spread% (ratio)`: the spread is half the min–max range across rounds, relative to the median. */
function formatFigure(f: Figure, column: Column): string {
  const half = f.median > 0 && f.max > f.min ? ((f.max - f.min) / 2 / f.median) * 100 : undefined;
  const spreadText = half === undefined ? '' : ` ±${half < 10 ? half.toFixed(1) : half.toFixed(0)}%`;
  const ratioText = f.ratio === undefined ? '' : ` (${formatRatio(f.ratio)})`;
  return `${formatNumber(f.median, column.digits)}${spreadText}${ratioText}`;
}

/** One benchmark as a Markdown table, with its method and baseline under it. */
export function renderTable(result: BenchResult): string {
  const header = ['case', 'contender', ...result.columns.map((c) => `${c.label} ${c.better === 'higher' ? '↑' : '↓'}`), 'target'];
  const load = result.load ? ` (load average ${result.load.start.toFixed(1)} → ${result.load.end.toFixed(1)})` : '';
  const lines = [`### ${result.title}${load}`, '', `| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`];
  for (const row of result.rows) {
    const cells = result.columns.map((c) => {
      const f = row.figures.find((x) => x.metric === c.metric);
      return f ? formatFigure(f, c) : '–';
    });
    const checks = result.targets.filter((t) => t.case === row.case && t.contender === row.contender);
    const target = checks.map((t) => `${t.requirement}: ${t.measured}, **${t.met ? 'met' : 'not met'}**`).join('; ');
    lines.push(`| ${[row.case, row.baseline ? `${row.contender} (baseline)` : row.contender, ...cells, target || ''].join(' | ')} |`);
  }
  // Targets on something other than a row (e.g. a count over the whole benchmark) follow the table.
  const rowless = result.targets.filter((t) => !result.rows.some((r) => r.case === t.case && r.contender === t.contender));
  if (rowless.length > 0) lines.push('', ...rowless.map((t) => `Target, ${t.case}, ${t.contender}: ${t.requirement}: ${t.measured}, **${t.met ? 'met' : 'not met'}**`));
  lines.push('', `Baseline: ${result.baseline}. ${result.method}`);
  for (const note of result.notes ?? []) lines.push('', note);
  return lines.join('\n');
}

/**
 * A line saying where the CPU time went: the `cpu:<component>` figures (see {@link withCpu}) of each
 * contender of `caseName`, medians over the rounds.
 */
export function cpuNote(rows: Row[], caseName: string, unit: 'µs' | 'ms', per: string): string {
  const parts = rows
    .filter((r) => r.case === caseName)
    .map((r) => {
      const cpu = r.figures.filter((f) => f.metric.startsWith('cpu:')).map((f) => `${f.metric.slice(4)} ${formatNumber(f.median, unit === 'µs' ? 0 : 1)}`);
      return cpu.length > 0 ? `${r.contender}: ${cpu.join(', ')}` : undefined;
    })
    .filter((p) => p !== undefined);
  return `CPU ${unit} per ${per} at ${caseName}, by process (median of rounds): ${parts.join('; ')}.`;
}

/** Adds `usage` (CPU ms by component) to `figures` as `cpu:<component>` per operation, in µs or ms. */
export function withCpu<T extends Record<string, number>>(figures: T, usage: Record<string, number>, ops: number, unit: 'µs' | 'ms'): T {
  const scale = unit === 'µs' ? 1000 : 1;
  const cpu = Object.fromEntries(Object.entries(usage).map(([k, ms]) => [`cpu:${k}`, ops > 0 ? (ms * scale) / ops : Number.NaN]));
  return { ...figures, ...cpu };
}

/** The machine line printed above the tables. */
export function renderMachine(m: Machine): string {
  return (
    `Machine: ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}, Redis ${m.redis}, PostgreSQL ${m.postgres}, Temporal CLI ${m.temporalCli}; ` +
    `1-minute load average ${m.loadAverage.start.toFixed(1)} at the start, ${m.loadAverage.end.toFixed(1)} at the end.`
  );
}

/** The full stdout report: machine, legend, one table per benchmark. */
export function renderReport(report: RunReport): string {
  return [
    `## Benchmark results (${report.mode}, ${report.startedAt}, ${report.durationS.toFixed(0)} s)`,
    '',
    renderMachine(report.machine),
    '',
    'Each cell: median over the rounds ±half the min–max range across rounds, and in brackets the ratio to the baseline row of the same case: the median of the per-round ratios (same run, seconds apart). ↑ higher is better, ↓ lower is better.',
    '',
    ...report.benchmarks.flatMap((b) => [renderTable(b), '']),
  ].join('\n');
}
