/**
 * The `saga` command line. Every command prints JSON with --json; exit codes are listed in EXIT.
 *
 * Only commander is loaded up front: each command imports what it needs (the Temporal client, ioredis,
 * pg, zod, the codec, fastify) when it runs, so `saga --help` or a usage error answers at once. The
 * imports name `.js` files: compiled (bin/saga runs `.build/cli.js`), a dynamic import resolves like
 * ESM, and tsx maps them to the sources.
 */
import { createReadStream } from 'node:fs';
import { once } from 'node:events';
import { Command, CommanderError, Option } from 'commander';
import type { Config } from './config';
import type { SagaClient, StartedSaga } from './client';
import type { SagaAttention, SagaState } from './shared';
import type { SagaTypes } from './sagas';
import { startTracingIfRequested } from './tracing/env';
import { TracingPackagesMissingError } from './tracing/packages';
import { sagaListText, sagaStatusText } from './cli-text';

/** Exit codes of the CLI. */
export const EXIT = {
  /** Reservation SUCCESS (with --wait: the saga COMPLETED); any other command succeeded. */
  OK: 0,
  /** Temporal, Redis or PostgreSQL failed, or anything unexpected. */
  ERROR: 1,
  /** Usage error or bad input: unknown command, type or option, invalid JSON, schema violation, key reuse. */
  USAGE: 2,
  /** The intent already exists (DUPLICATE). */
  DUPLICATE: 3,
  /** Another saga holds the intent right now (CONFLICT); retry after `retryAfterMs`. */
  CONFLICT: 4,
  /** With --wait: the saga was compensated (or its compensation failed). */
  SAGA_FAILED: 5,
  /** With --wait-ms: the saga had not ended when the bound passed; it runs on. */
  STILL_RUNNING: 6,
  /** Configuration error (a bad environment variable, or no saga types module found). */
  CONFIG: 78,
} as const;

class UsageError extends Error {}

/** Largest --data read from a file or stdin (the schemas refuse far less; this bounds the read). */
const MAX_DATA_BYTES = 1024 * 1024;

/**
 * The saga input named by --data: JSON in the argument itself, `@<path>` for a file, or `-` for
 * standard input. The last two keep sensitive data (a card number) out of shell history and `ps`.
 */
async function readData(arg: string): Promise<unknown> {
  let text = arg;
  let source = '--data';
  if (arg === '-') {
    source = '--data - (stdin)';
    text = await readBounded(process.stdin, source);
  } else if (arg.startsWith('@')) {
    const file = arg.slice(1);
    source = `--data @${file}`;
    if (file === '') throw new UsageError('--data @ needs a file name: --data @order.json');
    let stream;
    try {
      stream = createReadStream(file);
      await once(stream, 'open');
    } catch (err) {
      throw new UsageError(`${source}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    text = await readBounded(stream, source);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
}

async function readBounded(stream: NodeJS.ReadableStream, source: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    size += buf.length;
    if (size > MAX_DATA_BYTES) throw new UsageError(`${source}: more than ${MAX_DATA_BYTES} bytes`);
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function print(value: unknown, json: boolean, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
}

function exitForState(state: SagaState): number {
  if (state.outcome === 'COMPLETED') return EXIT.OK;
  if (state.outcome === 'REJECTED') return state.reason === 'CONFLICT' ? EXIT.CONFLICT : state.reason === 'DUPLICATE' ? EXIT.DUPLICATE : EXIT.ERROR;
  return EXIT.SAGA_FAILED;
}

/** Longest --wait-ms: the longest a timer waits (about 24.8 days, past the longest `attentionMs`). */
const LONGEST_WAIT_MS = 2 ** 31 - 1;

/** `--wait-ms`: a bound on waiting for a saga's end. */
function waitMsOption(description: string): Option {
  return new Option('--wait-ms <ms>', description).argParser((v) => {
    if (!/^[1-9]\d*$/.test(v) || Number(v) > LONGEST_WAIT_MS) throw new UsageError(`--wait-ms must be a whole number of milliseconds from 1 to ${LONGEST_WAIT_MS}`);
    return v;
  });
}

/** How a wait for a saga's end came out: its final state, or, past the bound, its last state seen (if any). */
type Waited = { final: SagaState } | { running: SagaState | undefined };

/**
 * Waits for the saga to end, at most `waitMs` when given (the saga runs on past it). On stderr,
 * whenever the saga waits in NEEDS_ATTENTION (its wait for an operator lasts its type's
 * `attentionMs`, a day by default), one line saying so and what to do; with `started`, for a person
 * at a terminal, the saga as it goes: the early answer first, then each phase, step and
 * compensation as it happens, the last one included.
 */
async function awaitEnd(client: SagaClient, workflowId: string, options: { started?: StartedSaga; waitMs?: number }): Promise<Waited> {
  const done = client.result(workflowId);
  let finished = false;
  const settled = done.finally(() => (finished = true)).catch(() => undefined);
  const { isTerminal, SagaPhase } = await import('./shared/index.js');
  const following = options.started !== undefined && process.stderr.isTTY;
  const t0 = Date.now();
  const bound = options.waitMs === undefined ? undefined : t0 + options.waitMs;
  const say = (line: string) => process.stderr.write(`  +${((Date.now() - t0) / 1000).toFixed(1)}s  ${line}\n`);
  if (following) say(`${workflowId}: ${options.started!.reservation.status}; following it (Ctrl-C stops following, not the saga)`);
  const seen = { phase: '', steps: 0, compensations: 0, attentionSince: '' };
  const show = (state: SagaState) => {
    const phase = () => {
      if (state.phase !== seen.phase) say(`${state.phase}${state.outcome && state.reason ? ` (${state.reason})` : ''}`);
      seen.phase = state.phase;
    };
    // A new phase first, except a terminal one, which comes after the last step it reports.
    if (!isTerminal(state.phase)) phase();
    for (const step of state.stepsDone.slice(seen.steps)) say(`  step done: ${step}`);
    for (const c of state.compensationsRun.slice(seen.compensations)) say(`  compensation done: ${c}`);
    seen.steps = state.stepsDone.length;
    seen.compensations = state.compensationsRun.length;
    if (isTerminal(state.phase)) phase();
  };
  const remaining = () => (bound === undefined ? LONGEST_WAIT_MS : Math.min(bound - Date.now(), LONGEST_WAIT_MS));
  /** Resolves after `ms`, or as soon as the saga has ended. */
  const pause = async (ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  };
  let last: SagaState | undefined;
  while (!finished && remaining() > 0) {
    // The state query needs a worker: its answer holds up neither the end nor the bound.
    const polled = client.status(workflowId).then(
      (s) => s.state,
      () => undefined,
    );
    const state = await Promise.race([polled, pause(remaining()).then(() => undefined)]);
    if (state) {
      last = state;
      if (following) show(state);
      // Each wait once: a redrive that fails again starts another.
      if (state.phase === SagaPhase.NEEDS_ATTENTION && state.attention && state.attention.since !== seen.attentionSince) {
        seen.attentionSince = state.attention.since;
        process.stderr.write(attentionNotice(workflowId, state.attention));
      }
      if (isTerminal(state.phase)) break;
    }
    // Following: a terminal's pace; else a look a second, for a wait that may last a day.
    if (!finished) await pause(Math.max(0, Math.min(following ? 200 : 1000, remaining())));
  }
  if (!finished && !(last && isTerminal(last.phase))) return { running: last };
  const final = await done;
  if (following) show(final);
  return { final };
}

/** What a saga waiting for an operator means, in one line for stderr. */
function attentionNotice(workflowId: string, attention: SagaAttention): string {
  return (
    `saga: ${workflowId} waits for an operator (NEEDS_ATTENTION): ${attention.pending.join(', ')} could not be undone (the failures: saga status ${workflowId}); ` +
    `once the cause is fixed, saga redrive ${workflowId}; unless redriven by ${attention.until}, it ends COMPENSATION_FAILED\n`
  );
}

/** Says on stderr that the wait for the saga's end ran out before the end, and how to wait again. */
function stillRunning(workflowId: string, waitMs: number, last: SagaState | undefined): void {
  process.stderr.write(`saga: ${workflowId} is still running after ${waitMs} ms${last ? ` (phase ${last.phase})` : ''}; saga result ${workflowId} waits for its end\n`);
}

/**
 * Builds the program; `run` executes it and returns the exit code. `config` is called only by a
 * command that needs it, so parsing and help load no configuration.
 */
export function buildProgram(config: () => Config | Promise<Config>, setExit: (code: number) => void): Command {
  const program = new Command('saga')
    .description('Start and inspect reservation sagas')
    .option('--sagas <module>', 'the module exporting your saga types (default: SAGA_TYPES_MODULE, else "reservation-saga".sagas of your package.json)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    .showHelpAfterError(false);

  /** The app's saga types, from the module it names (src/sagas/load.ts). */
  const sagas = async (cfg: Config): Promise<SagaTypes> => {
    const { loadSagaModule, locateSagaModule } = await import('./sagas/load.js');
    return loadSagaModule(locateSagaModule({ flag: program.opts<{ sagas?: string }>().sagas }), cfg);
  };

  /** A client; `needs: 'sagas'` loads the app's saga types (reads, lists and cancels need none). */
  const withClient = async <T>(fn: (client: SagaClient) => Promise<T>, needs?: 'sagas'): Promise<T> => {
    const cfg = await config();
    const [{ SagaClient }, types] = await Promise.all([import('./client.js'), needs === 'sagas' ? sagas(cfg) : {}]);
    // Temporal on first use: a request the gate rejects exits without loading or reaching it. The CLI
    // is the operator's: its reads, cancels, redrives and settles reach every owner's sagas; its starts
    // run for the default owner.
    const client = await SagaClient.connect({ sagas: types, config: cfg, temporal: 'on first use', operator: true });
    try {
      return await fn(client);
    } finally {
      await client.close();
    }
  };

  program
    .command('start')
    .description('start a saga; prints its reservation answer (SUCCESS, DUPLICATE or CONFLICT)')
    .requiredOption('--type <type>', 'saga type, e.g. order')
    .requiredOption('--data <json>', 'the saga input: JSON, @file.json, or - for stdin (keeps secrets out of shell history)')
    .option('--idempotency-key <key>', 'the caller\'s idempotency key (default: a new UUID)')
    .addOption(
      new Option('--deadline-ms <ms>', 'how long the saga may take, at most its type\'s deadline (default: the type\'s); past it the saga compensates and ends EXPIRED').argParser((v) => {
        if (!/^[1-9]\d*$/.test(v)) throw new UsageError('--deadline-ms must be a positive whole number of milliseconds');
        return v;
      }),
    )
    .option('--wait', 'wait for the saga to end and include its final state')
    .addOption(waitMsOption('wait at most this long for the saga to end (implies --wait); past it exit 6, the saga running on'))
    .option('--find-existing', 'on DUPLICATE, look the existing entity up and print its id when it is yours')
    .option('--json', 'print JSON')
    .action(async (opts: { type: string; data: string; idempotencyKey?: string; deadlineMs?: string; wait?: boolean; waitMs?: string; findExisting?: boolean; json?: boolean }) => {
      const data = await readData(opts.data);
      await withClient(async (client) => {
        const started = await client.start(opts.type, data, {
          idempotencyKey: opts.idempotencyKey,
          ...(opts.deadlineMs === undefined ? {} : { deadlineMs: Number(opts.deadlineMs) }),
          ...(opts.findExisting ? { findExisting: true } : {}),
        });
        const r = started.reservation;
        let exit: number = r.status === 'SUCCESS' ? EXIT.OK : r.status === 'DUPLICATE' ? EXIT.DUPLICATE : EXIT.CONFLICT;
        let final: SagaState | undefined;
        // A request rejected at the gate has no saga to wait for.
        if ((opts.wait || opts.waitMs !== undefined) && started.started) {
          const waitMs = opts.waitMs === undefined ? undefined : Number(opts.waitMs);
          const waited = await awaitEnd(client, started.workflowId, { started, waitMs });
          if ('final' in waited) {
            final = waited.final;
            exit = exitForState(final);
          } else {
            stillRunning(started.workflowId, waitMs!, waited.running);
            exit = EXIT.STILL_RUNNING;
          }
        }
        print({ ...started, ...(final ? { final } : {}) }, !!opts.json, () =>
          [
            `${started.started ? started.workflowId : opts.type}: ${r.status}${r.status === 'SUCCESS' ? ` (fencing token ${r.fencingToken})` : r.status === 'CONFLICT' ? ` (retry after ${r.retryAfterMs} ms)` : ''}${started.outcome ? `, saga already ended ${started.outcome}` : ''}`,
            ...(final ? [`final: ${final.outcome}${final.reason ? ` (${final.reason})` : ''}`] : []),
            ...(started.entityId ? [`your existing entity: ${started.entityId}`] : []),
            started.url ? `UI: ${started.url}` : 'rejected at the gate: no saga was started',
          ].join('\n'),
        );
        setExit(exit);
      }, 'sagas');
    });

  program
    .command('status <workflowId>')
    .description('the saga\'s current phase, steps, compensations and errors')
    .option('--json', 'print JSON')
    .action(async (workflowId: string, opts: { json?: boolean }) => {
      await withClient(async (client) => {
        const s = await client.status(workflowId);
        print(s, !!opts.json, () => sagaStatusText(s));
      });
    });

  program
    .command('result <workflowId>')
    .description('wait for the saga to end; prints its final state')
    .addOption(waitMsOption('wait at most this long; past it exit 6, printing nothing, the saga running on'))
    .option('--json', 'print JSON')
    .action(async (workflowId: string, opts: { waitMs?: string; json?: boolean }) => {
      await withClient(async (client) => {
        const waitMs = opts.waitMs === undefined ? undefined : Number(opts.waitMs);
        const waited = await awaitEnd(client, workflowId, { waitMs });
        if (!('final' in waited)) {
          stillRunning(workflowId, waitMs!, waited.running);
          setExit(EXIT.STILL_RUNNING);
          return;
        }
        const state = waited.final;
        print(state, !!opts.json, () => `${workflowId}: ${state.outcome}${state.reason ? ` (${state.reason})` : ''}`);
        setExit(exitForState(state));
      });
    });

  program
    .command('list')
    .description('list sagas, newest first')
    .option('--type <type>', 'only this saga type')
    .option('--outcome <outcome>', 'only this outcome: COMPLETED, REJECTED, COMPENSATED, COMPENSATION_FAILED, EXPIRED')
    .option('--phase <phase>', 'only this phase')
    .option('--needs-attention', 'only sagas waiting for an operator (phase NEEDS_ATTENTION): a compensation failed; see saga redrive')
    .addOption(new Option('--limit <n>', 'at most n').default('100').argParser((v) => {
      if (!/^\d+$/.test(v) || Number(v) < 1) throw new UsageError('--limit must be a positive whole number');
      return v;
    }))
    .option('--json', 'print JSON')
    .action(async (opts: { type?: string; outcome?: string; phase?: string; needsAttention?: boolean; limit: string; json?: boolean }) => {
      if (opts.needsAttention && opts.phase !== undefined && opts.phase !== 'NEEDS_ATTENTION') throw new UsageError('--needs-attention is --phase NEEDS_ATTENTION: give one or the other');
      const phase = opts.needsAttention ? 'NEEDS_ATTENTION' : opts.phase;
      await withClient(async (client) => {
        const rows = await client.list({ type: opts.type, outcome: opts.outcome, phase, limit: Number(opts.limit) });
        print(rows, !!opts.json, () => sagaListText(rows));
      });
    });

  program
    .command('cancel <workflowId>')
    .description('cancel a saga; it runs its compensations')
    .option('--json', 'print JSON')
    .action(async (workflowId: string, opts: { json?: boolean }) => {
      await withClient(async (client) => {
        await client.cancel(workflowId);
        print({ workflowId, cancelRequested: true }, !!opts.json, () => `${workflowId}: cancellation requested`);
      });
    });

  program
    .command('redrive <workflowId>')
    .description('once the cause is fixed, retry the compensations a saga waiting in NEEDS_ATTENTION could not finish; prints where it stands after')
    .option('--json', 'print JSON')
    .action(async (workflowId: string, opts: { json?: boolean }) => {
      await withClient(async (client) => {
        const state = await client.redrive(workflowId);
        const waiting = state.phase === 'NEEDS_ATTENTION';
        print(state, !!opts.json, () =>
          waiting
            ? `${workflowId}: still NEEDS_ATTENTION, left to undo: ${state.attention?.pending.join(', ')} (the failures: saga status); waits until ${state.attention?.until}`
            : `${workflowId}: ${state.outcome}${state.reason ? ` (${state.reason})` : ''}; compensations run: ${state.compensationsRun.join(', ')}`,
        );
        setExit(waiting ? EXIT.SAGA_FAILED : exitForState(state));
      });
    });

  program
    .command('signal <workflowId> <signal>')
    .description('send a signal a wait of the saga waits for (a payment confirmed); recorded once: a repeat changes nothing')
    .option('--data <json>', 'what the steps after the wait find: JSON, @file.json, or - for stdin')
    .option('--json', 'print JSON')
    .action(async (workflowId: string, signal: string, opts: { data?: string; json?: boolean }) => {
      const payload = opts.data === undefined ? undefined : await readData(opts.data);
      await withClient(async (client) => {
        const receipt = await client.signal(workflowId, signal, payload);
        print({ workflowId, ...receipt }, !!opts.json, () => `${workflowId}: ${signal} ${receipt.first ? 'received' : 'was received before; this one changed nothing'}`);
      });
    });

  program
    .command('settle <workflowId>')
    .description('after settling by hand what a COMPENSATION_FAILED saga could not undo: --keep its entity (operations find it) or --undo it (as the saga would have)')
    .option('--keep', 'the entity stands: its row becomes COMPLETED')
    .option('--undo', 'the entity is undone: its row becomes COMPENSATED, its intent freed by the type\'s freeIntent')
    .option('--json', 'print JSON')
    .action(async (workflowId: string, opts: { keep?: boolean; undo?: boolean; json?: boolean }) => {
      if (!opts.keep === !opts.undo) throw new UsageError('say how the saga was settled: --keep or --undo (one of them)');
      await withClient(async (client) => {
        const settled = await client.settle(workflowId, opts.keep ? 'keep' : 'undo');
        print(settled, !!opts.json, () => `${workflowId}: settled; its row is ${settled.row}${settled.intentFreed ? ' and its intent free' : ''}`);
      });
    });

  program
    .command('intent')
    .description('the RMS reservation and the PostgreSQL row of an intent (of an operation: the entity\'s lock and row)')
    .requiredOption('--type <type>', 'saga type, e.g. order')
    .requiredOption('--data <json>', 'the saga input: JSON, @file.json, or - for stdin')
    .option('--json', 'print JSON')
    .action(async (opts: { type: string; data: string; json?: boolean }) => {
      const data = await readData(opts.data);
      const cfg = await config();
      const [{ requireIntentSecret }, { createPool }, { Rms }, { createRedis }, { prepareSaga, sagaDefinition }, types] = await Promise.all([
        import('./config.js'),
        import('./db/pool.js'),
        import('./rms/index.js'),
        import('./rms/connection.js'),
        import('./sagas/index.js'),
        sagas(cfg),
      ]);
      const def = sagaDefinition(opts.type, types);
      const input = prepareSaga(opts.type, data, { timings: { ...cfg.saga, compensationAttempts: 1 }, types, intentSecret: requireIntentSecret(cfg) });
      const redis = createRedis(cfg.redis);
      const pool = createPool(cfg.db);
      try {
        const rms = await new Rms(redis, { keyPrefix: cfg.redis.keyPrefix }).inspect(input.intentKey);
        // An entity operation's intent key is the entity's lock; its row is the entity's, by id.
        const row = input.operation ? await def.table.findById(pool, input.operation.entityId) : await def.table.find(pool, input.intentKey);
        print({ intentKey: input.intentKey, rms, row: row ?? null }, !!opts.json, () =>
          [
            `intent ${input.intentKey}`,
            `redis: ${rms.holder ? `held by ${rms.holder.sessionId} (token ${rms.holder.fencingToken}, ${rms.holder.remainingMs} ms left)` : 'not held'}, ${rms.exists ? `exists (token ${rms.existsToken}${rms.existsSessionTag ? `, saga session ${rms.existsSessionTag}…` : ''})` : 'no entity'}`,
            `postgres: ${row ? `row ${row.id} ${row.status} (token ${row.lastFencingToken})` : 'no row'}`,
          ].join('\n'),
        );
      } finally {
        redis.disconnect();
        await pool.end();
      }
    });

  program
    .command('codec-server')
    .description('serve POST /encode and /decode (Temporal\'s codec server convention) so the Temporal UI and CLI read encrypted sagas')
    .action(async () => {
      const cfg = await config();
      const { requireCodecKeys } = await import('./config.js');
      const keys = requireCodecKeys(cfg);
      // Loaded only here: the other commands need no HTTP server.
      const { EncryptionCodec, createCodecServer, isLoopbackHost: isLoopbackAddress } = await import('./codec/index.js');
      const { host, port, token, corsOrigins } = cfg.codecServer;
      const { ConfigError } = await import('./config.js');
      // Off loopback anyone who reaches the port could decrypt: a token is the least it takes.
      if (!token && !isLoopbackAddress(host)) throw new ConfigError('CODEC_SERVER_TOKEN', `required when the codec server listens on ${host}, not a loopback address`);
      const app = createCodecServer({ codec: new EncryptionCodec(keys), corsOrigins, token, namespaces: [cfg.temporal.namespace] });
      await app.listen({ host, port });
      process.stderr.write(
        `codec-server: listening on http://${host}:${port} for namespace ${cfg.temporal.namespace}; UI origins ${corsOrigins.join(', ') || 'none'}; ${token ? 'bearer token required' : 'no token required'}; keys ${keys.map((k) => k.id).join(', ')} (newest first)\n`,
      );
      await new Promise<void>((resolve) => {
        for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
      });
      await app.close();
      process.stderr.write('codec-server: stopped\n');
    });

  program
    .command('serve')
    .description('serve the HTTP API (SAGA_SERVE_ADDRESS; docs/http.md): POST /v1/sagas/{type} with an Idempotency-Key through the gate, status, list, cancel')
    .option('--log-requests', 'log each request (method, URL, status, timing; never headers or bodies)')
    .action(async (opts: { logRequests?: boolean }) => {
      const cfg = await config();
      // Loaded only here: the other commands need no HTTP server. It stops on SIGINT or SIGTERM.
      const { runSagaServer } = await import('./http/index.js');
      const server = await runSagaServer(cfg, { sagas: await sagas(cfg), logRequests: !!opts.logRequests });
      await server.closed;
    });

  program
    .command('setup')
    .description('make the Temporal cluster ready for the sagas: the namespace (if asked), the search attributes, the schedules; idempotent')
    .option('--create-namespace', 'register TEMPORAL_NAMESPACE when it does not exist')
    .option('--retention <duration>', 'the namespace\'s workflow retention, e.g. 7d (applied when made, and to an existing namespace that differs)')
    .option('--json', 'print JSON')
    .action(async (opts: { createNamespace?: boolean; retention?: string; json?: boolean }) => {
      const cfg = await config();
      // A SetupError (a namespace missing and not asked for, a search attribute of another type) exits 1 with its message.
      const { setupCluster } = await import('./setup.js');
      const report = await setupCluster(cfg, { createNamespace: opts.createNamespace, retention: opts.retention });
      print(report, !!opts.json, () =>
        [
          ...report.items.map((i) => `${i.kind} ${i.name}: ${i.action}${i.detail ? ` (${i.detail})` : ''}`),
          `${cfg.temporal.address} namespace ${report.namespace}: ready, ${report.changes === 0 ? 'nothing changed' : `${report.changes} changed`}`,
        ].join('\n'),
      );
    });

  program
    .command('init <dir>')
    .description('write a minimal app that uses this package: one saga type, its migration, a worker, a start script, a test')
    .option('--name <name>', 'the app\'s package name (default: the folder\'s name)')
    .option('--package <spec>', 'what the app depends on for reservation-saga, e.g. a tarball: file:/path/reservation-saga-0.1.0.tgz (default: what this project installed it from, when a file; else this version)')
    .option('--no-install', 'write the app only; do not run npm install in it')
    .action(async (dir: string, opts: { name?: string; package?: string; install: boolean }) => {
      const { initApp, installApp, InitError } = await import('./init.js');
      try {
        const made = await initApp(dir, { name: opts.name, packageSpec: opts.package });
        process.stdout.write(`saga init: wrote ${made.files.length} files into ${made.dir}\n`);
        if (opts.install) {
          process.stdout.write('saga init: installing its dependencies (npm install)\n');
          await installApp(made.dir);
        }
        process.stdout.write(`saga init: next: cd ${dir} && ${opts.install ? '' : 'npm install && '}npm test (its README.md says what the test needs)\n`);
      } catch (err) {
        if (err instanceof InitError) throw new UsageError(err.message);
        throw err;
      }
    });

  program
    .command('worker')
    .description('run a worker for your saga types until SIGINT or SIGTERM (what npm run worker runs)')
    .action(async () => {
      const cfg = await config();
      const [{ runWorker }, types] = await Promise.all([import('./worker.js'), sagas(cfg)]);
      await runWorker({ sagas: types, config: cfg });
    });

  return program;
}

/** Runs the CLI with `argv` (without node and script); resolves to the exit code. */
export async function run(argv: string[]): Promise<number> {
  let exit: number = EXIT.OK;
  const program = buildProgram(async () => (await import('./config.js')).loadConfigOrExit(), (code) => (exit = code));
  try {
    await program.parseAsync(argv, { from: 'user' });
    return exit;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version are not errors; commander already printed its message.
      return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`saga: ${err.message}\n`);
      return EXIT.USAGE;
    }
    // The command that threw one of these has loaded its module already: importing it again is free.
    const [{ SagaInputError }, { ConfigError }] = await Promise.all([import('./sagas/index.js'), import('./config.js')]);
    if (err instanceof SagaInputError) {
      process.stderr.write(`saga: ${err.message}\n`);
      return EXIT.USAGE;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      return EXIT.CONFIG;
    }
    if (err instanceof Error && err.name === 'SagaModuleError') {
      process.stderr.write(`saga: ${err.message}\n`);
      return EXIT.CONFIG;
    }
    process.stderr.write(`saga: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT.ERROR;
  }
}

/** `service.name` of the CLI's spans: the long-running commands are services of their own. */
function serviceName(argv: string[]): string {
  const command = argv[0];
  return command === 'serve' || command === 'worker' || command === 'codec-server' ? `reservation-saga-${command}` : 'reservation-saga-cli';
}

/**
 * The CLI as a process: with the OTLP environment set, traces (started before any command loads
 * ioredis, pg or the HTTP server, so that they are instrumented; flushed before the exit).
 */
export async function main(argv: string[]): Promise<number> {
  let tracing: Awaited<ReturnType<typeof startTracingIfRequested>>;
  try {
    tracing = await startTracingIfRequested(serviceName(argv));
  } catch (err) {
    if (!(err instanceof TracingPackagesMissingError)) throw err;
    process.stderr.write(`configuration error: ${err.message}\n`);
    return EXIT.CONFIG;
  }
  try {
    return await run(argv);
  } finally {
    await tracing?.shutdown();
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => process.exit(code));
}
