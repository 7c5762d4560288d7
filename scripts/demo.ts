/**
 * `make demo`: brings up the dev stack (scripts/dev-up), starts one worker process, runs a scripted
 * scenario of real `order` requests with progress, and prints a summary table: each request's answer
 * and how long the gate took to give it, and a link to its saga in the Temporal UI (a request
 * rejected at the gate has none), then the gate's counts. Then it leaves the stack running, with what
 * to try next, until Ctrl-C, which stops what the demo started. With --once it stops at once and
 * exits 0 only if every request was answered, and every saga ended (or waits for an operator), as the scenario expects.
 *
 * Environment: the usual config variables (src/config.ts); the demo's defaults are a short lease
 * (LEASE_MS=3000, HEARTBEAT_INTERVAL_MS=500, HEARTBEAT_TIMEOUT_MS=1500) so the long write visibly
 * outlives its initial lease, and it always turns SAGA_SIMULATIONS on (for its worker and its client),
 * since the long write is an order's test knob `simulate.writeDelayMs`. TEMPORAL_DEV_PORT, TEMPORAL_DEV_UI_PORT, TEMPORAL_DEV_PROVIDER_PORT, TEMPORAL_DEV_SERVE_PORT and TEMPORAL_DEV_DATA_DIR place
 * the dev server (see scripts/dev-up); TEMPORAL_ADDRESS and TEMPORAL_UI_URL follow them unless set.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { SagaClient } from '../src/client';
import { loadConfigOrExit, type Config } from '../src/config';
import { devSecretsPath, withDevSecrets } from './dev-secrets';
import { Rms } from '../src/rms';
import { createRedis } from '../src/rms/connection';
import { formatTable, gateReport } from './demo/report';
import { runScenario, type DemoRow } from './demo/scenario';
import { openSeatShop, seats, type SeatShop } from './demo/seats';
import { ROOT, devCodecEndpoint, devUp, freePort, startWorker, temporalCli, type DevStack, type WorkerProcess } from './demo/stack';
import { orderSagas } from '../examples/orders/src/sagas';

/** The demo's short timings, unless the environment sets them. */
const DEMO_TIMINGS = { LEASE_MS: '3000', HEARTBEAT_INTERVAL_MS: '500', HEARTBEAT_TIMEOUT_MS: '1500' };

interface Options {
  once?: boolean;
  summaryJson?: string;
}

function parseOptions(argv: string[]): Options {
  const program = new Command('demo')
    .description('Run the reservation-saga demo against the local dev stack (make demo ARGS=...)')
    .option('--once', 'run the scenario, print the table, stop what the demo started; exit 0 only if every row is as expected')
    .option('--summary-json <file>', 'also write the table as JSON (used by the Temporal UI test)')
    .allowExcessArguments(false);
  program.parse(argv, { from: 'user' });
  return program.opts<Options>();
}

/**
 * The environment of the demo and its worker: demo timings, the saga simulations (the long write's
 * test knob) and addresses that follow the dev ports.
 */
function demoEnv(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base, SAGA_SIMULATIONS: 'true' };
  for (const [name, value] of Object.entries(DEMO_TIMINGS)) if (!env[name]) env[name] = value;
  if (env.TEMPORAL_DEV_PORT && !env.TEMPORAL_ADDRESS) env.TEMPORAL_ADDRESS = `127.0.0.1:${env.TEMPORAL_DEV_PORT}`;
  if (env.TEMPORAL_DEV_UI_PORT && !env.TEMPORAL_UI_URL) env.TEMPORAL_UI_URL = `http://127.0.0.1:${env.TEMPORAL_DEV_UI_PORT}`;
  if (env.TEMPORAL_DEV_PROVIDER_PORT && !env.PAYMENT_PROVIDER_URL) env.PAYMENT_PROVIDER_URL = `http://127.0.0.1:${env.TEMPORAL_DEV_PROVIDER_PORT}`;
  return env;
}

const started = Date.now();
function say(line: string): void {
  const t = `+${((Date.now() - started) / 1000).toFixed(1)}s`.padStart(7);
  process.stdout.write(line ? `${t}  ${line}\n` : '\n');
}

/** The worker's metrics endpoints, as it said at start: its own (METRICS_ADDRESS) and the Temporal SDK's (TEMPORAL_METRICS_ADDRESS). */
function metricsUrls(startOutput: string): { own?: string; sdk?: string } {
  return { own: /^worker: metrics on (\S+)$/m.exec(startOutput)?.[1], sdk: /^worker: Temporal SDK metrics on (\S+)$/m.exec(startOutput)?.[1] };
}

function nextSteps(config: Config, rows: readonly DemoRow[], dataDir: string, metrics: { own?: string; sdk?: string }): string {
  const env: string[] = [];
  if (config.temporal.address !== '127.0.0.1:7233') env.push(`export TEMPORAL_ADDRESS=${config.temporal.address}`);
  if (config.temporal.uiUrl !== 'http://127.0.0.1:8233') env.push(`export TEMPORAL_UI_URL=${config.temporal.uiUrl}`);
  // bin/saga needs the worker's secrets: the development ones of this checkout.
  const secrets = path.relative(ROOT, devSecretsPath(dataDir));
  env.push(`set -a; . ${secrets.startsWith('..') ? devSecretsPath(dataDir) : secrets}; set +a`);
  const byId = (id: string) => rows.find((r) => r.id === id);
  const compensated = byId('short-stock')?.workflowId ?? '<workflow id>';
  const ui = `${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}/workflows`;
  const query = (q: string) => `${ui}?query=${encodeURIComponent(q)}`;
  const logPath = path.relative(ROOT, path.join(dataDir, 'demo-worker.log'));
  const cart = {
    customer: `you-${Date.now().toString(36)}`,
    items: [{ sku: 'widget', quantity: 1, priceCents: 500 }],
    payment: { card: '4242424242424242' },
  };
  const example = JSON.stringify(cart);
  // The HTTP API (saga serve, started by dev-up), as a caller in any language would use it: its
  // development token is in dev.env (client `dev`), read by the shell, never printed.
  const api = `http://127.0.0.1:${process.env.TEMPORAL_DEV_SERVE_PORT ?? 8236}`;
  const apiKey = `try-${Date.now().toString(36)}`;
  const curl = (key: string, body: string) =>
    `curl -sS -i ${api}/v1/sagas/order -H "Authorization: Bearer \${SAGA_SERVE_TOKENS#dev:}" -H 'Idempotency-Key: ${key}' -H 'Content-Type: application/json' -d '${body}'`;
  const other = JSON.stringify({ ...cart, customer: `${cart.customer}-b` });
  return [
    'What to try next (the dev server and the worker keep running; Ctrl-C stops what the demo started):',
    ...env.map((e) => `  ${e}`),
    `  bin/saga status ${compensated}          phase, steps, compensations, errors`,
    '  bin/saga list --outcome COMPENSATED                sagas found by their SagaOutcome search attribute',
    '  bin/saga list --needs-attention                    sagas waiting for an operator (a compensation failed): bin/saga redrive <id> once the cause is fixed',
    `  bin/saga start --type order --data '${example}' --wait`,
    '      a new saga, its phases shown as they happen; run it again: DUPLICATE at the gate (exit 3), no saga started',
    `  bin/saga intent --type order --data '${example}'`,
    '      that cart\'s reservation in Redis and its row in PostgreSQL',
    `  The HTTP API (saga serve, ${api}; docs/http.md), one curl per answer:`,
    `  ${curl(apiKey, example)}`,
    '      201 Created, Location of the saga (SUCCESS); the same command again: the same answer, replayed (Idempotent-Replayed: true)',
    `  ${curl(`${apiKey}-again`, example)}`,
    '      409 duplicate (the order exists), or 409 conflict with Retry-After while the first one still runs: no saga started',
    `  ${curl(apiKey, other)}`,
    '      422: the idempotency key reused with another body',
    `  curl -sS ${api}/v1/sagas/order-dev.${apiKey} -H "Authorization: Bearer \${SAGA_SERVE_TOKENS#dev:}"`,
    '      the saga: phase, steps, outcome',
    `  Temporal UI, sagas by outcome: ${query('SagaOutcome = "COMPENSATED"')}`,
    `  other searches there: SagaType = "order" AND SagaOutcome = "COMPLETED"   or   IntentKey = "${byId('retry-1')?.intentKey ?? ''}"`,
    '  requests rejected at the gate have no saga, so no search finds them: the table\'s gate counts do',
    `  the worker's log (one JSON line per saga event): ${logPath.startsWith('..') ? path.join(dataDir, 'demo-worker.log') : logPath}`,
    ...(metrics.own ? [`  curl -sS ${metrics.own} | grep ^saga_        the worker's saga metrics (docs/operations.md)`] : []),
    ...(metrics.sdk ? [`  curl -sS ${metrics.sdk} | grep ^temporal_    the Temporal SDK's metrics of the worker`] : []),
    `  the payment provider's log (every charge and refund): ${path.relative(ROOT, path.join(dataDir, 'payment-provider.log')).startsWith('..') ? path.join(dataDir, 'payment-provider.log') : path.relative(ROOT, path.join(dataDir, 'payment-provider.log'))}`,
  ].join('\n');
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const base = demoEnv(process.env);
  const dataDir = base.TEMPORAL_DEV_DATA_DIR ?? path.join(ROOT, '.data');
  mkdirSync(dataDir, { recursive: true });
  // The development secrets of this checkout (made on first use), unless the environment sets its own.
  const { env, made } = withDevSecrets(base, dataDir);
  if (made.length > 0) say(`made development secrets (${made.join(', ')}) in ${devSecretsPath(dataDir)}: for this checkout only`);
  const config = loadConfigOrExit(env);

  let stack: DevStack | undefined;
  let worker: WorkerProcess | undefined;
  let metrics: { own?: string; sdk?: string } = {};
  let client: SagaClient | undefined;
  let seatShop: SeatShop | undefined;
  let redis: ReturnType<typeof createRedis> | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await client?.close().catch(() => undefined);
      await seatShop?.close();
      redis?.disconnect();
      if (worker) {
        say(`stopping the worker (pid ${worker.pid})`);
        await worker.stop();
      }
      await stack?.stop();
    })());
  // Ctrl-C (SIGINT reaches every process of the terminal's group; the dev server ignores it, having
  // been started in the background by dev-up), SIGTERM, or the terminal closing (SIGHUP): stop what
  // the demo started, then exit.
  // Once the scenario is done and the demo waits, Ctrl-C is its normal end: the scenario's verdict
  // is the exit status then.
  let verdict: number | undefined;
  const exitCodes = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;
  for (const [signal, code] of Object.entries(exitCodes)) {
    process.on(signal, () => {
      void stop().finally(() => process.exit(verdict ?? code));
    });
  }

  try {
    stack = await devUp(env);
    // Its metrics on ports of its own, unless the environment names them.
    // The Temporal SDK's metrics need a real port: it cannot take port 0 and say which it chose.
    const workerEnv = { METRICS_ADDRESS: '127.0.0.1:0', TEMPORAL_METRICS_ADDRESS: `127.0.0.1:${await freePort()}`, ...env };
    worker = await startWorker(workerEnv, path.join(dataDir, 'demo-worker.log'));
    say(`worker started (pid ${worker.pid}, task queue ${config.temporal.taskQueue}); its log: ${worker.logPath}`);
    metrics = metricsUrls(worker.startOutput);
    say(`its metrics: ${metrics.own ?? 'off'} (saga_*), the Temporal SDK's: ${metrics.sdk ?? 'off'} (temporal_*)`);
    client = await SagaClient.connect({ sagas: orderSagas({ simulations: config.simulations }), config });
    redis = createRedis(config.redis);
    const runId = `${Date.now().toString(36).slice(-4)}${randomBytes(2).toString('hex')}`;
    // The provider's log lines of this run (when dev-up started the provider in this data folder).
    const providerLog = path.join(dataDir, 'payment-provider.log');
    const providerLogFrom = existsSync(providerLog) ? statSync(providerLog).size : undefined;
    say(`run ${runId}: lease ${config.saga.leaseMs} ms, heartbeat every ${config.saga.heartbeatIntervalMs} ms, heartbeat timeout ${config.saga.heartbeatTimeoutMs} ms`);
    say('');
    // The tickets example beside the orders: its payment service, webhook and worker, in this process.
    const ticketsLog = path.join(dataDir, 'demo-tickets-worker.log');
    seatShop = await openSeatShop(config, randomBytes(32).toString('base64'), ticketsLog);
    say(`the tickets example: a worker on task queue ${config.temporal.taskQueue}-tickets, its payment service and webhook; its log: ${path.relative(ROOT, ticketsLog)}`);
    const scenario = {
      client,
      rms: new Rms(redis, { keyPrefix: config.redis.keyPrefix }),
      taskQueue: config.temporal.taskQueue,
      temporal: await temporalCli(env, config.temporal),
      codecEndpoint: devCodecEndpoint(env),
      runId,
      leaseMs: config.saga.leaseMs,
      say,
    };
    const rows = [...(await runScenario(scenario)), ...(await seats(scenario, seatShop))];
    const good = rows.filter((r) => r.ok).length;
    const counts: Record<string, number> = { ...client.gateCounts };
    for (const [status, n] of Object.entries(seatShop.client.gateCounts)) counts[status] = (counts[status] ?? 0) + n;
    const gate = gateReport(counts, rows);
    process.stdout.write(
      [
        formatTable(rows),
        '',
        `${good} of ${rows.length} requests were answered, and their sagas ended (or wait), as the scenario expects.`,
        'answer ms: from the SagaClient.start call to its answer (the Temporal CLI\'s request is not timed).',
        gate.text,
        '',
      ].join('\n'),
    );
    if (providerLogFrom !== undefined) {
      const lines = readFileSync(providerLog).subarray(providerLogFrom).toString('utf8').split('\n').filter((l) => l.startsWith('provider:'));
      process.stdout.write(
        [`The payment provider's log during the run (${path.relative(ROOT, providerLog).startsWith('..') ? providerLog : path.relative(ROOT, providerLog)}): each charge and refund, keyed by <saga>:<step>`, ...lines.map((l) => `  ${l}`), ''].join('\n'),
      );
    }
    if (options.summaryJson) writeFileSync(options.summaryJson, `${JSON.stringify({ runId, rows, gateCounts: counts }, null, 2)}\n`);
    const code = good === rows.length && gate.ok ? 0 : 1;
    if (options.once) return code;
    verdict = code;
    process.stdout.write(`\n${nextSteps(config, rows, dataDir, metrics)}\n`);
    // Until a signal: the handlers above stop everything and exit.
    setInterval(() => undefined, 1 << 30);
    return await new Promise<never>(() => undefined);
  } finally {
    await stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`demo: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
