/**
 * CPU time by component, to say where the time of a benchmark goes: this process, Redis (from INFO
 * cpu, so it works on any host), and, on Linux, process trees read from /proc (the dev server, the
 * worker processes, PostgreSQL's backends).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** One process as /proc shows it. */
interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  /** User + system CPU time so far, ms. */
  cpuMs: number;
  /** User + system CPU time of its children that exited and were waited for (cutime + cstime), ms. */
  reapedMs: number;
}

/** Picks the processes of a component out of all of them. */
export type Selector = (all: Proc[]) => Proc[];

let ticksPerSecond: number | undefined;

function readProcs(): Proc[] {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const procs: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid ... utime stime: comm may hold spaces and parentheses, so split at the last ')'.
    const close = stat.lastIndexOf(')');
    const fields = stat.slice(close + 2).split(' ');
    procs.push({
      pid: Number(name),
      comm: stat.slice(stat.indexOf('(') + 1, close),
      ppid: Number(fields[1]),
      cpuMs: ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000,
      reapedMs: ((Number(fields[13]) + Number(fields[14])) / ticksPerSecond) * 1000,
    });
  }
  return procs;
}

/** The processes `pids` and all their descendants. */
export function treesOf(pids: () => readonly number[]): Selector {
  return (all) => {
    const wanted = new Set(pids());
    let grew = true;
    while (grew) {
      grew = false;
      for (const p of all) {
        if (!wanted.has(p.pid) && wanted.has(p.ppid)) {
          wanted.add(p.pid);
          grew = true;
        }
      }
    }
    return all.filter((p) => wanted.has(p.pid));
  };
}

/** Descendants of this process whose command name starts with `prefix` (e.g. the dev server). */
export function childrenNamed(prefix: string): Selector {
  return (all) => treesOf(() => [process.pid])(all).filter((p) => p.pid !== process.pid && p.comm.startsWith(prefix));
}

/** Descendants of this process whose command name is exactly `comm` (the dev server `temporal`, not `temporal-server`). */
export function childrenCalled(comm: string): Selector {
  return (all) => childrenNamed(comm)(all).filter((p) => p.comm === comm);
}

/** The database a PostgreSQL backend serves, from its process title (`postgres: [cluster: ]user database host(port) state`). */
function backendDatabase(pid: number): string | undefined {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    return /^postgres: (?:\S+: )?\S+ (\S+) \S+\(\d+\)/.exec(title)?.[1];
  } catch {
    return undefined; // exited meanwhile
  }
}

/**
 * PostgreSQL processes (command name `postgres`) split by the database they serve: those whose
 * database `matches` (`inside: true`), or all the others, background processes included (`inside: false`).
 */
export function postgresServing(matches: (database: string) => boolean, inside: boolean): Selector {
  return (all) =>
    named('postgres')(all).filter((p) => {
      const database = backendDatabase(p.pid);
      return (database !== undefined && matches(database)) === inside;
    });
}

/**
 * PostgreSQL's postmaster (the `postgres` process whose parent is not one): with `reaped` in
 * {@link CpuMeter}, the CPU of backends that exited meanwhile, which no reading of live processes sees.
 */
export function postmaster(): Selector {
  return (all) => {
    const pids = new Set(named('postgres')(all).map((p) => p.pid));
    return named('postgres')(all).filter((p) => !pids.has(p.ppid));
  };
}

/** Every process whose command name is `comm` (e.g. all PostgreSQL backends, whoever they serve). */
export function named(comm: string): Selector {
  return (all) => all.filter((p) => p.comm === comm);
}

/**
 * CPU time of the whole machine so far (every core, every process, interrupts included: /proc/stat's
 * user + nice + system + irq + softirq), ms. Steal (a hypervisor running someone else) is not this
 * machine's work and is left out, as are idle and iowait.
 */
function machineCpuMs(): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user)
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return ((user + nice + system + irq + softirq) / ticksPerSecond) * 1000;
}

async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1000;
}

/** CPU ms consumed by each component since the meter was started (see {@link CpuMeter.start}). */
export type CpuUsage = Record<string, number>;

/** A reading: CPU ms of this process and Redis, and of every selected process by component and pid. */
interface Reading {
  totals: Record<string, number>;
  procs: Record<string, Map<number, number>>;
}

/** Measures CPU time per component over an interval. */
export class CpuMeter {
  readonly #redis: Redis | undefined;
  readonly #groups: Record<string, Selector>;
  readonly #proc = process.platform === 'linux' && existsSync('/proc/self/stat');
  readonly #machine: boolean;
  readonly #reaped: Record<string, Selector>;

  /**
   * `redis`: measure that server (as "redis"); `groups`: process trees to measure (Linux only);
   * `machine`: also the whole machine's CPU time (as "machine", Linux only), whoever used it;
   * `reaped`: the CPU of the selected processes' children that exited meanwhile (e.g. PostgreSQL
   * backends, through the postmaster), by name.
   */
  constructor(
    redis: Redis | undefined,
    groups: Record<string, Selector> = {},
    { machine = false, reaped = {} }: { machine?: boolean; reaped?: Record<string, Selector> } = {},
  ) {
    this.#redis = redis;
    this.#groups = groups;
    this.#machine = machine;
    this.#reaped = reaped;
  }

  async #read(): Promise<Reading> {
    const usage = process.cpuUsage();
    const reading: Reading = { totals: { bench: (usage.user + usage.system) / 1000 }, procs: {} };
    if (this.#redis) reading.totals.redis = await redisCpuMs(this.#redis);
    if (this.#proc) {
      if (this.#machine) reading.totals.machine = machineCpuMs();
      const all = readProcs();
      for (const [name, select] of Object.entries(this.#groups)) reading.procs[name] = new Map(select(all).map((p) => [p.pid, p.cpuMs]));
      for (const [name, select] of Object.entries(this.#reaped)) reading.procs[name] = new Map(select(all).map((p) => [p.pid, p.reapedMs]));
    }
    return reading;
  }

  /**
   * Starts an interval; the returned function ends it and gives the CPU ms used by each component.
   * A process that started meanwhile counts whole; one that exited meanwhile is lost (PostgreSQL
   * backends of other clients come and go), which can only make a figure smaller, never negative.
   */
  async start(): Promise<() => Promise<CpuUsage>> {
    const before = await this.#read();
    return async () => {
      const after = await this.#read();
      const out: CpuUsage = Object.fromEntries(Object.entries(after.totals).map(([k, v]) => [k, v - (before.totals[k] ?? 0)]));
      for (const [name, procs] of Object.entries(after.procs)) {
        let sum = 0;
        for (const [pid, ms] of procs) sum += ms - (before.procs[name]?.get(pid) ?? 0);
        out[name] = sum;
      }
      return out;
    };
  }
}

/**
 * The meter of the Temporal benchmarks: Redis, the dev server (`temporal`), the process trees of
 * `trees` (name → their root pids) and every PostgreSQL backend of the server (`postgres`), in that
 * order, which is the order of their CPU notes.
 */
export function devServerMeter(redis: Redis, trees: Record<string, () => readonly number[]>): CpuMeter {
  const groups: Record<string, Selector> = { temporal: childrenNamed('temporal') };
  for (const [name, pids] of Object.entries(trees)) groups[name] = treesOf(pids);
  groups.postgres = named('postgres');
  return new CpuMeter(redis, groups);
}
