/**
 * The composition root: config → clients → activities → Worker. Run it as a process
 * (`npm run worker`); start several on one task queue to share the work.
 */
// First: with tracing asked for, the instrumentations must be registered before ioredis and pg load.
import './tracing/preload';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Context } from '@temporalio/activity';
import { Client } from '@temporalio/client';
import { decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow';
import type { OpenTelemetryWorkflowExporter } from '@temporalio/interceptors-opentelemetry';
import { IllegalStateError, type InjectedSink, type NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import { createActivities } from './activities';
import type { SagaActivities } from './activities/saga';
import { firstEndReport, sagaActivityInterceptor, sagaEventSinks } from './activities/observe';
import { ConfigError, loadConfig, requireIntentSecret, type Config } from './config';
import { checkFencedTable } from './db/fenced-schema';
import { createPool } from './db/pool';
import { jsonLogger } from './logging/json-logger';
import { SagaMetrics, serveMetrics } from './metrics';
import { Rms } from './rms';
import { createRedis } from './rms/connection';
import { PROJECT_ROOT } from './paths';
import { handlerOf, isEntityOperation, recordedInputRefusal, SagaDeclarationError, sagaTypesOf, type SagaList, type SagaType, type SagaTypes } from './sagas';
import { DEFAULT_COMPENSATION_ATTEMPTS, RESERVATION_SAGA_WORKFLOW, SAGA_TYPE, type SagaMemo, type SagaPlan } from './shared';
import { loadSagaModule, locateSagaModule, SagaModuleError } from './sagas/load';
import { ensurePurgeSchedule } from './schedules';
import { connectClient, connectWorker, dataConverterOf } from './temporal';
import { activeTracing, startTracingIfRequested, type Tracing } from './tracing';
import { loadTemporalTracing } from './tracing/env';
import { requireTracingPackages } from './tracing/packages';

/** Prebundled workflow code written by `npm run build`; used when the worker runs from dist/. */
export const WORKFLOW_BUNDLE_PATH = path.join(PROJECT_ROOT, 'dist/workflow-bundle.js');

/**
 * The workflow interceptor that reports each saga's end to its worker (counted and logged): every
 * workflow bundle must include it (`workflowInterceptorModules`), as scripts/bundle-workflows.mjs does.
 */
export const WORKFLOW_INTERCEPTOR_MODULES = [path.join(__dirname, 'workflows', `interceptors${path.extname(__filename)}`)];

/**
 * The OpenTelemetry workflow interceptors (spans for the workflow and each activity it schedules,
 * the trace carried on in the activities' headers): bundled only into the workflow code of a worker
 * that traces. They add headers, never commands, so a saga replays with or without them. Resolved
 * when asked for, not when this module loads: their package is an optional one (src/tracing/packages.ts).
 * @throws TracingPackagesMissingError when a tracing package is not installed.
 */
export function tracingWorkflowInterceptorModules(): string[] {
  requireTracingPackages();
  return [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')];
}

/** Prebundled workflow code with {@link tracingWorkflowInterceptorModules}, for a worker from dist/ that traces. */
export const TRACED_WORKFLOW_BUNDLE_PATH = path.join(PROJECT_ROOT, 'dist/workflow-bundle-traced.js');

/** Attempts of a compensation, for sagas started without timings. */
export { DEFAULT_COMPENSATION_ATTEMPTS } from './shared/saga';

/**
 * What a worker that traces adds: spans for each activity (a child of the workflow's), the workflow
 * interceptor modules, and the sink that hands the workflow's spans, made in the sandbox, to the
 * process's exporters.
 */
async function tracingParts(tracing: Tracing) {
  const otel = await loadTemporalTracing();
  return {
    activity: [(ctx: Context) => ({ inbound: new otel.OpenTelemetryActivityInboundInterceptor(ctx), outbound: new otel.OpenTelemetryActivityOutboundInterceptor(ctx) })],
    workflowModules: tracingWorkflowInterceptorModules(),
    sinks: { exporter: workflowSpanSink(otel.makeWorkflowExporter(tracing.workflowSpans, tracing.resource)) },
  };
}

/** What a workflow's spans carry of it: who it is, never its memo or search attributes. */
const WORKFLOW_SPAN_ATTRIBUTES = ['workflowId', 'runId', 'workflowType', 'taskQueue', 'namespace', 'attempt'] as const;

/**
 * Temporal's sink for the spans made in the workflow sandbox attaches the whole WorkflowInfo to each
 * span, memo and search attributes included, decoded; a saga's memo holds the request's hash, an
 * unkeyed SHA-256 of the request (card number included) that the codec encrypts in history. This one
 * hands it the workflow's identity only.
 */
function workflowSpanSink(sink: InjectedSink<OpenTelemetryWorkflowExporter>): InjectedSink<OpenTelemetryWorkflowExporter> {
  const identity = (info: WorkflowInfo) => Object.fromEntries(WORKFLOW_SPAN_ATTRIBUTES.map((k) => [k, info[k]])) as unknown as WorkflowInfo;
  return { export: { ...sink.export, fn: (info, spans) => sink.export.fn(identity(info), spans) } };
}

/** What {@link createWorker} needs: the app's saga types; tests pass their own connection and bundle. */
export interface StartWorkerOptions {
  /** The app's saga types (defineSaga, defineOperation): a list, or an object of them. */
  sagas: SagaList;
  /** The settings. @default `loadConfig(process.env)` */
  config?: Config;
  /** An existing connection; otherwise one is opened from the config (and closed on shutdown). */
  connection?: NativeConnection;
  /** Workflow code: a prebuilt bundle, or else the bundle in dist/, or else the sources. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** Counts the worker's leases, read-repairs, steps, compensations and ended sagas. @default none */
  metrics?: SagaMetrics;
  /** Extra Worker options (e.g. identity, concurrency). */
  workerOptions?: Partial<WorkerOptions>;
}

/** A worker (not yet running) and everything it owns. */
export interface AppWorker {
  worker: Worker;
  redis: Redis | Cluster;
  pool: Pool;
  /** Closes the clients the worker owns; call after `worker.run()` / `runUntil()` returned. */
  close: () => Promise<void>;
}

/**
 * The Temporal runtime's log (the SDK's, the workflows' and the activities') as JSON lines of LOG_LEVEL
 * and above, for a worker an app makes in a process of its own (its tests, a process that runs more):
 * one line per entry, an error as its name and message. A runtime the process has already (one
 * `runWorker` or the app installed, or one a connection made first) is kept as it is.
 */
function installRuntimeLog(level: Config['observability']['logLevel']): void {
  try {
    Runtime.install({ logger: jsonLogger(level) });
  } catch (err) {
    if (!(err instanceof IllegalStateError)) throw err;
  }
}

/**
 * Creates the clients and the Worker. Run it with `worker.run()` or `worker.runUntil()`, then `close()`.
 * The process's Temporal runtime logs JSON lines at LOG_LEVEL, unless the process installed its own
 * runtime first (`Runtime.install`).
 * @throws ConfigError for a bad setting; SagaDeclarationError for a malformed saga type;
 *   FencedTableSchemaError when a saga type's table lacks a column it needs (named in the message).
 */
export async function createWorker(options: StartWorkerOptions): Promise<AppWorker> {
  const types = sagaTypesOf(options.sagas);
  if (Object.keys(types).length === 0) throw new SagaDeclarationError('(none)', 'a worker needs saga types: pass the app\'s declarations as `sagas`');
  const config = options.config ?? loadConfig(process.env);
  const intentSecret = requireIntentSecret(config);
  installRuntimeLog(config.observability.logLevel);
  const dataConverter = dataConverterOf(config);
  const redis = createRedis(config.redis);
  const pool = createPool(config.db);
  const ownConnection = options.connection === undefined;
  const connection = options.connection ?? (await connectWorker(config.temporal));
  const tracing = activeTracing();
  const prebundled = tracing ? TRACED_WORKFLOW_BUNDLE_PATH : WORKFLOW_BUNDLE_PATH;
  const workflowSource: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = options.workflowBundle
    ? { workflowBundle: options.workflowBundle }
    : __filename.endsWith('.js') && existsSync(prebundled)
      ? { workflowBundle: { codePath: prebundled } }
      : { workflowsPath: path.join(__dirname, 'workflows') };
  const traced = tracing ? await tracingParts(tracing) : undefined;
  const close = async () => {
    await redis.quit().catch(() => redis.disconnect());
    await pool.end();
    if (ownConnection) await connection.close();
  };
  let worker: Worker;
  try {
    await checkSagaTables(pool, types);
    await checkRunningSagas(config, types, dataConverter);
    worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      activities: createActivities({
        redis,
        rms: new Rms(redis, { keyPrefix: config.redis.keyPrefix }),
        pool,
        keyPrefix: config.redis.keyPrefix,
        timings: { ...config.saga, compensationAttempts: DEFAULT_COMPENSATION_ATTEMPTS },
        types,
        intentSecret,
        existsTtlMs: config.entityExistsTtlMs,
        keyRetentionMs: config.idempotencyRetentionMs,
        pickupLeaseMs: config.pickupLeaseMs,
        metrics: options.metrics,
        retentionFloorMs: config.idempotencyRetentionMs,
        workflowService: connection.workflowService,
      }),
      shutdownGraceTime: '10 seconds',
      dataConverter,
      ...workflowSource,
      ...options.workerOptions,
      // A bundle carries its interceptor modules; sources are bundled here with them.
      interceptors: {
        ...options.workerOptions?.interceptors,
        activity: [...(traced?.activity ?? []), sagaActivityInterceptor(options.metrics), ...(options.workerOptions?.interceptors?.activity ?? [])],
        ...('workflowsPath' in workflowSource
          ? { workflowModules: [...WORKFLOW_INTERCEPTOR_MODULES, ...(traced?.workflowModules ?? []), ...(options.workerOptions?.interceptors?.workflowModules ?? [])] }
          : {}),
      },
      sinks: { ...sagaEventSinks(types, options.metrics, firstEndReport(redis, config.redis.keyPrefix)), ...traced?.sinks, ...options.workerOptions?.sinks },
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { worker, redis, pool, close };
}

/**
 * Refuses to start when a saga type's table lacks a column it needs: the fencing columns, its data
 * columns and, for a table an operation claims, `last_operation_token`; or, for a table an operation
 * releases, the shape that holds released rows. One look per table (a
 * creation and its operations share theirs), named by the first type that uses it.
 */
async function checkSagaTables(pool: Pool, types: SagaTypes): Promise<void> {
  const tables = new Map<string, { def: SagaTypes[string]; operations: boolean; releases: boolean }>();
  for (const def of Object.values(types)) {
    const operations = isEntityOperation(def);
    const releases = operations && def.releases === true;
    const seen = tables.get(def.table.table);
    if (!seen) tables.set(def.table.table, { def, operations, releases });
    else {
      seen.operations ||= operations;
      // Named by the type that releases: that is the one the table must be migrated for.
      if (releases && !seen.releases) Object.assign(seen, { def, releases });
    }
  }
  for (const { def, operations, releases } of tables.values()) await checkFencedTable(pool, def.table, { operations, releases, sagaType: def.type });
}

/** Running sagas whose recorded input {@link checkRunningSagas} reads at once. */
const PLANS_READ_AT_ONCE = 16;

/**
 * Refuses to start while a saga of the task queue runs a plan this worker could not finish: a type
 * it does not declare, a step or compensation its type has no handler for, planned or retired
 * (`retiredHandlers`), or input its plan recorded that the type's schema now refuses (every step
 * validates it again: a field dropped from a `.strict()` schema would fail each one). One visibility
 * list of the running sagas, read from their memos (`steps`), then each one's recorded plan from the
 * start of its history, 16 at a time; a saga not planned yet is planned by whichever worker runs it,
 * and one planned by an earlier version recorded no steps: neither is checked.
 * @throws SagaDeclarationError naming the saga and what it needs.
 */
async function checkRunningSagas(config: Config, types: SagaTypes, dataConverter: ReturnType<typeof dataConverterOf>): Promise<void> {
  const connection = await connectClient(config.temporal);
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter });
    const query = `WorkflowType = "${RESERVATION_SAGA_WORKFLOW}" AND ExecutionStatus = "Running" AND TaskQueue = "${config.temporal.taskQueue}"`;
    const planned: { workflowId: string; runId: string; def: SagaType<unknown> }[] = [];
    for await (const running of client.workflow.list({ query, pageSize: 1000 })) {
      const type = running.typedSearchAttributes.get(SAGA_TYPE);
      const { steps } = (running.memo ?? {}) as SagaMemo;
      if (type === undefined || steps === undefined) continue;
      const def = Object.hasOwn(types, type) ? types[type] : undefined;
      if (!def) {
        throw new SagaDeclarationError(type, `saga ${running.workflowId} of this type is running on task queue ${config.temporal.taskQueue}, and this worker does not declare the type: declare it until such sagas end`);
      }
      const missing = steps.find((name) => handlerOf(def, name) === undefined);
      if (missing !== undefined) {
        throw new SagaDeclarationError(type, `saga ${running.workflowId} is running with "${missing}" in its plan, and the type has no handler for it: keep it in retiredHandlers until such sagas end`);
      }
      planned.push({ workflowId: running.workflowId, runId: running.runId, def });
    }
    for (let i = 0; i < planned.length; i += PLANS_READ_AT_ONCE) {
      await Promise.all(
        planned.slice(i, i + PLANS_READ_AT_ONCE).map(async ({ workflowId, runId, def }) => {
          const plan = await recordedPlanOf(client, { workflowId, runId });
          const refused = plan && recordedInputRefusal(def, plan.payload);
          if (refused !== undefined) {
            throw new SagaDeclarationError(
              def.type,
              `saga ${workflowId} is running with input its plan validated, and the type's schema now refuses it (${refused}): accept such input until such sagas end`,
            );
          }
        }),
      );
    }
  } finally {
    await connection.close();
  }
}

/** The marker a local activity's result is recorded in. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** The local activity that derives a saga's plan. */
const PLAN_ACTIVITY: keyof SagaActivities = 'planSaga';

/**
 * A running saga's plan as its history recorded it: the result of its `planSaga` local activity, a
 * marker among its first events. Undefined when there is none (not planned yet).
 */
async function recordedPlanOf(client: Client, execution: { workflowId: string; runId: string }): Promise<SagaPlan | undefined> {
  const converter = client.options.loadedDataConverter;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.getWorkflowExecutionHistory({
      namespace: client.options.namespace,
      execution,
      maximumPageSize: 50,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const event of page.history?.events ?? []) {
      const marker = event.markerRecordedEventAttributes;
      if (marker?.markerName !== LOCAL_ACTIVITY_MARKER) continue;
      const recorded = await decodeFromPayloadsAtIndex<{ activity_type?: string } | undefined>(converter, 0, marker.details?.data?.payloads);
      if (recorded?.activity_type !== PLAN_ACTIVITY) continue;
      return decodeFromPayloadsAtIndex<SagaPlan>(converter, 0, marker.details?.result?.payloads);
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return undefined;
}

/** Options of {@link runWorker}. */
export interface RunWorkerOptions {
  /** The app's saga types. */
  sagas: SagaList | ((config: Config) => SagaList | Promise<SagaList>);
  /** The settings. @default `loadConfig(process.env)` */
  config?: Config;
}

/**
 * A worker process: the Temporal runtime's JSON logs, metrics and traces when the config asks for
 * them, the hourly purge schedule, and the Worker, polling until SIGINT or SIGTERM (in-flight tasks
 * finish); then everything it opened is closed.
 */
export async function runWorker(options: RunWorkerOptions): Promise<void> {
  const config = options.config ?? loadConfig(process.env);
  const sagas = typeof options.sagas === 'function' ? await options.sagas(config) : options.sagas;
  const { metrics: metricsAddress, temporalMetricsAddress, logLevel } = config.observability;
  // Before any connection: the SDK's log as JSON lines, and its own metrics when asked for.
  Runtime.install({
    logger: jsonLogger(logLevel),
    ...(temporalMetricsAddress
      ? { telemetryOptions: { metrics: { prometheus: { bindAddress: temporalMetricsAddress, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true } } } }
      : {}),
  });
  const types = sagaTypesOf(sagas);
  const metrics = metricsAddress ? new SagaMetrics({ types }) : undefined;
  // Traces when the OTLP environment asks for them (the instrumentations are in since ./tracing/preload).
  const tracing = await startTracingIfRequested('reservation-saga-worker');
  if (tracing) process.stderr.write('worker: traces exported as the OTEL_* environment says\n');
  // The Worker stops polling on SIGINT/SIGTERM and lets in-flight tasks finish (shutdownGraceTime).
  const { worker, close } = await createWorker({ sagas: types, config, metrics });
  const endpoint = metrics && metricsAddress ? await serveMetrics(metrics.registry, metricsAddress) : undefined;
  if (endpoint) process.stderr.write(`worker: metrics on ${endpoint.url}\n`);
  if (temporalMetricsAddress) process.stderr.write(`worker: Temporal SDK metrics on http://${temporalMetricsAddress}/metrics\n`);
  // The hourly purge of the step idempotency store, made once per task queue (visible in the UI's Schedules).
  const connection = await connectClient(config.temporal);
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter: dataConverterOf(config) });
    // Made when missing; its retention is saga setup's to change (workers with other settings would
    // rewrite it back and forth). This worker's purges never go below its own retention either way.
    const { scheduleId, action } = await ensurePurgeSchedule(client, config, { update: false });
    process.stderr.write(
      action === 'differs'
        ? `worker: schedule ${scheduleId} in place with another retention than this worker's ${config.idempotencyRetentionMs} ms (saga setup sets it); this worker purges nothing younger than its own\n`
        : `worker: schedule ${scheduleId} ${action === 'unchanged' ? 'in place' : action} (purges idempotency records older than ${config.idempotencyRetentionMs} ms)\n`,
    );
  } finally {
    await connection.close();
  }
  process.stderr.write(
    `worker: polling ${config.temporal.address} namespace=${config.temporal.namespace} task-queue=${config.temporal.taskQueue}${config.simulations ? ' simulations=on (test knobs accepted: never in production)' : ''}\n`,
  );
  try {
    await worker.run();
  } finally {
    await close();
    await endpoint?.close();
    await tracing?.shutdown();
  }
  process.stderr.write('worker: stopped\n');
}

/** `npm run worker`: the saga types of the module the app names (see src/sagas/load.ts). */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const sagas = await loadSagaModule(locateSagaModule(), config);
  await runWorker({ sagas, config });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    if (err instanceof SagaModuleError) {
      process.stderr.write(`worker: ${err.message}\n`);
      process.exit(78);
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(78);
    }
    process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
