/**
 * Compensations that cannot finish: the saga waits in NEEDS_ATTENTION, holding its row and intent,
 * until an operator's redrive finishes them or its type's `attentionMs` runs out (then it ends
 * COMPENSATION_FAILED, to be settled by hand). Against the real Temporal dev server, Redis,
 * PostgreSQL and the payment provider over HTTP; the stock compensation of the `order-fragile`
 * types is broken and mended by the test, as an outage an operator fixes would be.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { RedriveError, SettleError } from '../../src/client';
import { createCodecServer, EncryptionCodec } from '../../src/codec';
import { requireCodecKeys } from '../../src/config';
import { readableHistory } from '../../scripts/demo/temporal-cli';
import { defineSagaTypes, type ExternalStep, type SagaTypes, type StepHandler } from '../../src/sagas';
import type { SagaState } from '../../src/shared';
import { eventually, order, rowIdOf, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, sagaTypesFor } from '../fixtures/orders';
import { externalFailingDuring, failingDuring, givingUpSoon } from '../fixtures/outages';

/** The stock service of the fragile types: down until the test mends it; how often each saga's stock was released. */
const stock = { down: true, released: new Map<string, number>() };

/** The refunds of `order-amend-fragile`: failing until the test mends them. */
const refunds = { down: true };

/**
 * The order types, and `order-fragile` (waits a day) and `order-fragile-brief` (waits 1.5 s), whose
 * `releaseStock` fails while the stock service is down; `order-amend-fragile`, whose refund of the
 * amended charge fails while the refunds are down.
 */
function fragileTypes(config: Parameters<typeof sagaTypesFor>[0], providerUrl: string): SagaTypes {
  const types = sagaTypesFor(config, providerUrl);
  const base = types.order!;
  const release = failingDuring(stock, 'the stock service', base.handlers.releaseStock as StepHandler<unknown>);
  const releaseStock: StepHandler<unknown> = async (tx, ctx) => {
    const released = await release(tx, ctx);
    stock.released.set(ctx.sagaKey, (stock.released.get(ctx.sagaKey) ?? 0) + 1);
    return released;
  };
  const handlers = { ...base.handlers, releaseStock };
  const amend = types['order-amend']!;
  const refundAmendedCharge = externalFailingDuring(refunds, 'the payment provider', amend.handlers.refundAmendedCharge as ExternalStep<unknown>);
  return defineSagaTypes(
    ...Object.values(types),
    { ...givingUpSoon(amend, 'refundAmendedCharge'), type: 'order-amend-fragile', handlers: { ...amend.handlers, refundAmendedCharge } },
    { ...givingUpSoon(base, 'releaseStock'), type: 'order-fragile', handlers },
    { ...givingUpSoon(base, 'releaseStock'), type: 'order-fragile-brief', handlers, compensation: { ...base.compensation, attentionMs: 1500 } },
  );
}

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga redrive', { sagaTypes: fragileTypes });
});
afterAll(async () => {
  await h?.stop();
});

/** An order the stock refuses (short stock) after its payment was charged: it compensates at once. */
const shortStock = () => order({ items: [{ sku: 'rare-coin', quantity: 9, priceCents: 1 }] });

function phaseOf(workflowId: string): Promise<SagaState> {
  return h.client.status(workflowId).then((s) => s.state);
}

async function waitingSaga(type: string) {
  stock.down = true;
  const data = shortStock();
  const started = await h.client.start(type, data);
  expect(started.reservation.status).toBe('SUCCESS');
  const state = await eventually(() => phaseOf(started.workflowId), (s) => s.phase === 'NEEDS_ATTENTION', 'the saga to need attention');
  return { data, started, state };
}

describe('a compensation that cannot finish', () => {
  it('leaves the saga waiting in NEEDS_ATTENTION, holding its row and intent, listed and visible, while the others ran', async () => {
    const { data, started, state } = await waitingSaga('order-fragile');

    expect(state).toMatchObject({ stepsDone: ['chargePayment'], compensationsRun: ['refundPayment'] });
    expect(state.outcome).toBeUndefined();
    expect(state.attention).toMatchObject({ pending: ['releaseStock', 'undoEntity'], redrives: 0 });
    expect(Date.parse(state.attention!.until) - Date.parse(state.attention!.since)).toBe(24 * 60 * 60 * 1000);
    expect(state.errors).toContainEqual(expect.objectContaining({ at: 'releaseStock', message: expect.stringContaining('stock service is unavailable') }));
    // What it holds: the row (REGISTERED, with what an operator needs) and the intent.
    expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'REGISTERED', lastFencingToken: state.fencingToken });
    expect((await h.rms.inspect(started.intentKey)).exists).toBe(true);
    expect((await h.client.start('order-fragile', data)).reservation.status).toBe('DUPLICATE');
    // The refund, which could run, did: no money is held while the saga waits.
    expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
    const listed = await eventually(
      () => h.client.list({ phase: 'NEEDS_ATTENTION' }),
      (rows) => rows.some((r) => r.workflowId === started.workflowId),
      'the saga to be listed by its phase',
    );
    expect(listed.find((r) => r.workflowId === started.workflowId)).toMatchObject({ status: 'RUNNING', phase: 'NEEDS_ATTENTION' });
    expect(listed.find((r) => r.workflowId === started.workflowId)?.outcome).toBeUndefined();
    // Not settled by hand under a waiting saga: it still owns its row.
    await expect(h.client.settle(started.workflowId, 'undo')).rejects.toThrow(SettleError);
    expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'REGISTERED' });
  });

  it('is retried by a redrive, which waits again while the cause lasts and finishes once it is fixed: each compensation applied once', async () => {
    const { started } = await waitingSaga('order-fragile');

    const again = await h.client.redrive(started.workflowId);

    expect(again).toMatchObject({ phase: 'NEEDS_ATTENTION', compensationsRun: ['refundPayment'], attention: { pending: ['releaseStock', 'undoEntity'], redrives: 1 } });
    expect(again.errors.filter((e) => e.at === 'releaseStock')).toHaveLength(2);

    stock.down = false;
    // Redrives sent at once: one round runs; a redrive that finds it running is refused, runs nothing.
    const redrives = await Promise.allSettled([1, 2, 3].map(() => h.client.redrive(started.workflowId)));

    const answered = redrives.filter((r): r is PromiseFulfilledResult<SagaState> => r.status === 'fulfilled').map((r) => r.value);
    expect(answered.length).toBeGreaterThan(0);
    for (const final of answered) {
      expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['refundPayment', 'releaseStock', 'undoEntity'], attention: { redrives: 2 } });
    }
    for (const refused of redrives.filter((r) => r.status === 'rejected')) expect(refused.reason).toBeInstanceOf(RedriveError);
    expect(stock.released.get(started.workflowId)).toBe(1);
    expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
    expect((await ordersTable.findById(h.pool, rowIdOf(answered[0]!.entityId!)))?.status).toBe('COMPENSATED');
    expect((await h.rms.inspect(started.intentKey)).exists).toBe(false);
    // Every later read and redrive gets the saga's end.
    expect(await h.client.result(started.workflowId)).toMatchObject({ outcome: 'COMPENSATED' });
    await expect(h.client.redrive(started.workflowId)).rejects.toThrow(/has ended \(COMPLETED\): there is nothing to redrive/);
  });

  it('is shown decoded by the Temporal CLI through the codec server, its redrive (an update without arguments) too', async () => {
    const cli = inject('temporalCli');
    if (!cli) throw new Error('this test needs the Temporal CLI that scripts/ensure-temporal finds');
    const { data, started } = await waitingSaga('order-fragile');
    await h.client.redrive(started.workflowId);
    const codecServer = createCodecServer({ codec: new EncryptionCodec(requireCodecKeys(h.config)), corsOrigins: [], namespaces: [h.config.temporal.namespace] });
    onTestFinished(async () => {
      await codecServer.close();
    });
    const codecEndpoint = await codecServer.listen({ host: '127.0.0.1', port: 0 });

    // The CLI retries a failing codec call until its own deadline: the bound turns a hang into a failure.
    const shown = await promisify(execFile)(
      cli,
      ['workflow', 'show', '--workflow-id', started.workflowId, '--output', 'json', '--address', h.config.temporal.address, '--namespace', h.config.temporal.namespace, '--codec-endpoint', codecEndpoint],
      { timeout: 20_000, maxBuffer: 64 * 1024 * 1024 },
    );

    const { events } = JSON.parse(shown.stdout) as { events: { workflowExecutionUpdateAcceptedEventAttributes?: { acceptedRequest: { input: { name: string } } } }[] };
    const updates = events.flatMap((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest.input.name ?? []);
    expect(updates).toEqual(['redrive']);
    expect(readableHistory(shown.stdout)).toContain(data.customer);
  });

  it("ends COMPENSATION_FAILED when its type's wait runs out without a redrive, keeping what it holds for an operator to settle", async () => {
    const { started } = await waitingSaga('order-fragile-brief');

    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATION_FAILED', reason: 'STEP_REJECTED', compensationsRun: ['refundPayment'], attention: { pending: ['releaseStock', 'undoEntity'], redrives: 0 } });
    expect(await ordersTable.find(h.pool, started.intentKey)).toMatchObject({ status: 'REGISTERED' });
    expect((await h.rms.inspect(started.intentKey)).exists).toBe(true);
    await expect(h.client.redrive(started.workflowId)).rejects.toThrow(RedriveError);
    // The operator's way out from there is as before: settle.
    stock.down = false;
    await expect(h.client.settle(started.workflowId, 'undo')).resolves.toMatchObject({ row: 'COMPENSATED', intentFreed: true });
  });

  it('refuses a redrive of a saga that is not waiting, running nothing, and answers another owner as for a missing saga', async () => {
    stock.down = false;
    const started = await h.client.start('order-fragile', order({ simulate: { stepDelayMs: 1500 } }), { owner: 'team-a' });
    await eventually(() => phaseOf(started.workflowId), (s) => s.phase === 'RUNNING_STEPS', 'the steps to begin');

    await expect(h.client.redrive(started.workflowId)).rejects.toThrow(new RedriveError(started.workflowId, `saga ${started.workflowId} is RUNNING_STEPS, not NEEDS_ATTENTION: there is nothing to redrive`));
    await expect(h.client.redrive(started.workflowId, { owner: 'team-b' })).rejects.toMatchObject({ name: 'WorkflowNotFoundError' });

    expect(await h.client.result(started.workflowId)).toMatchObject({ outcome: 'COMPLETED', compensationsRun: [] });
    expect(stock.released.get(started.workflowId)).toBeUndefined();
  });

  it("holds its entity's lock while an operation waits: no other operation runs on the order half undone until the redrive finishes", async () => {
    const sku = `fragile-${randomUUID().slice(0, 8)}`;
    await h.pool.query('INSERT INTO stock (sku, available) VALUES ($1, 2)', [sku]);
    const created = await h.client.result((await h.client.start('order', order({ items: [{ sku, quantity: 1, priceCents: 100 }] }))).workflowId);
    refunds.down = true;
    // More than the stock holds: the amendment is charged, then refused; its refund cannot be sent.
    const amend = await h.client.start('order-amend-fragile', { order: created.entityId, items: [{ sku, quantity: 5 }], payment: { card: '4242424242424242' } });
    expect(amend.reservation.status).toBe('SUCCESS');

    const waiting = await eventually(() => phaseOf(amend.workflowId), (s) => s.phase === 'NEEDS_ATTENTION', 'the amendment to need attention');
    // A lease past its last extension by a step (it began to wait after them): the lock is still its own, kept by the hold.
    const leaseEnded = Date.parse(waiting.attention!.since) + h.config.saga.leaseMs + 500;
    const held = await eventually(() => h.rms.inspect(amend.intentKey), (r) => Date.now() > leaseEnded || r.holder === undefined, 'a lease to have ended');
    const cancelMeanwhile = await h.client.start('order-cancel', { order: created.entityId });

    expect(waiting).toMatchObject({ stepsDone: ['priceAmendment', 'chargeAmendedOrder'], compensationsRun: ['revertAmendment'], attention: { pending: ['refundAmendedCharge'] } });
    expect(held.holder).toMatchObject({ fencingToken: waiting.fencingToken });
    expect(cancelMeanwhile).toMatchObject({ started: false, reservation: { status: 'CONFLICT' } });
    expect(await h.chargesOf(amend.workflowId)).toMatchObject([{ status: 'succeeded', refunded: false }]);

    refunds.down = false;
    const final = await h.client.redrive(amend.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', compensationsRun: ['revertAmendment', 'refundAmendedCharge'], attention: { redrives: 1 } });
    expect(final.errors.map((e) => e.at)).not.toContain('holdLock');
    expect(await h.chargesOf(amend.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
    expect((await h.rms.inspect(amend.intentKey)).holder).toBeUndefined();
    // The order is whole again, and its other operations run.
    const cancelled = await h.client.start('order-cancel', { order: created.entityId });
    expect(cancelled.reservation.status).toBe('SUCCESS');
    expect(await h.client.result(cancelled.workflowId)).toMatchObject({ outcome: 'COMPLETED' });
  });
});
