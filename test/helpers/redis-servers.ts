/**
 * Redis servers a test owns: a single `redis-server`, or a three-master Redis Cluster, each on free
 * loopback ports with a temporary directory and no persistence (`--save "" --appendonly no`), so a
 * kill and restart loses every key. Tests that must never touch the shared instance on 6379 (data
 * loss, cluster) use these. Everything started here is killed on `stop()`, and on process exit as a
 * safety net.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';
const REDIS_CLI = process.env.REDIS_CLI_BIN ?? '/usr/bin/redis-cli';
const HOST = '127.0.0.1';
const STARTUP_TIMEOUT_MS = 15_000;

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A `redis-server` process of the test's own. */
export interface OwnRedisServer {
  readonly host: string;
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** Kills the server (SIGKILL: no chance to save anything) and waits until it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and directory and waits until it answers PING. */
  start(): Promise<void>;
  /** Kills the server and removes its directory. */
  stop(): Promise<void>;
}

/** Three cluster masters of the test's own, slots spread by `redis-cli --cluster create`. */
export interface OwnRedisCluster {
  readonly nodes: { host: string; port: number }[];
  /** Kills every master and starts it again (same ports, same cluster config, no data); waits for cluster_state:ok. */
  restartWithoutData(): Promise<void>;
  /** Kills every master (SIGKILL). */
  kill(): Promise<void>;
  /** Starts every master again after `kill()` and waits for cluster_state:ok. */
  startAgain(): Promise<void>;
  /** Kills every master and removes their directories. */
  stop(): Promise<void>;
}

/** Starts a standalone `redis-server` on a free loopback port. */
export async function startRedisServer(): Promise<OwnRedisServer> {
  const port = await freePort();
  return launch(port, []);
}

/**
 * Starts a Redis Cluster of `masters` masters (no replicas) and waits until every node reports
 * cluster_state:ok.
 */
export async function startRedisCluster(masters = 3): Promise<OwnRedisCluster> {
  const servers: OwnRedisServer[] = [];
  try {
    for (let i = 0; i < masters; i++) {
      // The cluster bus listens on port + 10000: both must be free.
      const port = await freePort({ withBusPort: true });
      servers.push(
        await launch(port, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']),
      );
    }
    await promisify(execFile)(
      REDIS_CLI,
      ['--cluster', 'create', ...servers.map((s) => `${s.host}:${s.port}`), '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: STARTUP_TIMEOUT_MS },
    );
    await waitForClusterOk(servers);
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop()));
    throw err;
  }
  const kill = async () => {
    await Promise.all(servers.map((s) => s.kill()));
  };
  const startAgain = async () => {
    await Promise.all(servers.map((s) => s.start()));
    await waitForClusterOk(servers);
  };
  return {
    nodes: servers.map((s) => ({ host: s.host, port: s.port })),
    async restartWithoutData() {
      await kill();
      await startAgain();
    },
    kill,
    startAgain,
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

async function launch(port: number, extraArgs: string[]): Promise<OwnRedisServer> {
  const dir = mkdtempSync(path.join(tmpdir(), `rms-redis-${port}-`));
  const args = [
    '--port', String(port),
    '--bind', HOST,
    '--dir', dir,
    '--save', '',
    '--appendonly', 'no',
    '--daemonize', 'no',
    '--logfile', path.join(dir, 'redis.log'),
    ...extraArgs,
  ];
  let child: ChildProcess | undefined;

  const kill = async () => {
    const current = child;
    child = undefined;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => current.once('exit', () => resolve()));
    current.kill('SIGKILL');
    await exited;
    running.delete(current);
  };

  const start = async () => {
    if (child) throw new Error(`redis-server on ${port} is already running`);
    const started = spawn(REDIS_SERVER, args, { stdio: 'ignore' });
    child = started;
    running.add(started);
    const failed = new Promise<never>((_, reject) => {
      started.once('error', reject);
      started.once('exit', (code, signal) => reject(new Error(`redis-server on ${port} exited (${code ?? signal}); see ${dir}/redis.log`)));
    });
    failed.catch(() => {});
    await Promise.race([waitForPing(port), failed]);
  };

  await start();
  return {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    kill,
    start,
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A loopback port nothing listens on right now (and, for cluster nodes, port + 10000 as well). */
export async function freePort(options: { withBusPort?: boolean } = {}): Promise<number> {
  if (!options.withBusPort) return listenOnce(0);
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 35_000);
    try {
      await listenOnce(port);
      await listenOnce(port + 10_000);
      return port;
    } catch {
      // taken; try another
    }
  }
  throw new Error('no free pair of loopback ports for a cluster node');
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, HOST, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : port));
    });
  });
}

/** Sends one inline command on a fresh socket and returns the raw reply (enough for PING and CLUSTER INFO). */
function ask(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let reply = Buffer.alloc(0);
    socket.setTimeout(1000, () => socket.destroy(new Error('timed out')));
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      reply = Buffer.concat([reply, chunk]);
      const headerEnd = reply.indexOf('\r\n');
      if (headerEnd < 0) return;
      // A bulk reply ($<length>) is complete once its body and final CRLF are in; others after one line.
      const complete = reply[0] === 0x24 ? reply.length >= headerEnd + 2 + Number(reply.subarray(1, headerEnd).toString()) + 2 : true;
      if (complete) {
        socket.end();
        resolve(reply.toString('utf8'));
      }
    });
    socket.connect(port, HOST, () => socket.write(`${command}\r\n`));
  });
}

async function waitForPing(port: number): Promise<void> {
  await pollUntil(`redis-server on ${port} answering PING`, async () => (await ask(port, 'PING')).startsWith('+PONG'));
}

async function waitForClusterOk(servers: OwnRedisServer[]): Promise<void> {
  await pollUntil('cluster_state:ok on every node', async () => {
    const infos = await Promise.all(servers.map((s) => ask(s.port, 'CLUSTER INFO')));
    return infos.every((info) => info.includes('cluster_state:ok'));
  });
}

async function pollUntil(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
