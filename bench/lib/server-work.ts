/**
 * What the Temporal server did for one workflow of each kind, from its own counters: the dev server's
 * Prometheus endpoint (`--metrics-port`). Requests it served by API, persistence calls by operation,
 * history tasks by type and commands by type, in the benchmark's namespace. Read around each
 * contender's runs (the server's tail of a run's last workflows included), so they are counted, not
 * timed: they hold on a busy machine, where the server's CPU per workflow moves by a tenth from run
 * to run.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { formatNumber } from './report';
import type { Contender } from './rounds';

/**
 * What the server counts, by family, as a reader would name it. Requests are counted by the service
 * that serves them (the frontend, history and matching each count a request that passes through
 * them); history tasks are the server's own work after a request (transfer, timer and visibility
 * tasks); commands are what workflow tasks asked for. Byte sizes are left out: the server's
 * histograms report each observation as its bucket's upper bound, so their sums overstate by up to 2×.
 */
const SERVER_FAMILIES = {
  service_requests: 'requests',
  persistence_requests: 'persistence calls',
  task_requests: 'history tasks',
  command: 'commands',
} as const;
type Family = keyof typeof SERVER_FAMILIES;

/** A counter's value by `family service operation`, other labels summed, e.g. `persistence_requests history UpdateWorkflowExecution`. */
export type ServerCounters = Map<string, number>;

/** Parses Prometheus text: the {@link SERVER_FAMILIES} in `namespace`, summed by family, service and operation (a command by its type). */
export function parseServerCounters(text: string, namespace: string): ServerCounters {
  const out: ServerCounters = new Map();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || !(m[1]! in SERVER_FAMILIES)) continue;
    const labels: Record<string, string> = Object.fromEntries([...m[2]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, k = '', v = '']) => [k, v]));
    if (labels.namespace !== namespace) continue;
    const key = [m[1], labels.service_name ?? '', labels.commandType ?? labels.operation ?? ''].join(' ');
    out.set(key, (out.get(key) ?? 0) + Number(m[3]));
  }
  return out;
}

/** `after − before`, leaving out what did not move. */
export function counterDelta(before: ServerCounters, after: ServerCounters): ServerCounters {
  const out: ServerCounters = new Map();
  for (const [key, value] of after) {
    const d = value - (before.get(key) ?? 0);
    if (d !== 0) out.set(key, d);
  }
  return out;
}

/** Reads the server's counters from `url` (its `/metrics`). */
export function serverCounterReader(url: string, namespace: string): () => Promise<ServerCounters> {
  return async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`server metrics at ${url}: HTTP ${res.status}`);
    return parseServerCounters(await res.text(), namespace);
  };
}

/**
 * How long after a run its counters are read: the server's metrics scope reports to its endpoint
 * once a second (measured on the dev server: a counter moves in steps a second apart), so a reading
 * 1.25 s after a run's last workflow ended includes a report made at least 0.25 s after it, when its
 * last tasks (closing it in visibility, its last transfer tasks) have run. Work later than that lands
 * in the next contender's reading.
 */
export const SERVER_REPORT_WAIT_MS = 1_250;

/** What the server did over a contender's runs, and for how many workflows. */
export interface ServerWork {
  workflows: number;
  counters: ServerCounters;
}

/**
 * The server's counters around each run of a case's contenders, added up by contender. Runs follow
 * one another, so one reading, {@link SERVER_REPORT_WAIT_MS} after a run, ends that run's interval
 * and starts the next's; make one per case, since what happens between cases (histories read,
 * workers scaled) is no contender's.
 */
export class ServerWorkMeter {
  readonly #read: () => Promise<ServerCounters>;
  #last: ServerCounters | undefined;
  /** By contender name. */
  readonly work = new Map<string, ServerWork>();

  constructor(read: () => Promise<ServerCounters>) {
    this.#read = read;
  }

  /**
   * `contender`, its runs counted: `completed()` is a running count of the workflows it completed.
   * The waiting for the server's report is outside the contender's run, so its own figures (CPU,
   * throughput) do not include it.
   */
  wrap(contender: Contender, completed: () => number): Contender {
    return {
      name: contender.name,
      run: async (round) => {
        const before = this.#last ?? (await this.#read());
        const done = completed();
        const figures = await contender.run(round);
        await delay(SERVER_REPORT_WAIT_MS);
        const after = await this.#read();
        this.#last = after;
        const work = this.work.get(contender.name) ?? { workflows: 0, counters: new Map() };
        work.workflows += completed() - done;
        for (const [key, value] of counterDelta(before, after)) work.counters.set(key, (work.counters.get(key) ?? 0) + value);
        this.work.set(contender.name, work);
        return figures;
      },
    };
  }
}

/** Per workflow: each counter of `work` divided by its workflows. */
function perWorkflow(work: ServerWork): Map<string, number> {
  return new Map([...work.counters].map(([key, value]) => [key, work.workflows > 0 ? value / work.workflows : Number.NaN]));
}

/** `work` for the JSON file (a Map does not serialise): the workflows, and each counter per workflow. */
export function serverWorkJson(work: ServerWork): { workflows: number; perWorkflow: Record<string, number> } {
  return { workflows: work.workflows, perWorkflow: Object.fromEntries(perWorkflow(work)) };
}

/** A counter's key as a reader names it: `history UpdateWorkflowExecution (persistence calls)`. */
function counterName(key: string): string {
  const [family, service, operation] = key.split(' ') as [Family, string, string];
  return `${service ? `${service} ` : ''}${operation} (${SERVER_FAMILIES[family]})`;
}

/** The sum of one family's counters in `m`, of one service's when given. */
function familyTotal(m: Map<string, number>, family: Family, service?: string): number {
  let sum = 0;
  for (const [key, value] of m) {
    const [f, s] = key.split(' ');
    if (f === family && (service === undefined || s === service)) sum += value;
  }
  return sum;
}

/** One kind's totals per workflow, in words. */
function totalsText(m: Map<string, number>): string {
  const n = (v: number) => formatNumber(v, 1);
  return (
    `${n(familyTotal(m, 'service_requests'))} requests (frontend ${n(familyTotal(m, 'service_requests', 'frontend'))}, history ${n(familyTotal(m, 'service_requests', 'history'))}, ` +
    `matching ${n(familyTotal(m, 'service_requests', 'matching'))}), ${n(familyTotal(m, 'persistence_requests'))} persistence calls, ` +
    `${n(familyTotal(m, 'task_requests'))} history tasks, ${n(familyTotal(m, 'command'))} commands`
  );
}

/**
 * The server's work per workflow of `subject` against `baseline`, as a line: each kind's totals, then
 * every counter where they differ by at least `minDifference` per workflow, largest difference first.
 */
export function serverWorkText(subjectName: string, subject: ServerWork, baselineName: string, baseline: ServerWork, minDifference = 0.5): string {
  const s = perWorkflow(subject);
  const b = perWorkflow(baseline);
  const differences = [...new Set([...s.keys(), ...b.keys()])]
    .map((key) => ({ key, subject: s.get(key) ?? 0, baseline: b.get(key) ?? 0 }))
    .filter((d) => Math.abs(d.subject - d.baseline) >= minDifference)
    .sort((x, y) => Math.abs(y.subject - y.baseline) - Math.abs(x.subject - x.baseline) || x.key.localeCompare(y.key));
  return (
    `The Temporal server's work per workflow, counted by the server (its metrics endpoint, read ${SERVER_REPORT_WAIT_MS / 1000} s after each run; ` +
    `a request is counted by each service it passes through), over ${subject.workflows} ${subjectName} and ${baseline.workflows} ${baselineName} workflows, warm-up included: ` +
    `${subjectName}: ${totalsText(s)}; ${baselineName}: ${totalsText(b)}. ` +
    `Where they differ by ${formatNumber(minDifference, 1)} or more per workflow (${subjectName} against ${baselineName}): ` +
    (differences.length === 0 ? 'nowhere' : differences.map((d) => `${counterName(d.key)} ${formatNumber(d.subject, 1)} against ${formatNumber(d.baseline, 1)}`).join(', ')) +
    '.'
  );
}
