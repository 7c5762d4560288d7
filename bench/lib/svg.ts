/** A grouped bar chart as a standalone SVG: one group per case, one bar per contender, min–max whiskers. */
import { formatNumber, type BenchResult } from './report';

/** The baseline is grey; the others take these in order (so `ours`, listed after it, is blue). */
const BASELINE_COLOR = '#9ca3af';
const PALETTE = ['#2563eb', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6'];
const WIDTH = 760;
const HEIGHT = 380;
const MARGIN = { top: 70, right: 20, bottom: 50, left: 70 };

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);
}

/** A round axis maximum and tick step (1, 2 or 5 × 10^n) covering `max`. */
function niceScale(max: number): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 0.25 };
  const rough = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= rough)!;
  return { top: Math.ceil(max / step) * step, step };
}

/** The chart of `result`'s chart metric, as SVG text. */
export function barChartSvg(result: BenchResult): string {
  const column = result.columns.find((c) => c.metric === result.chartMetric);
  if (!column) throw new Error(`${result.name}: no column ${result.chartMetric}`);
  const cases = [...new Set(result.rows.map((r) => r.case))];
  const contenders = [...new Set(result.rows.map((r) => r.contender))];
  const baselines = new Set(result.rows.filter((r) => r.baseline).map((r) => r.contender));
  const others = contenders.filter((name) => !baselines.has(name));
  const colorOf = (name: string) => (baselines.has(name) ? BASELINE_COLOR : PALETTE[others.indexOf(name) % PALETTE.length]!);
  const value = (caseName: string, contender: string) =>
    result.rows.find((r) => r.case === caseName && r.contender === contender)?.figures.find((f) => f.metric === column.metric);
  const max = Math.max(...result.rows.flatMap((r) => r.figures.filter((f) => f.metric === column.metric).map((f) => f.max)));
  const { top, step } = niceScale(max);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const y = (v: number) => MARGIN.top + plotH - (v / top) * plotH;
  const groupW = plotW / cases.length;
  const barW = Math.min(40, (groupW * 0.8) / contenders.length);

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="11">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${MARGIN.left}" y="20" font-size="14" font-weight="bold">${escapeXml(result.title)}</text>`,
    `<text x="${MARGIN.left}" y="36" fill="#555">${escapeXml(`${column.label}, median of rounds (${column.better} is better); whiskers: min–max`)}</text>`,
  ];
  contenders.forEach((name, i) => {
    const x = MARGIN.left + i * 150;
    out.push(`<rect x="${x}" y="46" width="10" height="10" fill="${colorOf(name)}"/>`);
    out.push(`<text x="${x + 14}" y="55">${escapeXml(name)}</text>`);
  });
  for (let v = 0; v <= top + step / 2; v += step) {
    out.push(`<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${MARGIN.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#555">${formatNumber(v, step < 1 ? 2 : 0)}</text>`);
  }
  cases.forEach((caseName, g) => {
    const groupX = MARGIN.left + g * groupW + (groupW - barW * contenders.length) / 2;
    contenders.forEach((contender, i) => {
      const f = value(caseName, contender);
      if (!f) return;
      const x = groupX + i * barW;
      const color = colorOf(contender);
      out.push(`<rect x="${x.toFixed(1)}" y="${y(f.median).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y(0) - y(f.median)).toFixed(1)}" fill="${color}"/>`);
      const cx = (x + (barW - 2) / 2).toFixed(1);
      out.push(`<line x1="${cx}" x2="${cx}" y1="${y(f.max).toFixed(1)}" y2="${y(f.min).toFixed(1)}" stroke="#111" stroke-width="1"/>`);
      out.push(
        `<text x="${cx}" y="${(y(f.max) - 4).toFixed(1)}" text-anchor="middle" font-size="9">${formatNumber(f.median, column.digits)}</text>`,
      );
    });
    out.push(`<text x="${(MARGIN.left + g * groupW + groupW / 2).toFixed(1)}" y="${HEIGHT - MARGIN.bottom + 18}" text-anchor="middle">${escapeXml(caseName)}</text>`);
  });
  out.push(`<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(0)}" y2="${y(0)}" stroke="#111"/>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
