import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sagaWorkflowId } from '../../src/shared';
import { EXIT } from '../../src/cli';

import { envOf } from '../helpers/processes';
import { eventually, order, rowIdOf, type SagaHarness, startHarness } from '../helpers/saga-harness';
import { DECLINED_CARD, REFUND_REFUSED_CARD, sagaTypesFor } from '../fixtures/orders';
import { failingDuring, givingUpSoon } from '../fixtures/outages';
import { defineSagaTypes, type SagaTypes, type StepHandler } from '../../src/sagas';

const SAGA = path.resolve(__dirname, '../../bin/saga');
const ROOT = path.resolve(__dirname, '../..');
/** The stock service of `order-fragile`: down until a test mends it. */
const stock = { down: true };

/**
 * The order types, and `order-fragile` (the worker's only: the CLI never starts it), whose
 * `releaseStock` fails while the stock service is down: its saga waits for a redrive.
 */
function cliTypes(config: Parameters<typeof sagaTypesFor>[0], providerUrl: string): SagaTypes {
  const types = sagaTypesFor(config, providerUrl);
  const base = types.order!;
  const releaseStock = failingDuring(stock, 'the stock service', base.handlers.releaseStock as StepHandler<unknown>);
  return defineSagaTypes(...Object.values(types), { ...givingUpSoon(base, 'releaseStock'), type: 'order-fragile', handlers: { ...base.handlers, releaseStock } });
}

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('cli', { sagaTypes: cliTypes });
});
afterAll(async () => {
  await h?.stop();
});

/** Runs `saga ...args` (with `stdin` on its standard input, if given); returns its exit code, stdout and stderr. */
async function saga(args: string[], env: NodeJS.ProcessEnv = {}, stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const run = promisify(execFile)(SAGA, args, { env: { ...envOf(h.config), ...env } });
  if (stdin !== undefined) run.child.stdin!.end(stdin);
  try {
    const { stdout, stderr } = await run;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
interface Started {
  workflowId: string;
  runId: string;
  reservation: { status: string; fencingToken?: string; expiresAt?: number; retryAfterMs?: number };
  final?: { outcome: string };
}
const json = <T = Record<string, unknown>>(s: string) => JSON.parse(s) as T;

describe('saga CLI', () => {
  it('start --json prints the reservation answer and exits 0 on SUCCESS, 3 on DUPLICATE', async () => {
    const data = JSON.stringify(order());

    const first = await saga(['start', '--type', 'order', '--data', data, '--wait', '--json']);
    const second = await saga(['start', '--type', 'order', '--data', data, '--json']);

    expect(first.code).toBe(EXIT.OK);
    const out = json<Started>(first.stdout);
    expect(out).toMatchObject({ workflowId: expect.stringMatching(/^order-/), runId: expect.any(String), reservation: { status: 'SUCCESS' } });
    expect(out.reservation.fencingToken).toMatch(/^\d+$/);
    expect(out.reservation.expiresAt).toEqual(expect.any(Number));
    expect(out.final).toMatchObject({ outcome: 'COMPLETED' });
    expect(second.code).toBe(EXIT.DUPLICATE);
    expect(json<Started>(second.stdout).reservation).toEqual({ status: 'DUPLICATE' });
    expect(json(second.stdout)).not.toHaveProperty('entityId');

    // --find-existing: the caller's own entity, named (its id is what the saga's result says).
    const found = await saga(['start', '--type', 'order', '--data', data, '--find-existing']);
    expect(found.code).toBe(EXIT.DUPLICATE);
    const { entityId } = await h.client.result(out.workflowId);
    expect(found.stdout).toContain(`your existing entity: ${entityId}`);
  });

  it('settle asks how (--keep or --undo), and refuses a saga that did not end COMPENSATION_FAILED, changing nothing', async () => {
    const created = await h.client.result((await h.client.start('order', order())).workflowId);
    const workflowId = sagaWorkflowId('order', created.idempotencyKey);

    const unsaid = await saga(['settle', workflowId]);
    const refused = await saga(['settle', workflowId, '--undo']);

    expect(unsaid.code).toBe(EXIT.USAGE);
    expect(unsaid.stderr.trim()).toBe('saga: say how the saga was settled: --keep or --undo (one of them)');
    expect(refused.code).toBe(EXIT.ERROR);
    expect(refused.stderr.trim()).toBe(`saga: saga ${workflowId} ended COMPLETED, not COMPENSATION_FAILED: there is nothing to settle`);
    expect((await h.client.status(workflowId)).state.outcome).toBe('COMPLETED');
  });

  it('list --needs-attention finds a saga waiting for an operator; redrive retries it (exit 5 while it still waits) and refuses one that does not wait', async () => {
    const started = await h.client.start('order', order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }));
    const { workflowId } = started;
    const listed = await eventually(
      async () => json<{ workflowId: string; phase: string }[]>((await saga(['list', '--needs-attention', '--json'])).stdout),
      (rows) => rows.some((r) => r.workflowId === workflowId),
      'the saga to be listed as needing attention',
    );
    const redriven = await saga(['redrive', workflowId]);
    const completed = await h.client.result((await h.client.start('order', order())).workflowId);
    const completedId = sagaWorkflowId('order', completed.idempotencyKey);
    const refused = await saga(['redrive', completedId]);
    const both = await saga(['list', '--needs-attention', '--phase', 'COMPLETED']);

    expect(listed.every((r) => r.phase === 'NEEDS_ATTENTION')).toBe(true);
    expect(redriven.code).toBe(EXIT.SAGA_FAILED);
    expect(redriven.stdout).toMatch(new RegExp(`^${workflowId}: still NEEDS_ATTENTION, left to undo: refundPayment, undoEntity \\(the failures: saga status\\); waits until \\d{4}-`));
    expect(refused.code).toBe(EXIT.ERROR);
    expect(refused.stderr.trim()).toBe(`saga: saga ${completedId} has ended (COMPLETED): there is nothing to redrive`);
    expect(both.code).toBe(EXIT.USAGE);
  });

  it('signal refuses, exit 1 and recording nothing, a saga that waits for no such signal, and a malformed payload', async () => {
    const running = await h.client.start('order', order({ simulate: { stepDelayMs: 3000 } }));
    await eventually(() => h.client.status(running.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the saga to run its steps');

    const refused = await saga(['signal', running.workflowId, 'payment-confirmed', '--data', '{"paymentId":"p-1"}']);
    const malformed = await saga(['signal', running.workflowId, 'payment-confirmed', '--data', '{not json']);

    expect(refused.code).toBe(EXIT.ERROR);
    expect(refused.stderr.trim()).toBe(`saga: saga ${running.workflowId} waits for no signal "payment-confirmed"`);
    expect(malformed.code).toBe(EXIT.USAGE);
    expect((await h.client.result(running.workflowId)).outcome).toBe('COMPLETED');
  });

  it('redrive of a cancelled saga answers how it ended (exit 5 for COMPENSATED, as result), whether it was cancelled while it waited or its cancellation made it compensate', async () => {
    stock.down = true;
    // Short of stock after its charge: it compensates, and waits for the stock service.
    const waiting = await h.client.start('order-fragile', order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }));
    // Cancelled during its second step: it compensates, and waits for the stock service.
    const interrupted = await h.client.start('order-fragile', order({ simulate: { stepDelayMs: 3000 } }));
    await eventually(() => h.client.status(interrupted.workflowId), (s) => s.state.stepsDone.includes('chargePayment'), 'the second step to begin');
    await h.client.cancel(interrupted.workflowId);
    await eventually(() => h.client.status(waiting.workflowId), (s) => s.state.phase === 'NEEDS_ATTENTION', 'the first saga to wait for a redrive');
    const cancelledWaiting = await saga(['cancel', waiting.workflowId]);
    await eventually(() => h.client.status(interrupted.workflowId), (s) => s.state.phase === 'NEEDS_ATTENTION', 'the cancelled saga to wait for a redrive');
    stock.down = false;

    const redriven = [await saga(['redrive', waiting.workflowId]), await saga(['redrive', interrupted.workflowId])];

    expect(cancelledWaiting.code).toBe(EXIT.OK);
    const [afterWait, afterCancel] = [await h.client.result(waiting.workflowId), await h.client.result(interrupted.workflowId)];
    expect(afterWait).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['refundPayment', 'releaseStock', 'undoEntity'], attention: { redrives: 1 } });
    expect(afterCancel).toMatchObject({ outcome: 'COMPENSATED', reason: 'CANCELLED', compensationsRun: ['refundPayment', 'releaseStock', 'undoEntity'], attention: { redrives: 1 } });
    expect(redriven.map((r) => r.stderr)).toEqual(['', '']);
    expect(redriven.map((r) => r.stdout)).toEqual([
      `${waiting.workflowId}: COMPENSATED (STEP_REJECTED); compensations run: refundPayment, releaseStock, undoEntity\n`,
      `${interrupted.workflowId}: COMPENSATED (CANCELLED); compensations run: refundPayment, releaseStock, undoEntity\n`,
    ]);
    expect(redriven.map((r) => r.code)).toEqual([EXIT.SAGA_FAILED, EXIT.SAGA_FAILED]);
  });

  it('start --wait and result say when the saga waits for an operator, and --wait-ms bounds their wait: exit 6, the saga running on', async () => {
    const data = JSON.stringify(order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] }));
    const key = `attention-${Date.now()}`;
    const workflowId = sagaWorkflowId('order', key);

    // It comes to wait for an operator while the command waits for its end.
    const started = await saga(['start', '--type', 'order', '--data', data, '--idempotency-key', key, '--wait-ms', '15000', '--json']);
    // It waits for one already.
    const result = await saga(['result', workflowId, '--wait-ms', '1000', '--json']);
    const unbounded = await saga(['result', workflowId, '--wait-ms', '0']);

    const notice = new RegExp(
      `^saga: ${workflowId} waits for an operator \\(NEEDS_ATTENTION\\): refundPayment, undoEntity could not be undone \\(the failures: saga status ${workflowId}\\); ` +
        `once the cause is fixed, saga redrive ${workflowId}; unless redriven by (\\S+), it ends COMPENSATION_FAILED$`,
    );
    const running = (ms: number) => `saga: ${workflowId} is still running after ${ms} ms (phase NEEDS_ATTENTION); saga result ${workflowId} waits for its end`;
    expect(started.stderr.trim().split('\n')).toEqual([expect.stringMatching(notice), running(15000)]);
    expect(started.code).toBe(EXIT.STILL_RUNNING);
    expect(json<Started>(started.stdout)).toMatchObject({ workflowId, reservation: { status: 'SUCCESS' }, started: true });
    expect(json<Started>(started.stdout).final).toBeUndefined();
    expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(notice), running(1000)]);
    expect(result.code).toBe(EXIT.STILL_RUNNING);
    expect(result.stdout).toBe('');
    expect(unbounded.code).toBe(EXIT.USAGE);
    expect(unbounded.stderr.trim()).toBe('saga: --wait-ms must be a whole number of milliseconds from 1 to 2147483647');
    // The saga runs on, waiting for a redrive until the time the notice gave.
    const { state } = await h.client.status(workflowId);
    expect(state).toMatchObject({ phase: 'NEEDS_ATTENTION', attention: { pending: ['refundPayment', 'undoEntity'], redrives: 0 } });
    expect(notice.exec(started.stderr.split('\n')[0]!)?.[1]).toBe(state.attention!.until);
  });

  it('start --type order-cancel runs an operation on an existing order like any type; intent shows its lock and row', async () => {
    const created = await h.client.result((await h.client.start('order', order())).workflowId);
    const data = JSON.stringify({ order: created.entityId });

    const cancel = await saga(['start', '--type', 'order-cancel', '--data', data, '--wait', '--json']);
    const intent = await saga(['intent', '--type', 'order-cancel', '--data', data, '--json']);
    const missing = await saga(['start', '--type', 'order-cancel', '--data', '{"order":"987654321987"}']);

    expect(cancel.code).toBe(EXIT.OK);
    expect(json<Started>(cancel.stdout)).toMatchObject({ workflowId: expect.stringMatching(/^order-cancel-/), reservation: { status: 'SUCCESS' }, final: { outcome: 'COMPLETED' } });
    expect(json(intent.stdout)).toMatchObject({ intentKey: expect.stringMatching(/^order-lock:/), rms: { exists: false }, row: { id: rowIdOf(created.entityId!), status: 'COMPLETED' } });
    expect(json<{ rms: { holder?: unknown } }>(intent.stdout).rms.holder).toBeUndefined();
    expect(missing.code).toBe(EXIT.USAGE);
    expect(missing.stderr).toContain('there is no order 987654321987');
  });

  it('start reads --data from a file (@path) or from stdin (-), so a card number stays out of the command line', async () => {
    const data = JSON.stringify(order());
    const dir = mkdtempSync(path.join(tmpdir(), 'saga-cli-'));
    const file = path.join(dir, 'order.json');
    writeFileSync(file, data);
    try {
      const fromFile = await saga(['start', '--type', 'order', '--data', `@${file}`, '--idempotency-key', `file-${Date.now()}`, '--json']);
      const fromStdin = await saga(['start', '--type', 'order', '--data', '-', '--json'], {}, data);

      expect(fromFile.code).toBe(EXIT.OK);
      const started = json<Started>(fromFile.stdout);
      expect(started.reservation.status).toBe('SUCCESS');
      await h.client.result(started.workflowId);
      // The same cart from stdin is the same intent: DUPLICATE.
      expect(fromStdin.code).toBe(EXIT.DUPLICATE);
      expect(json<Started>(fromStdin.stdout).reservation).toEqual({ status: 'DUPLICATE' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 4 with retryAfterMs on CONFLICT while another saga holds the intent', async () => {
    const cart = order({ simulate: { writeDelayMs: 4000 } });
    const holder = await h.client.start('order', cart);

    const conflict = await saga(['start', '--type', 'order', '--data', JSON.stringify(cart), '--json']);

    expect(holder.reservation.status).toBe('SUCCESS');
    expect(conflict.code).toBe(EXIT.CONFLICT);
    expect(json<Started>(conflict.stdout).reservation).toMatchObject({ status: 'CONFLICT', retryAfterMs: expect.any(Number) });
    await h.client.result(holder.workflowId);
  });

  it('status, result, list, intent and cancel print JSON', async () => {
    const cart = order({ payment: { card: DECLINED_CARD } });
    const started = await h.client.start('order', cart, { idempotencyKey: `cli-${Date.now()}` });
    await h.client.result(started.workflowId);

    const status = await saga(['status', started.workflowId, '--json']);
    const result = await saga(['result', started.workflowId, '--json']);
    const list = await saga(['list', '--outcome', 'COMPENSATED', '--json']);
    const table = await saga(['list', '--outcome', 'COMPENSATED']);
    const intent = await saga(['intent', '--type', 'order', '--data', JSON.stringify(cart), '--json']);

    expect(status.code).toBe(EXIT.OK);
    expect(json(status.stdout)).toMatchObject({ workflowId: started.workflowId, status: 'COMPLETED', state: { outcome: 'COMPENSATED' } });
    expect(result.code).toBe(EXIT.SAGA_FAILED);
    expect(json(result.stdout)).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
    expect(list.code).toBe(EXIT.OK);
    expect(json<{ workflowId: string }[]>(list.stdout).map((r) => r.workflowId)).toContain(started.workflowId);
    // For a person: column headers, then a row per saga.
    expect(table.stdout.split('\n')[0]).toMatch(/^WORKFLOW ID +STATUS +PHASE +OUTCOME$/);
    expect(table.stdout).toMatch(new RegExp(`^${started.workflowId} +COMPLETED +\\S+ +COMPENSATED$`, 'm'));
    expect(intent.code).toBe(EXIT.OK);
    expect(json(intent.stdout)).toMatchObject({ intentKey: started.intentKey, rms: { exists: false }, row: { status: 'COMPENSATED' } });

    const slow = await h.client.start('order', order({ simulate: { stepDelayMs: 3000 } }));
    const cancel = await saga(['cancel', slow.workflowId, '--json']);
    expect(cancel.code).toBe(EXIT.OK);
    expect(json(cancel.stdout)).toEqual({ workflowId: slow.workflowId, cancelRequested: true });
    expect((await h.client.result(slow.workflowId)).outcome).toBe('COMPENSATED');

    const again = await saga(['cancel', slow.workflowId, '--json']);
    expect(again.code).toBe(EXIT.ERROR);
    expect(again.stderr.trim()).toBe(`saga: saga ${slow.workflowId} has already ended (COMPLETED); there is nothing to cancel`);
  });

  it.each([
    ['an unknown type', ['start', '--type', 'nope', '--data', '{}'], /unknown saga type "nope"/],
    ['invalid JSON', ['start', '--type', 'order', '--data', '{not json'], /--data is not valid JSON/],
    ['a missing data file', ['start', '--type', 'order', '--data', '@/nonexistent/order.json'], /--data @\/nonexistent\/order.json: cannot read the file \(ENOENT\)/],
    ['a data file name left out', ['start', '--type', 'order', '--data', '@'], /--data @ needs a file name/],
    ['a schema violation', ['start', '--type', 'order', '--data', '{"customer":"a","items":[],"payment":{"card":"1"}}'], /invalid order input at items/],
    ['an oversized payload', ['start', '--type', 'order', '--data', JSON.stringify({ customer: 'x'.repeat(70_000) })], /at most 65536 are accepted/],
    ['an unknown command', ['launch'], /unknown command 'launch'/],
    ['a missing option', ['start', '--type', 'order'], /required option '--data <json>' not specified/],
  ])('refuses %s with one clear line, exit 2, and starts nothing', async (_what, args, message) => {
    const before = await h.client.list({ limit: 1000 });

    const r = await saga(args);

    expect(r.code).toBe(EXIT.USAGE);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(await h.client.list({ limit: 1000 })).toHaveLength(before.length);
  });

  it('exits 78 naming INTENT_KEY_SECRET when it is missing, and starts nothing', async () => {
    const before = await h.client.list({ limit: 1000 });

    const r = await saga(['start', '--type', 'order', '--data', JSON.stringify(order())], { INTENT_KEY_SECRET: '' });

    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^configuration error: INTENT_KEY_SECRET: is not set/);
    expect(await h.client.list({ limit: 1000 })).toHaveLength(before.length);
  });

  describe('the compiled CLI (scripts/build-cli, which every make target runs first)', () => {
    let dir: string;
    beforeAll(() => {
      // Builds only when a source is newer than the build: a no-op under `make test`.
      execFileSync(path.join(ROOT, 'scripts/build-cli'), { stdio: 'ignore' });
      dir = mkdtempSync(path.join(tmpdir(), 'saga-cli-loads-'));
    }, 120_000);
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    /** Runs `saga ...args` and returns its outcome and the files its process loaded (from node_modules, by package). */
    async function sagaLoading(args: string[], env: NodeJS.ProcessEnv = {}) {
      const file = path.join(dir, `loaded-${Date.now()}-${Math.random()}.json`);
      const r = await saga(args, { ...env, NODE_OPTIONS: `--require ${path.join(ROOT, 'test/helpers/loaded-modules.cjs')}`, LOADED_MODULES_FILE: file });
      const loaded = JSON.parse(readFileSync(file, 'utf8')) as string[];
      const packages = new Set(loaded.flatMap((f) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1] ?? []));
      return { ...r, loaded, packages: [...packages].sort() };
    }

    it('runs the build, and --help loads no package but commander', async () => {
      const r = await sagaLoading(['--help']);

      expect(r.code).toBe(EXIT.OK);
      expect(r.stdout).toMatch(/^Usage: saga/);
      expect(r.loaded).toContain(path.join(ROOT, '.build/cli.js'));
      expect(r.packages).toEqual(['commander']);
    });

    it('answers a DUPLICATE from Redis without loading or reaching Temporal (here out of reach)', async () => {
      const data = JSON.stringify(order());
      const first = await saga(['start', '--type', 'order', '--data', data, '--wait', '--json']);
      expect(first.code).toBe(EXIT.OK);

      // Port 1: nothing listens there; a client that connected would fail the command.
      const duplicate = await sagaLoading(['start', '--type', 'order', '--data', data, '--json'], { TEMPORAL_ADDRESS: '127.0.0.1:1' });

      expect(duplicate.code).toBe(EXIT.DUPLICATE);
      expect(json<Started>(duplicate.stdout).reservation).toEqual({ status: 'DUPLICATE' });
      // The gate ran (Redis and PostgreSQL clients loaded); no Temporal package did.
      expect(duplicate.packages).toEqual(expect.arrayContaining(['ioredis', 'pg']));
      expect(duplicate.packages.filter((p) => p.startsWith('@temporalio/'))).toEqual([]);
    });
  });

  it('refuses to serve the codec off loopback without a token: exit 78 naming CODEC_SERVER_TOKEN, nothing listening', async () => {
    const r = await saga(['codec-server'], { CODEC_SERVER_ADDRESS: '0.0.0.0:0', CODEC_SERVER_TOKEN: '' });

    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.stderr.trim()).toBe('configuration error: CODEC_SERVER_TOKEN: required when the codec server listens on 0.0.0.0, not a loopback address');
  });

  it('exits 78 with one line on a configuration error', async () => {
    const r = await saga(['list'], { REDIS_URL: 'nonsense' });

    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.stderr.trim()).toBe('configuration error: REDIS_URL: must be a URL starting with redis:// or rediss:// (got "nonsense")');
  });
});
