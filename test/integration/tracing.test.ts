/**
 * OpenTelemetry traces, read as an operator reads them:
 * - in this process, with an in-memory span exporter: `SagaClient.start`, the workflow and every
 *   activity of one saga in one trace, and a rejected request in a trace of its own with no workflow;
 * - across processes, as deployed: `saga serve` and a worker process exporting over OTLP/HTTP (from
 *   the standard OTEL_* variables) to a collector this test serves. One trace runs from the HTTP
 *   request through the gate's Redis and PostgreSQL calls, the workflow start, the workflow, each
 *   activity and their own Redis, PostgreSQL and HTTP calls; no span carries the saga's data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { context, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SagaClient } from '../../src/client';
import type { Config } from '../../src/config';
import { SagaOutcome, type SagaMemo } from '../../src/shared';
import { activeTracing } from '../../src/tracing';
import { startTracing } from '../../src/tracing/sdk';
import { createWorker } from '../../src/worker';
import { envOf, killWorkerProcesses, startWorkerProcess } from '../helpers/processes';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The activities one completed order saga runs, in order (the first two are local activities): its
 * write registers the row, and its last step, in our database, completes it (write-registers).
 */
const ORDER_ACTIVITIES = ['planSaga', 'reserveIntent', 'writeEntity', 'runStep', 'runStep'];

/** Whether `names` hold a span of each of the saga's activities, as many as it runs, and its workflow's. */
const allOf = (names: string[]) =>
  names.includes('RunWorkflow:reservationSaga') && names.filter((n) => n === 'RunActivity:runStep').length >= ORDER_ACTIVITIES.filter((a) => a === 'runStep').length;

let h: SagaHarness;

beforeAll(async () => {
  // A lease far longer than any pause of a loaded machine: these tests are about traces, not leases.
  h = await startHarness('tracing', { worker: false, env: { LEASE_MS: '30000' } });
});

afterAll(async () => {
  killWorkerProcesses();
  await h?.stop();
});

describe('traces in one process (in-memory span exporter)', () => {
  const exporter = new InMemorySpanExporter();
  let client: SagaClient;
  let stopWorker: () => Promise<void>;

  beforeAll(async () => {
    const tracing = startTracing({ serviceName: 'tracing-test', spanProcessors: [new SimpleSpanProcessor(exporter)] });
    expect(tracing).toBeDefined();
    // Made after tracing started, as a process's entry point makes them: both pick it up. An operator's
    // client: its `result` reads a saga without describing it first for its owner, so the spans of a
    // saga are those of its start, its workflow and its activities (an owner's `result` adds a
    // DescribeWorkflow span of the caller's own, in the caller's trace).
    client = await SagaClient.connect({ sagas: h.types, config: h.config, operator: true });
    const connection = await NativeConnection.connect({ address: h.config.temporal.address });
    // No prebuilt bundle: the worker bundles its workflows with the tracing interceptors, as `src/worker.ts` run by tsx does.
    const app = await createWorker({ sagas: h.types, config: h.config, connection });
    const running = app.worker.run();
    stopWorker = async () => {
      app.worker.shutdown();
      await running;
      await app.close();
      await connection.close();
    };
  }, 120_000);

  afterAll(async () => {
    await stopWorker?.();
    await client?.close();
    await activeTracing()?.shutdown();
  });

  it('follows one saga from SagaClient.start through the workflow into every activity, in one trace', async () => {
    const started = await client.start('order', order());
    expect(started.reservation.status).toBe('SUCCESS');
    expect((await client.result(started.workflowId)).outcome).toBe(SagaOutcome.COMPLETED);

    const root = exporter.getFinishedSpans().find((s) => s.name === 'saga.start' && s.attributes['temporal.workflow_id'] === started.workflowId);
    expect(root).toBeDefined();
    expect(root!.attributes).toMatchObject({ 'saga.type': 'order', 'saga.answer': 'SUCCESS', 'saga.started': true });
    expect(root!.parentSpanId).toBeUndefined();
    const traceId = root!.spanContext().traceId;
    // (The workflow's span ends with the workflow, after its last activity's.)
    const inTrace = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    const names = await eventually(
      async () => inTrace().map((s) => s.name),
      allOf,
      'the workflow and last activity spans',
    );
    expect(names).toEqual(expect.arrayContaining(['StartWorkflow:reservationSaga', 'RunWorkflow:reservationSaga', ...ORDER_ACTIVITIES.map((a) => `RunActivity:${a}`)]));
    // Every span of this saga's workflow and activities is in that trace: none started one of its own.
    const ofSaga = exporter.getFinishedSpans().filter((s) => s.attributes.temporalWorkflowId === started.workflowId);
    expect(ofSaga.length).toBeGreaterThanOrEqual(ORDER_ACTIVITIES.length + 1);
    expect(ofSaga.filter((s) => s.spanContext().traceId !== traceId).map((s) => s.name)).toEqual([]);
    // And the chain is unbroken: each span's parent is in the trace, up to saga.start.
    expect(orphans(inTrace())).toEqual([]);

    // The workflow's spans name their workflow, but carry nothing of its memo: the request's hash
    // there is an unkeyed SHA-256 of the request, card included (the codec encrypts it in history).
    const { memo } = await client.temporal.workflow.getHandle(started.workflowId).describe();
    const requestHash = (memo as SagaMemo).requestHash!;
    expect(requestHash).toMatch(/^[0-9a-f]{64}$/);
    const fromWorkflow = inTrace().filter((s) => s.name === 'RunWorkflow:reservationSaga' || s.name.startsWith('StartActivity:'));
    expect(fromWorkflow.length).toBeGreaterThan(ORDER_ACTIVITIES.length);
    for (const span of fromWorkflow) {
      expect(span.attributes, span.name).toMatchObject({ workflowId: started.workflowId, workflowType: 'reservationSaga' });
      expect(JSON.stringify(span.attributes), span.name).not.toContain(requestHash);
    }
  });

  it('answers a duplicate in a trace of its own, with no workflow in it', async () => {
    const cart = order();
    const first = await client.start('order', cart);
    expect((await client.result(first.workflowId)).outcome).toBe(SagaOutcome.COMPLETED);
    exporter.reset();

    const duplicate = await client.start('order', cart);
    expect(duplicate.reservation.status).toBe('DUPLICATE');
    const spans = exporter.getFinishedSpans();
    const root = spans.find((s) => s.name === 'saga.start');
    expect(root?.attributes).toMatchObject({ 'saga.answer': 'DUPLICATE', 'saga.started': false });
    const inTrace = spans.filter((s) => s.spanContext().traceId === root!.spanContext().traceId);
    expect(inTrace.filter((s) => /Workflow|Activity/.test(s.name)).map((s) => s.name)).toEqual([]);
  });

  it('keeps a request whose trace is not sampled unsampled: no span for its answer, and none for the saga it starts', async () => {
    // The caller's trace is not sampled (an HTTP request a sampler dropped): the default sampler follows it.
    const unsampled = trace.setSpanContext(ROOT_CONTEXT, { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex'), traceFlags: TraceFlags.NONE });
    const cart = order();
    exporter.reset();
    const started = await context.with(unsampled, () => client.start('order', cart));
    expect(started.reservation.status).toBe('SUCCESS');
    expect((await client.result(started.workflowId)).outcome).toBe(SagaOutcome.COMPLETED);
    const duplicate = await context.with(unsampled, () => client.start('order', cart));
    expect(duplicate.reservation.status).toBe('DUPLICATE');
    // The saga's start carried the decision on: its workflow and activities recorded nothing either.
    const recorded = exporter.getFinishedSpans();
    expect(recorded.filter((s) => s.name === 'saga.start').map((s) => s.attributes['saga.answer'])).toEqual([]);
    expect(recorded.filter((s) => s.attributes.temporalWorkflowId === started.workflowId || s.attributes.workflowId === started.workflowId).map((s) => s.name)).toEqual([]);
  });

  it('traces a saga whose starter carries no trace from its workflow on, every activity in that trace', async () => {
    // The harness's SagaClient starts workflows with a Temporal client that has no tracing
    // interceptor, as a process that does not trace (tracing off on `saga serve`, say) would.
    const started = await h.client.start('order', order());
    expect(started.reservation.status).toBe('SUCCESS');
    expect((await client.result(started.workflowId)).outcome).toBe(SagaOutcome.COMPLETED);

    const ofSaga = await eventually(
      // (Activity spans name the workflow `temporalWorkflowId`, the workflow's own span `workflowId`.)
      async () => exporter.getFinishedSpans().filter((s) => (s.attributes.temporalWorkflowId ?? s.attributes.workflowId) === started.workflowId),
      (spans) => allOf(spans.map((s) => s.name)),
      'the workflow and last activity spans',
    );
    const workflow = ofSaga.find((s) => s.name === 'RunWorkflow:reservationSaga')!;
    // The root of its trace (a span from the workflow sandbox says so with null).
    expect(workflow.parentSpanId ?? undefined).toBeUndefined();
    const traceId = workflow.spanContext().traceId;
    expect(ofSaga.filter((s) => s.spanContext().traceId !== traceId).map((s) => s.name)).toEqual([]);
    const inTrace = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    expect(inTrace.map((s) => s.name)).toEqual(expect.arrayContaining(ORDER_ACTIVITIES.map((a) => `RunActivity:${a}`)));
    expect(orphans(inTrace)).toEqual([]);
    // The starter's own span is in a trace of its own.
    const start = exporter.getFinishedSpans().find((s) => s.name === 'saga.start' && s.attributes['temporal.workflow_id'] === started.workflowId);
    expect(start?.spanContext().traceId).not.toBe(traceId);
  });
});

/** Spans whose parent is not among `spans`, the root excepted. */
function orphans(spans: ReadableSpan[]): string[] {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  return spans.filter((s) => s.parentSpanId !== undefined && !ids.has(s.parentSpanId)).map((s) => s.name);
}

/** A span as an OTLP/HTTP JSON export carries it, with its process's service name. */
interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

interface OtlpAttribute {
  key: string;
  value: Record<string, unknown>;
}

/** A collector of OTLP/HTTP JSON trace exports (POST /v1/traces), keeping every span it receives. */
async function startCollector(): Promise<{ url: string; spans: ExportedSpan[]; close: () => Promise<void> }> {
  const spans: ExportedSpan[] = [];
  const flat = (attributes: OtlpAttribute[] = []) => Object.fromEntries(attributes.map((a) => [a.key, Object.values(a.value)[0]]));
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const payload = JSON.parse(body) as {
        resourceSpans: { resource: { attributes: OtlpAttribute[] }; scopeSpans: { spans: (Omit<ExportedSpan, 'service' | 'attributes'> & { attributes: OtlpAttribute[] })[] }[] }[];
      };
      for (const rs of payload.resourceSpans) {
        const service = String(flat(rs.resource.attributes)['service.name']);
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) spans.push({ ...s, parentSpanId: s.parentSpanId || undefined, service, attributes: flat(s.attributes) });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('traces across processes (OTLP/HTTP from the OTEL_* environment)', () => {
  const CALLER = { id: 'tracing', token: 'tracing-test-token-0123456789' };
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let serve: { child: ChildProcess; url: string; output: () => string };
  let worker: Awaited<ReturnType<typeof startWorkerProcess>>;

  beforeAll(async () => {
    collector = await startCollector();
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      // Export within a tenth of a second of a span's end, so the test need not wait for the default 5 s.
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    worker = await startWorkerProcess(h.config, otel);
    const serveConfig: Config = { ...h.config, serve: { ...h.config.serve, host: '127.0.0.1', port: 0, clients: [CALLER] } };
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'serve'], { cwd: ROOT, env: { ...envOf(serveConfig), ...otel }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const url = await eventually(async () => /serve: listening on (http:\S+)/.exec(output)?.[1], (u) => u !== undefined || child.exitCode !== null, 'saga serve to listen', 60_000);
    if (!url) throw new Error(`saga serve exited:\n${output}`);
    serve = { child, url, output: () => output };
  }, 120_000);

  afterAll(async () => {
    for (const child of [serve?.child, worker?.child]) {
      if (!child || child.exitCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await collector?.close();
  });

  it('is one trace from the HTTP request to the last activity, through Redis, PostgreSQL and HTTP calls, with no saga data in it', async () => {
    const cart = order();
    const res = await fetch(`${serve.url}/v1/sagas/order`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER.token}`, 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
      body: JSON.stringify(cart),
    });
    expect(res.status).toBe(201);
    const { workflowId } = (await res.json()) as { workflowId: string };
    expect((await h.client.result(workflowId)).outcome).toBe(SagaOutcome.COMPLETED);

    const last = await eventually(
      async () => collector.spans.find((s) => s.name === 'RunActivity:runStep' && s.attributes.temporalWorkflowId === workflowId),
      (s) => s !== undefined,
      'a step activity span at the collector',
    );
    const traceId = last!.traceId;
    // The request's own span at saga serve is the trace's root.
    const request = await eventually(
      async () => collector.spans.find((s) => s.traceId === traceId && s.service === 'reservation-saga-serve' && s.kind === 2 && s.parentSpanId === undefined),
      (s) => s !== undefined,
      'the HTTP request span of saga serve',
    );
    expect(request!.attributes['http.method']).toBe('POST');
    const inTrace = () => collector.spans.filter((s) => s.traceId === traceId);
    const names = (service: string) => inTrace().filter((s) => s.service === service).map((s) => s.name);
    // saga serve: the answer's span, the gate's reservation (Redis) and truth check (PostgreSQL), the workflow start.
    await eventually(async () => names('reservation-saga-serve'), (n) => n.includes('saga.start') && n.includes('StartWorkflow:reservationSaga'), 'the spans of saga serve');
    const serveSpans = inTrace().filter((s) => s.service === 'reservation-saga-serve');
    expect(serveSpans.some((s) => s.attributes['db.system'] === 'redis')).toBe(true);
    expect(serveSpans.some((s) => s.attributes['db.system'] === 'postgresql')).toBe(true);
    // The worker: the workflow, each activity, and their Redis, PostgreSQL and HTTP (the payment provider) calls.
    // (The workflow's span ends with the workflow, after its last activity's.)
    const expected = ['RunWorkflow:reservationSaga', ...ORDER_ACTIVITIES.map((a) => `RunActivity:${a}`)];
    await eventually(async () => names('reservation-saga-worker'), (n) => expected.every((e) => n.includes(e)), 'the spans of the worker');
    const workerSpans = inTrace().filter((s) => s.service === 'reservation-saga-worker');
    expect(workerSpans.some((s) => s.attributes['db.system'] === 'redis')).toBe(true);
    expect(workerSpans.some((s) => s.attributes['db.system'] === 'postgresql')).toBe(true);
    expect(workerSpans.some((s) => s.kind === 3 && String(s.attributes['url.full'] ?? s.attributes['http.url']).startsWith(h.providerUrl))).toBe(true);
    // No span of the saga started a trace of its own.
    expect(collector.spans.filter((s) => s.attributes.temporalWorkflowId === workflowId && s.traceId !== traceId).map((s) => s.name)).toEqual([]);

    // Nothing of the request's data in any span: not the customer, not the card, not the caller's token (a header).
    const text = JSON.stringify(collector.spans);
    expect(text).not.toContain(cart.customer);
    expect(text).not.toContain(cart.payment.card);
    expect(text).not.toContain(CALLER.token);
    // Redis spans name the command only: no key (an intent key), no argument (a session tag, a token).
    for (const s of collector.spans.filter((s) => s.attributes['db.system'] === 'redis')) expect(String(s.attributes['db.statement'])).toMatch(/^[a-z]+$/);
  });
});
