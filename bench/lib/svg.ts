/** A grouped bar chart as a standalone SVG: one group per case, one bar per contender, min–max whiskers. */
import { formatNumber, type BenchResult } from './report';

/**
 * Baselines are grey (a darker grey for each further one: a benchmark whose cases have different
 * baselines); the others take the palette in order (so `ours`, listed after the baseline, is blue).
 */
const BASELINE_COLORS = ['#9ca3af', '#4b5563', '#d1d5db'];
const PALETTE = ['#2563eb', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6'];
const WIDTH = 760;
const HEIGHT = 380;
/** Narrowest group of bars: the chart widens beyond WIDTH when its cases need it. */
const MIN_GROUP_WIDTH = 110;
const MARGIN = { top: 70, right: 20, bottom: 50, left: 70 };
const LEGEND_ROW = 16;
/** Rough width of a character of the 11 px legend font, to wrap the legend. */
const CHAR_WIDTH = 6.5;

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);
}

/** A value axis: where a value lies (0 at the bottom, 1 at the top) and the ticks to draw. */
interface Axis {
  at: (v: number) => number;
  ticks: number[];
  /** Decimals of a tick label. */
  digits: (tick: number) => number;
}

/** A linear axis from 0 to a round maximum, ticks every 1, 2 or 5 × 10^n. */
function linearAxis(max: number): Axis {
  if (!(max > 0)) return { at: (v) => v, ticks: [0, 0.25, 0.5, 0.75, 1], digits: () => 2 };
  const rough = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= rough)!;
  const top = Math.ceil(max / step) * step;
  const ticks: number[] = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(v);
  return { at: (v) => v / top, ticks, digits: () => (step < 1 ? 2 : 0) };
}

/** A log axis from the power of ten at or below `min` to the one at or above `max`, a tick per power. */
function logAxis(min: number, max: number): Axis {
  const low = Math.floor(Math.log10(min > 0 ? min : 1));
  const high = Math.max(low + 1, Math.ceil(Math.log10(max > 0 ? max : 10)));
  const ticks = Array.from({ length: high - low + 1 }, (_, i) => 10 ** (low + i));
  return {
    at: (v) => (v > 0 ? Math.min(1, Math.max(0, (Math.log10(v) - low) / (high - low))) : 0),
    ticks,
    digits: (tick) => Math.max(0, -Math.round(Math.log10(tick))),
  };
}

/** The chart of `result`'s chart metric, as SVG text. */
export function barChartSvg(result: BenchResult): string {
  const column = result.columns.find((c) => c.metric === result.chartMetric);
  if (!column) throw new Error(`${result.name}: no column ${result.chartMetric}`);
  const cases = [...new Set(result.rows.map((r) => r.case))];
  const contenders = [...new Set(result.rows.map((r) => r.contender))];
  const baselines = [...new Set(result.rows.filter((r) => r.baseline).map((r) => r.contender))];
  const others = contenders.filter((name) => !baselines.includes(name));
  const colorOf = (name: string) =>
    baselines.includes(name) ? BASELINE_COLORS[baselines.indexOf(name) % BASELINE_COLORS.length]! : PALETTE[others.indexOf(name) % PALETTE.length]!;
  const value = (caseName: string, contender: string) =>
    result.rows.find((r) => r.case === caseName && r.contender === contender)?.figures.find((f) => f.metric === column.metric);
  const figures = result.rows.flatMap((r) => r.figures.filter((f) => f.metric === column.metric));
  const max = Math.max(...figures.map((f) => f.max));
  const axis = result.chartScale === 'log' ? logAxis(Math.min(...figures.map((f) => f.min)), max) : linearAxis(max);
  const log = result.chartScale === 'log';

  const width = Math.max(WIDTH, MARGIN.left + MARGIN.right + cases.length * MIN_GROUP_WIDTH);
  // The legend wraps onto as many rows as it needs; the plot starts below it.
  const legend: { name: string; x: number; row: number }[] = [];
  let x = MARGIN.left;
  let row = 0;
  for (const name of contenders) {
    const w = 24 + name.length * CHAR_WIDTH;
    if (x > MARGIN.left && x + w > width - MARGIN.right) {
      x = MARGIN.left;
      row++;
    }
    legend.push({ name, x, row });
    x += w;
  }
  const top = MARGIN.top + row * LEGEND_ROW;
  const height = HEIGHT + row * LEGEND_ROW;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - top - MARGIN.bottom;
  const y = (v: number) => top + plotH - axis.at(v) * plotH;
  const groupW = plotW / cases.length;

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${MARGIN.left}" y="20" font-size="14" font-weight="bold">${escapeXml(result.title)}</text>`,
    `<text x="${MARGIN.left}" y="36" fill="#555">${escapeXml(`${column.label}${log ? ' (log scale)' : ''}, median of rounds (${column.better} is better); whiskers: min–max`)}</text>`,
  ];
  for (const item of legend) {
    const ly = 46 + item.row * LEGEND_ROW;
    out.push(`<rect x="${item.x}" y="${ly}" width="10" height="10" fill="${colorOf(item.name)}"/>`);
    out.push(`<text x="${item.x + 14}" y="${ly + 9}">${escapeXml(item.name)}</text>`);
  }
  for (const tick of axis.ticks) {
    out.push(`<line x1="${MARGIN.left}" x2="${width - MARGIN.right}" y1="${y(tick).toFixed(1)}" y2="${y(tick).toFixed(1)}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${MARGIN.left - 6}" y="${(y(tick) + 4).toFixed(1)}" text-anchor="end" fill="#555">${formatNumber(tick, axis.digits(tick))}</text>`);
  }
  const bottom = top + plotH;
  cases.forEach((caseName, g) => {
    // Only the contenders this case has take a place in its group, in the order of its rows.
    const present = result.rows.filter((r) => r.case === caseName && value(caseName, r.contender) !== undefined).map((r) => r.contender);
    const barW = Math.min(40, (groupW * 0.8) / Math.max(1, present.length));
    const groupX = MARGIN.left + g * groupW + (groupW - barW * present.length) / 2;
    present.forEach((contender, i) => {
      const f = value(caseName, contender)!;
      const bx = groupX + i * barW;
      out.push(`<rect x="${bx.toFixed(1)}" y="${y(f.median).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(bottom - y(f.median)).toFixed(1)}" fill="${colorOf(contender)}"/>`);
      const cx = (bx + (barW - 2) / 2).toFixed(1);
      out.push(`<line x1="${cx}" x2="${cx}" y1="${y(f.max).toFixed(1)}" y2="${y(f.min).toFixed(1)}" stroke="#111" stroke-width="1"/>`);
      out.push(`<text x="${cx}" y="${(y(f.max) - 4).toFixed(1)}" text-anchor="middle" font-size="9">${formatNumber(f.median, column.digits)}</text>`);
    });
    // A long case name ("DUPLICATE, 64 in flight") goes on two lines, split at its comma.
    const labelX = (MARGIN.left + g * groupW + groupW / 2).toFixed(1);
    caseName.split(', ').forEach((line, i) => {
      out.push(`<text x="${labelX}" y="${bottom + 18 + i * 13}" text-anchor="middle">${escapeXml(line)}</text>`);
    });
  });
  out.push(`<line x1="${MARGIN.left}" x2="${width - MARGIN.right}" y1="${bottom}" y2="${bottom}" stroke="#111"/>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
