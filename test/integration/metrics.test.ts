/**
 * The metrics and logs of a worker process and of `saga serve`, read the way an operator reads them:
 * a scenario of real sagas through the HTTP API, then a scrape of each real `/metrics` endpoint (the
 * worker's, the Temporal SDK runtime's and saga serve's) and the JSON lines each process wrote.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowInfo } from '@temporalio/workflow';
import { firstEndReport, sagaEventSinks } from '../../src/activities/observe';
import type { Config } from '../../src/config';
import { SagaMetrics } from '../../src/metrics';

import { runSagaServer, type RunningSagaServer } from '../../src/http/run';
import { intentKeys } from '../../src/rms';

import { killWorkerProcesses, startWorkerProcess } from '../helpers/processes';
import { EXPRESSIONS, labelsUsed, seriesOf } from '../helpers/observability-docs';
import { freePort } from '../helpers/redis-servers';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, DECLINED_CARD } from '../fixtures/orders';

const CALLER = { id: 'metrics', token: 'metrics-test-token-0123456789' };

let h: SagaHarness;
let worker: Awaited<ReturnType<typeof startWorkerProcess>>;
let workerMetricsUrl: string;
let sdkMetricsUrl: string;
let serve: RunningSagaServer;
const serveLines: string[] = [];

beforeAll(async () => {
  // A lease far longer than any pause of a loaded machine, so the only lease lost is the one taken away.
  h = await startHarness('metrics', { worker: false, env: { LEASE_MS: '30000' } });
  const sdkAddress = `127.0.0.1:${await freePort()}`;
  const workerConfig: Config = { ...h.config, observability: { metrics: { host: '127.0.0.1', port: 0 }, temporalMetricsAddress: sdkAddress, logLevel: 'INFO' } };
  worker = await startWorkerProcess(workerConfig);
  workerMetricsUrl = /worker: metrics on (http:\S+)/.exec(worker.output())![1]!;
  sdkMetricsUrl = `http://${sdkAddress}/metrics`;
  const serveConfig: Config = {
    ...h.config,
    serve: { ...h.config.serve, host: '127.0.0.1', port: 0, clients: [CALLER] },
    observability: { metrics: { host: '127.0.0.1', port: 0 }, logLevel: 'INFO' },
  };
  serve = await runSagaServer(serveConfig, { sagas: h.types, signals: [], log: () => undefined, logStream: { write: (line) => void serveLines.push(line) } });
});

afterAll(async () => {
  await serve?.close();
  if (worker) {
    // A failed test may leave it stopped (SIGSTOP): a stopped process never handles SIGTERM.
    worker.child.kill('SIGCONT');
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
  killWorkerProcesses();
  await h?.stop();
});

/** One POST /v1/sagas/order through saga serve (the gate), with its answer. */
async function post(data: unknown, key = randomUUID()): Promise<{ status: number; body: { workflowId?: string; intentKey?: string; type?: string } }> {
  const res = await fetch(`${serve.url}/v1/sagas/order`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER.token}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(data),
  });
  return { status: res.status, body: (await res.json()) as { workflowId?: string; intentKey?: string; type?: string } };
}

/** Every sample of the Prometheus text `text` whose name is `name`, keyed by its labels (sorted, as `a="x",b="y"`). */
function samples(text: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => `${k}="${v}"`).sort();
    out[labels.join(',')] = Number(m[3]);
  }
  return out;
}

/** Every label name in a scrape. */
function labelNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    for (const [, k] of line.matchAll(/[{,]([a-zA-Z_][a-zA-Z0-9_]*)="/g)) names.add(k!);
  }
  return names;
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return res.text();
}

/** The JSON lines of a process's output (anything else it wrote is left out). */
function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('metrics and logs after a scenario of real sagas', () => {
  const customers: string[] = [];
  let completed: { workflowId: string; intentKey: string };
  let declined: { workflowId: string; intentKey: string };
  let leaseLost: { workflowId: string; intentKey: string };
  let fencedOut: { workflowId: string; intentKey: string };

  beforeAll(async () => {
    const result = (workflowId: string) => h.client.result(workflowId);

    // One order completes; three other requests for the same intent are DUPLICATE at the gate.
    const first = order();
    customers.push(first.customer);
    const a = await post(first);
    expect(a.status).toBe(201);
    completed = { workflowId: a.body.workflowId!, intentKey: a.body.intentKey! };
    expect((await result(completed.workflowId)).outcome).toBe('COMPLETED');
    for (let i = 0; i < 3; i++) expect((await post(first)).status).toBe(409);

    // Redis forgets the entity: the gate's truth check finds it in PostgreSQL, repairs Redis, DUPLICATE.
    await h.redis.del(intentKeys(h.config.redis.keyPrefix, completed.intentKey).entityExists);
    const repaired = await post(first);
    expect(repaired.status).toBe(409);
    expect(repaired.body.type).toMatch(/duplicate/);

    // A declined card: the payment step is rejected, its refund and the row's undo run.
    const card = order({ payment: { card: DECLINED_CARD } });
    customers.push(card.customer);
    const b = await post(card);
    declined = { workflowId: b.body.workflowId!, intentKey: b.body.intentKey! };
    expect(await result(declined.workflowId)).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });

    // A long write whose lease another session takes: the next beat finds it lost.
    const long = order({ simulate: { writeDelayMs: 20_000 } });
    customers.push(long.customer);
    const c = await post(long);
    leaseLost = { workflowId: c.body.workflowId!, intentKey: c.body.intentKey! };
    await eventually(async () => (await h.client.status(leaseLost.workflowId)).state.phase, (p) => p === 'WRITING', 'the long write to start');
    const processing = intentKeys(h.config.redis.keyPrefix, leaseLost.intentKey).processing;
    await h.redis.set(processing, 'intruder:1', 'PX', 60_000);
    expect(await result(leaseLost.workflowId)).toMatchObject({ outcome: 'COMPENSATED', reason: 'LEASE_LOST' });
    await h.redis.del(processing);

    // A row of a newer token appears between the gate's answer and the saga's write (its worker
    // stopped meanwhile): the write is fenced out.
    worker.child.kill('SIGSTOP');
    const late = order();
    customers.push(late.customer);
    const d = await post(late);
    fencedOut = { workflowId: d.body.workflowId!, intentKey: d.body.intentKey! };
    const token = BigInt((d.body as { reservation?: { fencingToken?: string } }).reservation!.fencingToken!);
    const newer = { intentKey: fencedOut.intentKey, sessionId: 'a-newer-holder', fencingToken: String(token + 1000n) };
    expect(await ordersTable.writeFenced(h.pool, { ...newer, data: { customer: 'a newer holder', items: late.items, amount_cents: 1, payment_key: null } })).toMatchObject({ status: 'WRITTEN' });
    worker.child.kill('SIGCONT');
    expect(await result(fencedOut.workflowId)).toMatchObject({ outcome: 'COMPENSATED', reason: 'FENCED_OUT' });

    // A query on an ended saga makes its worker replay the whole history, its end included: that
    // replay must not count or log the end again.
    for (const saga of [completed, declined, leaseLost, fencedOut]) expect((await h.client.status(saga.workflowId)).state.outcome).toBeDefined();
  });

  it("saga serve's endpoint counts the gate's answers, its leases and its read-repair exactly", async () => {
    const text = await scrape(serve.metricsUrl!);

    expect(samples(text, 'saga_gate_answers_total')).toEqual({
      'answer="SUCCESS",saga_type="order"': 4,
      'answer="DUPLICATE",saga_type="order"': 4,
    });
    expect(samples(text, 'saga_gate_answer_duration_seconds_count')).toEqual({
      'answer="SUCCESS",saga_type="order"': 4,
      'answer="DUPLICATE",saga_type="order"': 4,
    });
    // Four sagas' leases, and the one the read-repair took and gave back.
    expect(samples(text, 'saga_leases_taken_total')).toEqual({ 'saga_type="order"': 5 });
    expect(samples(text, 'saga_read_repairs_total')).toEqual({ 'outcome="marked",saga_type="order"': 1 });
    expect(samples(text, 'saga_leases_lost_total')).toEqual({});
  });

  it("the worker's endpoint counts steps, compensations, the lost lease and each saga's end exactly", async () => {
    // A saga's end reaches the worker's sink once its last workflow task is done, which may be just
    // after the client saw the result.
    const text = await eventually(
      () => scrape(workerMetricsUrl),
      (t) => Object.values(samples(t, 'saga_sagas_ended_total')).reduce((a, b) => a + b, 0) >= 4,
      'the four sagas to be counted as ended',
    );

    expect(samples(text, 'saga_sagas_ended_total')).toEqual({
      'outcome="COMPLETED",saga_type="order"': 1,
      'outcome="COMPENSATED",saga_type="order"': 3,
    });
    expect(samples(text, 'saga_step_attempts_total')).toEqual({
      'outcome="succeeded",saga_type="order",step="chargePayment"': 1,
      'outcome="succeeded",saga_type="order",step="reserveStock"': 1,
      'outcome="rejected",saga_type="order",step="chargePayment"': 1,
    });
    expect(samples(text, 'saga_compensation_attempts_total')).toEqual({
      'compensation="refundPayment",outcome="succeeded",saga_type="order"': 1,
      'compensation="undoEntity",outcome="succeeded",saga_type="order"': 3,
    });
    expect(samples(text, 'saga_leases_lost_total')).toEqual({ 'saga_type="order"': 1 });
    // The workers confirm the gate's leases (same session, same token): none is a new one.
    expect(samples(text, 'saga_leases_taken_total')).toEqual({});
    expect(samples(text, 'saga_read_repairs_total')).toEqual({});
    expect(samples(text, 'saga_fenced_out_writes_total')).toEqual({ 'activity="writeEntity",saga_type="order"': 1 });
    // Each write beat at least once before it committed (or lost its lease).
    expect(samples(text, 'saga_leases_extended_total')['saga_type="order"']).toBeGreaterThanOrEqual(3);
  });

  it("the Temporal SDK's endpoint counts the worker's completed sagas", async () => {
    const tq = `task_queue="${h.config.temporal.taskQueue}"`;
    const completedSagas = (t: string) =>
      Object.entries(samples(t, 'temporal_workflow_completed_total'))
        .filter(([labels]) => labels.includes(tq) && labels.includes('workflow_type="reservationSaga"'))
        .reduce((sum, [, v]) => sum + v, 0);

    const text = await eventually(() => scrape(sdkMetricsUrl), (t) => completedSagas(t) >= 4, 'the SDK to count four completed workflows');

    expect(completedSagas(text)).toBe(4);
  });

  it("the dashboard's and the alerts' temporal_ series are ones the SDK serves, with the labels they use", async () => {
    const text = await scrape(sdkMetricsUrl);
    const served = new Set(text.split('\n').filter((l) => !l.startsWith('#')).map((l) => /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(l)?.[0]));
    const sdkExpressions = EXPRESSIONS.filter((e) => seriesOf(e, 'temporal_').length > 0);
    expect(sdkExpressions.length).toBeGreaterThan(0);

    for (const expr of sdkExpressions) {
      for (const name of seriesOf(expr, 'temporal_')) {
        expect(served, `${name} in ${expr}`).toContain(name);
        const labels = new Set(Object.keys(samples(text, name)).flatMap((k) => k.split(',').map((l) => l.split('=')[0])));
        for (const label of labelsUsed(expr)) expect([...labels], `${label} of ${name} in ${expr}`).toContain(label);
      }
    }
  });

  it('no endpoint carries a label that could hold an intent key, a workflow id or request data', async () => {
    for (const url of [workerMetricsUrl, serve.metricsUrl!]) {
      const text = await scrape(url);
      for (const name of labelNames(text)) expect(['saga_type', 'answer', 'outcome', 'step', 'compensation', 'activity', 'le'], `${url}: ${name}`).toContain(name);
      for (const saga of [completed, declined, leaseLost, fencedOut]) {
        expect(text).not.toContain(saga.workflowId);
        expect(text).not.toContain(saga.intentKey.split(':')[1]);
      }
      for (const customer of customers) expect(text).not.toContain(customer);
    }
  });

  it("the worker logs each saga event as a JSON line with its workflow id, type and intent key, never its data", () => {
    const output = worker.output();
    const events = jsonLines(output).filter((l) => l.workflowId === declined.workflowId && typeof l.sagaEvent === 'string');

    expect(events.map((e) => [e.sagaEvent, e.outcome, e.step ?? e.compensation])).toEqual([
      ['reservation', 'succeeded', undefined],
      // The write registers the row and promotes the reservation (write-registers): no finalize line.
      ['write', 'succeeded', undefined],
      ['step', 'rejected', 'chargePayment'],
      ['compensation', 'succeeded', 'refundPayment'],
      ['compensation', 'succeeded', 'undoEntity'],
      ['ended', 'COMPENSATED', undefined],
    ]);
    for (const e of events) expect(e).toMatchObject({ level: 'INFO', sagaType: 'order', intentKey: declined.intentKey, workflowId: declined.workflowId });
    for (const customer of customers) expect(output).not.toContain(customer);
    expect(output).not.toContain(DECLINED_CARD);
  });

  it('saga serve logs each gate answer as a JSON line with its workflow id, type and intent key, never the body', () => {
    const lines = jsonLines(serveLines.join(''));
    const gate = lines.filter((l) => l.sagaEvent === 'gate');

    expect(gate.map((l) => l.answer)).toEqual(['SUCCESS', 'DUPLICATE', 'DUPLICATE', 'DUPLICATE', 'DUPLICATE', 'SUCCESS', 'SUCCESS', 'SUCCESS']);
    expect(gate[0]).toMatchObject({ level: 'INFO', sagaType: 'order', workflowId: completed.workflowId, intentKey: completed.intentKey });
    expect(gate[5]).toMatchObject({ workflowId: declined.workflowId, intentKey: declined.intentKey });
    for (const l of gate) expect(l).toMatchObject({ sagaType: 'order', intentKey: expect.stringMatching(/^order:/), workflowId: expect.stringMatching(/^order-metrics\./) });
    const all = serveLines.join('');
    for (const customer of customers) expect(all).not.toContain(customer);
    expect(all).not.toContain(DECLINED_CARD);
  });
});

describe('the end of a saga reported by two workers', () => {
  it('is counted once across the workers sharing Redis: the one killed after the last workflow task, and the one that ran it again', async () => {
    // Each worker process has its own registry; the two reports come from the same run.
    const workers = [new SagaMetrics({ types: h.types }), new SagaMetrics({ types: h.types })];
    const first = firstEndReport(h.redis, h.config.redis.keyPrefix);
    const ended = { type: 'order', intentKey: 'order:x', outcome: 'COMPLETED' };
    const sinks = workers.map((metrics) => {
      const sink = sagaEventSinks(h.types, metrics, first).sagaEvents.ended;
      // What the worker's sink runner does: call it with the run's info, and wait for it.
      return (workflow: WorkflowInfo, event: typeof ended) => Promise.resolve(sink.fn(workflow, event));
    });
    const info = (runId: string) => ({ runId, workflowId: `order-${runId}`, workflowType: 'reservationSaga', taskQueue: 'q', namespace: 'default' }) as unknown as WorkflowInfo;
    const total = async () => {
      let sum = 0;
      for (const metrics of workers) sum += Object.values(samples(await metrics.registry.metrics(), 'saga_sagas_ended_total')).reduce((a, b) => a + b, 0);
      return sum;
    };

    const once = randomUUID();
    await Promise.all(sinks.map((fn) => fn(info(once), ended)));
    const afterOne = await total();
    await sinks[1]!(info(randomUUID()), ended);

    expect(afterOne).toBe(1);
    expect(await total()).toBe(2);
    expect(await h.redis.pttl(`${h.config.redis.keyPrefix}saga-ended:{${once}}`)).toBeGreaterThan(0);
  });
});
