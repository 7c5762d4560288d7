/**
 * A throwaway Temporal dev server for an app's tests, in memory, on a free port, with the saga search
 * attributes. Found as scripts/ensure-temporal finds it, minus what only a checkout has: the Temporal
 * CLI named by TEMPORAL_CLI, else `temporal` on PATH, else the dev server that `@temporalio/testing`
 * downloads (an optional peer: loaded only here, only when there is no CLI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../shared/search-attributes';

/** A test environment could not be made; the message says why and what to do. */
export class TestEnvironmentError extends Error {
  override readonly name: string = 'TestEnvironmentError';
}

/**
 * No Temporal dev server can be started here: TEMPORAL_CLI names no executable file, or it is unset,
 * `temporal` is not on PATH and `@temporalio/testing` is not installed. The message names the ways out.
 */
export class TemporalCliNotFoundError extends TestEnvironmentError {
  override readonly name = 'TemporalCliNotFoundError';
}

/** A dev server was found but did not come up (it exited, did not answer in time, or could not be downloaded). */
export class DevServerStartError extends TestEnvironmentError {
  override readonly name = 'DevServerStartError';
}

/** A running dev server of the test's own. */
export interface DevServer {
  /** host:port of its frontend. */
  address: string;
  /** Where it runs from: the CLI's path, or `@temporalio/testing` (downloaded). */
  source: string;
  stop(): Promise<void>;
}

/** What {@link startDevServer} reads; tests of this module replace `loadTesting`. */
export interface DevServerOptions {
  /** The namespace to have besides `default`. @default default */
  namespace?: string;
  /** TEMPORAL_CLI and PATH are read from here. @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Loads `@temporalio/testing`. @default a dynamic import */
  loadTesting?: () => Promise<TestingModule>;
}

/** The part of `@temporalio/testing` used here. */
export interface TestingModule {
  TestWorkflowEnvironment: {
    createLocal(options: {
      server: { namespace?: string; ip?: string; searchAttributes?: (typeof SEARCH_ATTRIBUTES)[number][]; extraArgs?: string[] };
    }): Promise<{ address: string; teardown(): Promise<void> }>;
  };
}

/** How long a dev server may take to answer with its search attributes registered. */
const READY_MS = 60_000;
/** Starts tried when the dev server exits at once (another process took the free port first). */
const START_ATTEMPTS = 3;

const SEARCH_ATTRIBUTE_ARGS = SEARCH_ATTRIBUTES.flatMap((key) => ['--search-attribute', `${key.name}=Keyword`]);

/**
 * The Temporal CLI to run: TEMPORAL_CLI when set (it must be an executable file), else `temporal` on
 * PATH, else undefined.
 * @throws TemporalCliNotFoundError when TEMPORAL_CLI is set to something that is not an executable file.
 */
export function findTemporalCli(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const named = env.TEMPORAL_CLI;
  if (named) {
    if (isExecutableFile(named)) return named;
    throw new TemporalCliNotFoundError(
      `TEMPORAL_CLI=${named} is not an executable file: point it at the Temporal CLI (\`temporal\`, https://docs.temporal.io/cli), or unset it to use \`temporal\` on PATH`,
    );
  }
  const names = process.platform === 'win32' ? ['temporal.exe', 'temporal.cmd', 'temporal'] : ['temporal'];
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    for (const name of names) {
      const candidate = path.join(dir, name);
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  return undefined;
}

function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a dev server of the caller's own: from the Temporal CLI ({@link findTemporalCli}), or else
 * from `@temporalio/testing`'s download.
 * @throws TemporalCliNotFoundError when there is neither; DevServerStartError when it does not come up.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const namespace = options.namespace ?? 'default';
  const cli = findTemporalCli(options.env ?? process.env);
  if (cli) return startCliServer(cli, namespace);
  let testing: TestingModule;
  try {
    testing = await (options.loadTesting ?? importTesting)();
  } catch (err) {
    if (!isModuleNotFound(err)) throw err;
    throw new TemporalCliNotFoundError(
      'no Temporal dev server to start: TEMPORAL_CLI is not set, `temporal` is not on PATH, and @temporalio/testing (which downloads a dev server) is not installed. ' +
        'Install the Temporal CLI (https://docs.temporal.io/cli) and put `temporal` on PATH or set TEMPORAL_CLI to it, ' +
        'or `npm install --save-dev @temporalio/testing`; or give settings.TEMPORAL_ADDRESS of a running server readied by `npx saga setup`',
      { cause: err },
    );
  }
  try {
    const env = await testing.TestWorkflowEnvironment.createLocal({
      server: { namespace, ip: '127.0.0.1', searchAttributes: [...SEARCH_ATTRIBUTES], extraArgs: ['--log-level', 'error'] },
    });
    return { address: env.address, source: '@temporalio/testing', stop: () => env.teardown() };
  } catch (err) {
    throw new DevServerStartError(`@temporalio/testing could not start its dev server (it downloads one on first use): ${errorText(err)}`, { cause: err });
  }
}

/** `@temporalio/testing`, an optional peer: imported only when no CLI is found. */
async function importTesting(): Promise<TestingModule> {
  // A variable keeps bundlers and the compiler from resolving it ahead of time.
  const name = '@temporalio/testing';
  return (await import(name)) as TestingModule;
}

function isModuleNotFound(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && errorText(err).includes('@temporalio/testing');
}

async function startCliServer(cli: string, namespace: string): Promise<DevServer> {
  let last: unknown;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    try {
      return await startCliServerOnce(cli, namespace);
    } catch (err) {
      if (!(err instanceof ExitedEarly)) throw err;
      last = err;
    }
  }
  throw new DevServerStartError(`the Temporal dev server (${cli}) exited ${START_ATTEMPTS} times as it started: ${errorText(last)}`, { cause: last });
}

/** The dev server exited before it answered: worth another port. */
class ExitedEarly extends Error {}

async function startCliServerOnce(cli: string, namespace: string): Promise<DevServer> {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--log-level', 'error', ...SEARCH_ATTRIBUTE_ARGS];
  if (namespace !== 'default') args.push('--namespace', namespace);
  const child = spawn(cli, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  });
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(`exit ${signal ?? code}`));
    child.once('error', (err) => resolve(err.message));
  });
  // A test process that ends without stopping its environment (a crash) takes its server with it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    await stopChild(child, exited);
  };
  const gone = new AbortController();
  const early = exited.then((how) => {
    gone.abort();
    throw new ExitedEarly(`${how}${output.trim() ? `: ${output.trim().split('\n').slice(-5).join(' | ')}` : ''}`);
  });
  // Settles when the server stops at the end too: nobody is waiting for it then.
  early.catch(() => {});
  try {
    await Promise.race([untilReady(address, namespace, gone.signal), early]);
  } catch (err) {
    await stop();
    if (err instanceof ExitedEarly || err instanceof DevServerStartError) throw err;
    throw new DevServerStartError(`the Temporal dev server (${cli}) did not come up at ${address}: ${errorText(err)}`, { cause: err });
  }
  return { address, source: cli, stop };
}

/** Until the server answers with every saga search attribute registered in `namespace`. */
async function untilReady(address: string, namespace: string, exited: AbortSignal): Promise<void> {
  const deadline = Date.now() + READY_MS;
  let why = 'no answer';
  while (Date.now() < deadline && !exited.aborted) {
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: '2s' });
      const listed = await connection.operatorService.listSearchAttributes({ namespace });
      const custom = listed.customAttributes ?? {};
      if (SEARCH_ATTRIBUTES.every((key) => key.name in custom)) return;
      why = 'search attributes not registered yet';
    } catch (err) {
      why = errorText(err);
    } finally {
      await connection?.close().catch(() => {});
    }
    await delay(200);
  }
  throw new DevServerStartError(`the Temporal dev server at ${address} did not answer in ${READY_MS / 1000}s (${why})`);
}

async function stopChild(child: ChildProcess, exited: Promise<string>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const gone = await Promise.race([exited.then(() => true), delay(10_000, false, { ref: false })]);
  if (!gone) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** A port free now on 127.0.0.1. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', resolve);
  });
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
