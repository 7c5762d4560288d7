/**
 * A real Temporal server for a benchmark (scale-out): the binaries of `scripts/ensure-temporal-server`
 * (go.temporal.io/server, every service in one process), on two PostgreSQL databases of the run's own
 * (`<run database>_temporal`, `<run database>_visibility`, made by the server's SQL tool as
 * `scripts/stack-up` makes the stack's), with the stack's config (stack/temporal/stack.yaml: 4 history
 * shards unless asked for another count, small pools; its dynamic config: one task-queue partition) on free ports, and the namespace
 * and search attributes made by `saga setup` (src/setup.ts). {@link RealServer.close} stops it, drops
 * the databases `WITH (FORCE)` and removes its config; it is registered for Ctrl-C before anything is made.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { parse, stringify } from 'yaml';
import type { Config } from '../../src/config';
import { PROJECT_ROOT } from '../../src/paths';
import { setupCluster } from '../../src/setup';
import { dropDatabases } from './environment';
import { outputTail } from './processes';
import type { Progress } from './progress';

const execFileAsync = promisify(execFile);

/** A running server and what it took to get there. */
export interface RealServer {
  /** gRPC frontend, `127.0.0.1:<port>`. */
  address: string;
  namespace: string;
  /** Process id of the server (one process: frontend, history, matching, worker). */
  pid: number;
  /** e.g. `v1.29.1`, from the binary's name. */
  version: string;
  /** Its two databases. */
  databases: string[];
  /** Its history shards. */
  historyShards: number;
  /** Wall time of each start-up step, ms: databases (SQL tool), server (until it answers), setup (namespace, search attributes). */
  timings: Record<string, number>;
  /** Stops the server, drops its databases, removes its config. A second call waits for the first. */
  close: () => Promise<void>;
}

/** The three binaries (server, SQL tool, UI server), or why there are none. */
export function serverBinaries(build: boolean): { server: string; sqlTool: string } | { missing: string } {
  const script = path.join(PROJECT_ROOT, 'scripts/ensure-temporal-server');
  // A build (minutes, first time only) says what it does on stderr: let it through.
  const r = spawnSync(script, build ? [] : ['--check'], { encoding: 'utf8', stdio: ['ignore', 'pipe', build ? 'inherit' : 'pipe'] });
  const paths = (r.stdout ?? '').trim().split('\n').filter(Boolean);
  if (r.status !== 0 || paths.length !== 3) {
    return { missing: `${(r.stderr ?? '').trim() || `scripts/ensure-temporal-server exited ${r.status ?? r.signal}`}` };
  }
  return { server: paths[0]!, sqlTool: paths[1]! };
}

/**
 * `count` TCP ports free on 127.0.0.1 right now, below 32768: the server stores each service's
 * membership port in cluster_membership.rpc_port, a SMALLINT, so a port from the kernel's ephemeral
 * range (32768 and up) makes it exit ("value out of range for type smallint"). Drawn at random from
 * 20000–32767, clear of the stack's (7333–7439, 8333–8336) and the dev server's (7233, 8233–8236).
 */
async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count; attempt++) {
    if (attempt > 1000) throw new Error(`no ${count} free ports found between 20000 and 32767`);
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    if (ports.includes(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) ports.push(port);
  }
  return ports;
}

/** The stack's Temporal config, stack/temporal/stack.yaml, as parsed. */
interface StackConfig {
  persistence: { numHistoryShards: number; datastores: Record<string, { sql: Record<string, unknown> }> };
  services: Record<string, { rpc: Record<string, unknown> }>;
  clusterMetadata: { clusterInformation: { active: Record<string, unknown> } };
  dynamicConfigClient: { filepath: string };
}

function stackConfig(): StackConfig {
  return parse(readFileSync(path.join(PROJECT_ROOT, 'stack/temporal/stack.yaml'), 'utf8')) as StackConfig;
}

/** The stack's history shard count (stack/temporal/stack.yaml), the real server's unless a run asks for another. */
export function stackHistoryShards(): number {
  return stackConfig().persistence.numHistoryShards;
}

/** `1 shard`, `4 shards`. */
export function shardsOf(count: number): string {
  return `${count} shard${count === 1 ? '' : 's'}`;
}

/**
 * stack/temporal/stack.yaml with the run's databases, PostgreSQL address, ports and shard count, and
 * an absolute dynamic-config path.
 */
function serverConfig(databaseUrl: URL, databases: { temporal: string; visibility: string }, ports: number[], historyShards: number): string {
  const doc = stackConfig();
  doc.persistence.numHistoryShards = historyShards;
  const stores = { 'postgres-default': databases.temporal, 'postgres-visibility': databases.visibility };
  for (const [store, database] of Object.entries(stores)) {
    const sql = doc.persistence.datastores[store]?.sql;
    if (!sql) throw new Error(`stack/temporal/stack.yaml: no datastore ${store}`);
    Object.assign(sql, {
      databaseName: database,
      connectAddr: `${databaseUrl.hostname}:${databaseUrl.port || 5432}`,
      user: decodeURIComponent(databaseUrl.username) || 'postgres',
      password: decodeURIComponent(databaseUrl.password),
    });
  }
  const next = [...ports];
  const take = () => next.shift()!;
  for (const service of ['frontend', 'history', 'matching', 'worker']) {
    const rpc = doc.services[service]?.rpc;
    if (!rpc) throw new Error(`stack/temporal/stack.yaml: no service ${service}`);
    rpc.grpcPort = take();
    rpc.membershipPort = take();
    if ('httpPort' in rpc) rpc.httpPort = take();
  }
  const frontend = doc.services.frontend!.rpc;
  doc.clusterMetadata.clusterInformation.active.rpcAddress = `127.0.0.1:${String(frontend.grpcPort)}`;
  doc.clusterMetadata.clusterInformation.active.httpAddress = `127.0.0.1:${String(frontend.httpPort)}`;
  doc.dynamicConfigClient.filepath = path.join(PROJECT_ROOT, doc.dynamicConfigClient.filepath);
  return stringify(doc);
}

/** Options of {@link startRealServer}. */
export interface StartOptions {
  /** The run's config: its database URL names the server and the databases. */
  config: Config;
  progress: Progress;
  /** From {@link serverBinaries}. */
  binaries: { server: string; sqlTool: string };
  /** Called first, with `close`, so that Ctrl-C at any later point takes down what was made. */
  onCleanup: (close: () => Promise<void>) => void;
  /** Namespace to make (retention a day). @default 'default' */
  namespace?: string;
  /** History shards, fixed in its databases at the first start. @default the stack's ({@link stackHistoryShards}) */
  historyShards?: number;
}

/** Makes the databases, starts the server, waits until it answers, and runs `saga setup --create-namespace`. */
export async function startRealServer({
  config,
  progress,
  binaries,
  onCleanup,
  namespace = 'default',
  historyShards = stackHistoryShards(),
}: StartOptions): Promise<RealServer> {
  const databaseUrl = new URL(config.db.url);
  const runDatabase = databaseUrl.pathname.slice(1);
  const databases = { temporal: `${runDatabase}_temporal`, visibility: `${runDatabase}_visibility` };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rs-bench-temporal-'));
  let child: ReturnType<typeof spawn> | undefined;
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= closeOnce());
  const closeOnce = async () => {
    const failures: string[] = [];
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child!.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    const names = Object.values(databases);
    await dropDatabases(config.db.url, names).catch((err: unknown) => failures.push(`drop databases ${names.join(', ')}: ${String(err)}`));
    rmSync(dir, { recursive: true, force: true });
    if (failures.length > 0) progress.log(`bench: Temporal server cleanup incomplete:\n  ${failures.join('\n  ')}`);
  };
  onCleanup(close);

  const timings: Record<string, number> = {};
  try {
    // The SQL tool, as scripts/stack-up runs it: create the database, the version table, then every schema version it embeds.
    let t0 = performance.now();
    progress.update(`real Temporal server: creating databases ${databases.temporal} and ${databases.visibility} (temporal-sql-tool)`);
    const pgArgs = ['--plugin', 'postgres12', '--endpoint', databaseUrl.hostname, '--port', databaseUrl.port || '5432', '--user', decodeURIComponent(databaseUrl.username) || 'postgres'];
    if (databaseUrl.password) pgArgs.push('--password', decodeURIComponent(databaseUrl.password));
    const sql = async (database: string, ...args: string[]) => {
      try {
        await execFileAsync(binaries.sqlTool, [...pgArgs, '--database', database, ...args], { maxBuffer: 16 * 1024 * 1024 });
      } catch (err) {
        const e = err as { stdout?: string; stderr?: string; message: string };
        const tail = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim().split('\n').slice(-10).join('\n');
        throw new Error(`temporal-sql-tool --database ${database} ${args.join(' ')} failed: ${e.message}\n${tail}`);
      }
    };
    await Promise.all(
      Object.entries(databases).map(async ([store, database]) => {
        await sql(database, 'create-database');
        await sql(database, 'setup-schema', '--version', '0.0');
        await sql(database, 'update-schema', '--schema-name', `postgresql/v12/${store}`);
      }),
    );
    timings.databases = performance.now() - t0;

    t0 = performance.now();
    const ports = await freePorts(9);
    mkdirSync(path.join(dir, 'config'));
    writeFileSync(path.join(dir, 'config', 'bench.yaml'), serverConfig(databaseUrl, databases, ports, historyShards));
    const address = `127.0.0.1:${ports[0]}`;
    progress.update(`real Temporal server: starting ${path.basename(binaries.server)} on ${address} (${shardsOf(historyShards)})`);
    const proc = spawn(binaries.server, ['--root', dir, '--config', 'config', '--env', 'bench', '--allow-no-auth', 'start'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    const output = outputTail(proc);
    // Ready: it answers a call that reads its database (the frontend says SERVING before that).
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`the Temporal server exited (${proc.exitCode ?? proc.signalCode}) before it answered:\n${output()}`);
      if (Date.now() > deadline) throw new Error(`the Temporal server did not answer in 120 s:\n${output()}`);
      const answered = await Connection.connect({ address, connectTimeout: '2s' }).then(
        async (connection) => {
          try {
            await connection.workflowService.describeNamespace({ namespace: 'temporal-system' });
            return true;
          } catch {
            return false;
          } finally {
            await connection.close();
          }
        },
        () => false,
      );
      if (answered) break;
      await delay(250);
    }
    timings.server = performance.now() - t0;

    t0 = performance.now();
    progress.update(`real Temporal server: saga setup --create-namespace (${namespace}, search attributes)`);
    await setupCluster({ ...config, temporal: { ...config.temporal, address, namespace } }, { createNamespace: true, retention: '1d' });
    timings.setup = performance.now() - t0;
    return {
      address,
      namespace,
      pid: proc.pid!,
      version: /-(v[\d.]+)$/.exec(path.basename(binaries.server))?.[1] ?? path.basename(binaries.server),
      databases: Object.values(databases),
      historyShards,
      timings,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
