/**
 * The processes that `make demo` and the Temporal UI test start, and stop again: the dev stack
 * (scripts/dev-up, scripts/dev-down) and one worker process of the order app (`examples/orders/src/worker.ts`). Each start tells the
 * caller whether it started something, so only that is stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** The repository root. */
export const ROOT = path.resolve(__dirname, '../..');

/** True when something accepts TCP connections on 127.0.0.1:`port`. */
export function isListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (up: boolean) => {
      socket.destroy();
      resolve(up);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.setTimeout(1000, () => done(false));
  });
}

/** A TCP port that was free a moment ago (the kernel's choice). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Runs one of scripts/ with `env`; its output goes to ours. Rejects on a non-zero exit. */
export function runScript(script: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(ROOT, 'scripts', script), [], { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`scripts/${script} failed (${signal ?? `exit ${code}`})`)),
    );
  });
}

/** Runs `file` with `args` and `env`; resolves with its stdout, rejects with its stderr on a non-zero exit. */
export function capture(file: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) =>
      code === 0 ? resolve(out) : reject(new Error(`${path.basename(file)} ${args.slice(0, 3).join(' ')} failed (${signal ?? `exit ${code}`}): ${err.trim()}`)),
    );
  });
}

/**
 * The Temporal CLI that scripts/ensure-temporal finds, bound to a server's address and namespace:
 * a function that runs it with some arguments and resolves with its stdout.
 */
export async function temporalCli(
  env: NodeJS.ProcessEnv,
  server: { address: string; namespace: string },
): Promise<TemporalCli> {
  const binary = (await capture(path.join(ROOT, 'scripts', 'ensure-temporal'), [], env)).trim();
  if (!binary) throw new Error('scripts/ensure-temporal found no Temporal CLI');
  const codec = devCodecEndpoint(env);
  return (args, options = {}) => {
    // Through the dev stack's codec server, as any Temporal client of encrypted sagas must be,
    // unless the arguments name it (the documented commands do) or the caller wants what is stored.
    const through = options.codec === false || args.includes('--codec-endpoint') ? [] : ['--codec-endpoint', codec];
    return capture(binary, [...args, '--address', server.address, '--namespace', server.namespace, ...through], env);
  };
}

/** Runs the Temporal CLI with `args`; `codec: false` shows payloads as Temporal stores them. */
export type TemporalCli = (args: readonly string[], options?: { codec?: boolean }) => Promise<string>;

/** The codec server of the dev stack (scripts/dev-up). */
export function devCodecEndpoint(env: NodeJS.ProcessEnv): string {
  return `http://127.0.0.1:${env.TEMPORAL_DEV_CODEC_PORT ?? 8234}`;
}

/** The dev stack as {@link devUp} found or left it. */
export interface DevStack {
  /** True when this call started the dev server (and {@link stop} will stop it). */
  started: boolean;
  /** Stops the dev server if this call started it. */
  stop(): Promise<void>;
}

/**
 * Runs scripts/dev-up (dev server with UI and search attributes, database and schema). The dev server
 * counts as ours only if nothing served its gRPC port before: a `make dev` server is left alone.
 */
export async function devUp(env: NodeJS.ProcessEnv): Promise<DevStack> {
  const grpcPort = Number(env.TEMPORAL_DEV_PORT ?? 7233);
  const started = !(await isListening(grpcPort));
  try {
    await runScript('dev-up', env);
  } catch (err) {
    // dev-up may have started the server before a later step failed (e.g. PostgreSQL refused it).
    if (started && (await isListening(grpcPort))) await runScript('dev-down', env).catch(() => undefined);
    throw err;
  }
  let stopped = false;
  return {
    started,
    async stop() {
      if (!started || stopped) return;
      stopped = true;
      await runScript('dev-down', env);
    },
  };
}

/** A worker process. */
export interface WorkerProcess {
  pid: number;
  /** Where its stdout and stderr go. */
  logPath: string;
  /** The end of what it wrote on standard error until it polled (where it says its metrics are). */
  startOutput: string;
  /** Stops it (SIGTERM: it finishes in-flight tasks, then exits); resolves with its exit code. */
  stop(): Promise<number | null>;
}

/** Starts the order app's worker (`examples/orders/src/worker.ts`) with `env` and resolves once it polls (it prints "worker: polling"). */
export async function startWorker(env: NodeJS.ProcessEnv, logPath: string, timeoutMs = 180_000): Promise<WorkerProcess> {
  const log = createWriteStream(logPath, { flags: 'a' });
  // A process group of its own: a Ctrl-C in the terminal reaches only our process, which then sends
  // one SIGTERM. (Its Temporal runtime drains on the first signal and dies at once on a second.)
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'examples/orders/src/worker.ts')], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  // Should our process end without stopping it (an uncaught error), the worker still gets its signal.
  const orphanGuard = () => child.kill('SIGTERM');
  process.once('exit', orphanGuard);
  let recent = '';
  // 'close', not 'exit': its last output ("worker: stopped") may still be in the pipes at 'exit', and
  // writing that to an ended log would throw.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  void exited.then(() => {
    log.end();
    process.off('exit', orphanGuard);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the worker did not poll within ${timeoutMs / 1000} s; see ${logPath}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      log.write(chunk);
      recent = (recent + chunk.toString()).slice(-4000);
      if (recent.includes('worker: polling')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', (chunk: Buffer) => log.write(chunk));
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the worker exited (${code}) before polling:\n${recent.trim()}`));
    });
  });
  return {
    pid: child.pid!,
    logPath,
    startOutput: recent,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      // Its shutdown grace time is 10 s; past that, it is stuck.
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
