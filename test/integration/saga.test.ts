import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { decodeOptionalSinglePayload } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { intentKey, intentKeys } from '../../src/rms';
import { SagaInputError } from '../../src/sagas';
import { sagaWorkflowId, type SagaState } from '../../src/shared';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { ordersTable, DECLINED_CARD, orderSaga, REFUND_REFUSED_CARD } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('saga');
});
afterAll(async () => {
  await h?.stop();
});

const rowOf = (intentKey: string) => ordersTable.find(h.pool, intentKey);
const phaseOf = async (workflowId: string) => (await h.client.status(workflowId)).state;
const stepRecord = async (workflowId: string, step: string) =>
  (await h.pool.query<{ status: string }>(`SELECT status FROM idempotency_store WHERE scope = 'order-step' AND key = $1`, [`${workflowId}:${step}`])).rows[0];

/** The local activities the saga ran (recorded as markers), in order. */
async function localActivities(workflowId: string): Promise<string[]> {
  const history = await h.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? [])
    .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
    .map((e) => {
      const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
      return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string }).activity_type ?? '?' : '?';
    });
}

/** The activity types of the saga's history, in the order they were scheduled. */
async function activityTrail(workflowId: string): Promise<string[]> {
  const history = await h.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
    .filter((n): n is string => typeof n === 'string');
}

/** The summary each scheduled activity carries in the UI (its user metadata), decoded as the UI would. */
async function summaryTrail(workflowId: string): Promise<(string | undefined)[]> {
  const history = await h.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes);
  const converter = h.client.temporal.options.loadedDataConverter;
  return Promise.all(scheduled.map(async (e) => (await decodeOptionalSinglePayload<string>(converter, e.userMetadata?.summary)) ?? undefined));
}

describe('the order saga', () => {
  it('answers SUCCESS early, then completes: row COMPLETED, entity_exists set, no processing key', async () => {
    const started = await h.client.start('order', order());

    expect(started.reservation.status).toBe('SUCCESS');
    const final = await h.client.result(started.workflowId);
    expect(final).toMatchObject({ phase: 'COMPLETED', outcome: 'COMPLETED', stepsDone: ['chargePayment', 'reserveStock'], errors: [] });
    const row = await rowOf(started.intentKey);
    expect(row).toMatchObject({ status: 'COMPLETED', lastFencingToken: final.fencingToken });
    const rms = await h.rms.inspect(started.intentKey);
    expect(rms.exists).toBe(true);
    expect(rms.existsToken).toBe(final.fencingToken);
    expect(rms.holder).toBeUndefined();
    // The write registers the row and promotes the reservation; the last step, in our database,
    // completes the row in its own transaction (write-registers): no finalizeEntity, no completeEntity.
    expect(await activityTrail(started.workflowId)).toEqual(['writeEntity', 'runStep', 'runStep']);
    expect(await localActivities(started.workflowId)).toEqual(['planSaga', 'reserveIntent']);
  });

  it('lets exactly one of 200 concurrent starts over 50 intents succeed per intent, and ends every saga', async () => {
    const carts = Array.from({ length: 50 }, () => order());
    const requests = carts.flatMap((cart) => Array.from({ length: 4 }, () => cart));
    // A lease that covers a busy worker's scheduling delay. With this file's 3 s lease, a loaded
    // machine let a reservation expire before its write began, and a later request rightly
    // reserved again (one entity still, but a second SUCCESS answer).
    const client = h.newClient({ leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 10_000 });

    const started = await Promise.all(requests.map((cart) => client.start('order', cart)));

    const successes = started.filter((s) => s.reservation.status === 'SUCCESS');
    expect(successes).toHaveLength(50);
    expect(new Set(successes.map((s) => s.intentKey)).size).toBe(50);
    for (const s of started) expect(['SUCCESS', 'DUPLICATE', 'CONFLICT']).toContain(s.reservation.status);
    // Only the successes started a saga; every one of them completes.
    expect(started.filter((s) => s.started)).toEqual(successes);
    const finals = await Promise.all(successes.map((s) => h.client.result(s.workflowId)));
    expect(finals.map((f) => f.outcome)).toEqual(Array(50).fill('COMPLETED'));
    const { rows } = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM orders WHERE intent_key = ANY($1)', [
      [...new Set(started.map((s) => s.intentKey))],
    ]);
    expect(Number(rows[0]!.n)).toBe(50);
  });

  it('gives 20 concurrent starts with one idempotency key one workflow and one answer, and refuses another payload', async () => {
    const cart = order();
    const key = `idem-${Date.now()}`;
    // Twenty independent callers (each its own SagaClient, so nothing is shared client-side).
    const callers = Array.from({ length: 20 }, () => h.newClient());

    const started = await Promise.all(callers.map((c) => c.start('order', cart, { idempotencyKey: key })));

    expect(new Set(started.map((s) => s.workflowId)).size).toBe(1);
    expect(new Set(started.map((s) => s.runId)).size).toBe(1);
    expect(new Set(started.map((s) => JSON.stringify(s.reservation))).size).toBe(1);
    expect(started[0]!.reservation.status).toBe('SUCCESS');
    await expect(h.client.start('order', order(), { idempotencyKey: key })).rejects.toMatchObject({
      name: 'SagaInputError',
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
    // After the saga ended, the same request still gets the same answer, and another payload is still refused.
    await h.client.result(started[0]!.workflowId);
    const again = await h.client.start('order', cart, { idempotencyKey: key });
    expect(again).toMatchObject({ workflowId: started[0]!.workflowId, runId: started[0]!.runId, reservation: started[0]!.reservation, outcome: 'COMPLETED' });
    await expect(h.client.start('order', order(), { idempotencyKey: key })).rejects.toBeInstanceOf(SagaInputError);
  });

  it('completes a write that takes three times the lease, because every heartbeat extends it', async () => {
    const leaseMs = h.config.saga.leaseMs;
    const started = await h.client.start('order', order({ simulate: { writeDelayMs: 3 * leaseMs } }));

    const final = await h.client.result(started.workflowId);

    expect(final.outcome).toBe('COMPLETED');
    expect((await rowOf(started.intentKey))?.status).toBe('COMPLETED');
  });

  it('rolls the write back when the lease is lost mid-write, and leaves no row of its token and no lock', async () => {
    const started = await h.client.start('order', order({ simulate: { writeDelayMs: 20_000 } }));
    await eventually(() => phaseOf(started.workflowId), (s) => s.phase === 'WRITING', 'the write to start');

    // Another session takes the intent: the holder's next extend finds the lock is not its own.
    await h.redis.set(intentKeys(h.config.redis.keyPrefix, started.intentKey).processing, 'intruder:1', 'PX', 60_000);
    const final = await h.client.result(started.workflowId);
    // Compensation released nothing of the intruder's.
    expect((await h.rms.inspect(started.intentKey)).holder?.sessionId).toBe('intruder');
    await h.redis.del(intentKeys(h.config.redis.keyPrefix, started.intentKey).processing);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'LEASE_LOST' });
    expect(await rowOf(started.intentKey)).toBeUndefined();
    expect((await h.rms.inspect(started.intentKey)).exists).toBe(false);
  });

  it('compensates a short-stock order in reverse order: stock released, payment refunded, row COMPENSATED, intent freed', async () => {
    const cart = order({ items: [{ sku: 'rare-coin', quantity: 2, priceCents: 100_000 }] });
    const started = await h.client.start('order', cart);

    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({
      outcome: 'COMPENSATED',
      reason: 'STEP_REJECTED',
      stepsDone: ['chargePayment'],
      compensationsRun: ['releaseStock', 'refundPayment', 'undoEntity'],
    });
    // The provider charged once, and refunded that charge.
    expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
    expect((await rowOf(started.intentKey))?.status).toBe('COMPENSATED');
    expect((await h.rms.inspect(started.intentKey)).exists).toBe(false);
    expect(await activityTrail(started.workflowId)).toEqual([
      'writeEntity',
      'runStep',
      'runStep',
      'runCompensation',
      'runCompensation',
      'undoEntity',
    ]);
    // In the UI each step and compensation reads as itself, not as one more runStep.
    expect((await summaryTrail(started.workflowId)).slice(1, 5)).toEqual([
      'step chargePayment',
      'step reserveStock',
      'compensation releaseStock',
      'compensation refundPayment',
    ]);
    // The intent was freed: a new request for the same cart may succeed.
    const retry = await h.client.start('order', cart);
    expect(retry.reservation.status).toBe('SUCCESS');
    expect(retry.intentKey).toBe(started.intentKey);
    await h.client.result(retry.workflowId);
  });

  it('keeps the order data and the failure messages out of Temporal in clear: every payload is encrypted', async () => {
    const cart = order({ customer: `secret-customer-${randomUUID()}`, payment: { card: DECLINED_CARD } });
    const started = await h.client.start('order', cart);
    const final = await h.client.result(started.workflowId);
    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });

    // The history as Temporal stores it (and anyone with read access to the namespace sees it).
    const history = await h.client.temporal.workflowService.getWorkflowExecutionHistory({
      namespace: h.config.temporal.namespace,
      execution: { workflowId: started.workflowId },
    });
    const raw = JSON.stringify(history.history);
    const bytes = Buffer.from(temporal.api.history.v1.History.encode(history.history!).finish()).toString('latin1');
    for (const secret of [cart.customer, cart.payment.card, 'the card was declined']) {
      expect(raw).not.toContain(secret);
      expect(bytes).not.toContain(secret);
    }
    // Every payload of the history is the codec's, and the saga still reads in clear through the client.
    const encodings = new Set<string>();
    const visit = (value: unknown, at: string): void => {
      if (Array.isArray(value)) value.forEach((v, i) => visit(v, `${at}[${i}]`));
      else if (value && typeof value === 'object') {
        const payload = value as { metadata?: Record<string, Uint8Array>; data?: Uint8Array };
        if (payload.metadata?.encoding && payload.data) encodings.add(`${Buffer.from(payload.metadata.encoding).toString()} ${at.replace(/\[\d+\]/g, '')}`);
        for (const [k, v] of Object.entries(value)) visit(v, `${at}.${k}`);
      }
    };
    visit(history.history, '');
    // In clear only what Temporal itself must read: the search attributes (saga type, phase, outcome,
    // the keyed intent hash) and the SDK's own marker bookkeeping (patch ids, local activity metadata).
    const clear = [...encodings].filter((e) => !e.startsWith('binary/encrypted '));
    expect(clear.filter((e) => !/searchAttributes\.indexedFields\.|markerRecordedEventAttributes\.details\.(patch-data|data)\.payloads$/.test(e))).toEqual([]);
    expect([...encodings]).toEqual(
      expect.arrayContaining([
        'binary/encrypted .events.workflowExecutionStartedEventAttributes.input.payloads',
        'binary/encrypted .events.activityTaskScheduledEventAttributes.input.payloads',
        'binary/encrypted .events.activityTaskFailedEventAttributes.failure.encodedAttributes',
        'binary/encrypted .events.markerRecordedEventAttributes.details.result.payloads',
      ]),
    );
    expect(final.errors.some((e) => e.message.includes('the card was declined'))).toBe(true);
  });

  it('compensates a declined payment: no charge recorded, row COMPENSATED', async () => {
    const started = await h.client.start('order', order({ payment: { card: DECLINED_CARD } }));

    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED', stepsDone: [] });
    expect(final.errors[0]!.message).toMatch(/PAYMENT_DECLINED/);
    // The provider's answer, recorded as the step's refusal: nothing charged.
    expect((await h.chargesOf(started.workflowId)).filter((c) => c.status === 'succeeded')).toEqual([]);
    expect((await stepRecord(started.workflowId, 'chargePayment'))?.status).toBe('FAILED');
    expect((await rowOf(started.intentKey))?.status).toBe('COMPENSATED');
  });

  it('waits in NEEDS_ATTENTION when a refund is refused, visible in state and search attributes, keeping its row and intent for an operator', async () => {
    const cart = order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku: 'rare-coin', quantity: 5, priceCents: 10 }] });
    const started = await h.client.start('order', cart);

    const waiting = await eventually(() => phaseOf(started.workflowId), (s: SagaState) => s.phase === 'NEEDS_ATTENTION', 'the saga to need attention');

    expect(waiting.outcome).toBeUndefined();
    expect(waiting.attention).toMatchObject({ pending: ['refundPayment', 'undoEntity'], redrives: 0 });
    expect(waiting.errors.map((e) => e.at)).toContain('refundPayment');
    // The refund failed, so the entity is not undone: the payment is still CHARGED, and the order row
    // keeps the customer, items and amount an operator needs to settle it.
    expect(waiting.compensationsRun).toEqual(['releaseStock']);
    expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: false }]);
    expect(await rowOf(started.intentKey)).toMatchObject({ status: 'REGISTERED', lastFencingToken: waiting.fencingToken, data: { customer: cart.customer } });
    expect((await h.rms.inspect(started.intentKey)).exists).toBe(true);
    // A new order for the same cart cannot take the row over.
    expect((await h.client.start('order', cart)).reservation.status).toBe('DUPLICATE');
    const listed = await eventually(
      () => h.client.list({ phase: 'NEEDS_ATTENTION' }),
      (rows) => rows.some((r) => r.workflowId === started.workflowId),
      'the saga to be listed by its phase',
    );
    expect(listed.every((r) => r.phase === 'NEEDS_ATTENTION' && r.status === 'RUNNING')).toBe(true);
    // A refund the card network refuses is refused again: the redrive answers that the saga still waits.
    const redriven = await h.client.redrive(started.workflowId);
    expect(redriven).toMatchObject({ phase: 'NEEDS_ATTENTION', compensationsRun: ['releaseStock'], attention: { pending: ['refundPayment', 'undoEntity'], redrives: 1 } });
  });

  it('stops the running step when cancelled (its AbortSignal), then compensates: nothing charged, the step tombstoned', async () => {
    // Each step works 5 s: long enough for the cancellation to reach it by a heartbeat.
    const started = await h.client.start('order', order({ simulate: { stepDelayMs: 5000 } }));
    await eventually(() => phaseOf(started.workflowId), (s: SagaState) => s.phase === 'RUNNING_STEPS', 'the steps to begin');

    await h.client.cancel(started.workflowId);
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'CANCELLED', stepsDone: [] });
    // Only the compensation of the step that was tried runs, after that step's attempt ended.
    expect(final.compensationsRun).toEqual(['refundPayment', 'undoEntity']);
    expect((await h.chargesOf(started.workflowId)).filter((c) => c.status === 'succeeded')).toEqual([]);
    // The stopped step's key is taken by its compensation: no late attempt can charge.
    const record = await h.pool.query(`SELECT status FROM idempotency_store WHERE scope = 'order-step' AND key = $1`, [`${started.workflowId}:chargePayment`]);
    expect(record.rows).toEqual([{ status: 'TOMBSTONE' }]);
    expect((await rowOf(started.intentKey))?.status).toBe('COMPENSATED');
  });

  it('stops the last step when cancelled during it, and undoes the steps before it', async () => {
    const started = await h.client.start('order', order({ simulate: { stepDelayMs: 5000 } }));
    await eventually(() => phaseOf(started.workflowId), (s: SagaState) => s.stepsDone.includes('chargePayment'), 'the payment to be charged');

    await h.client.cancel(started.workflowId);
    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'CANCELLED', stepsDone: ['chargePayment'] });
    expect(final.compensationsRun).toEqual(['releaseStock', 'refundPayment', 'undoEntity']);
    expect(await h.chargesOf(started.workflowId)).toMatchObject([{ status: 'succeeded', refunded: true }]);
    const held = await h.pool.query(`SELECT sku FROM stock_reservations WHERE saga_key = $1`, [started.workflowId]);
    expect(held.rows).toEqual([]);
    expect((await rowOf(started.intentKey))?.status).toBe('COMPENSATED');
  });

  it('refuses bad input before starting anything', async () => {
    await expect(h.client.start('nope', order())).rejects.toMatchObject({ code: 'UNKNOWN_SAGA_TYPE' });
    await expect(h.client.start('order', { ...order(), items: [] })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(h.client.start('order', { ...order(), customer: 'x'.repeat(70_000) })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(h.client.start('order', order(), { idempotencyKey: 'has space' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(await h.client.list({ type: 'nope' })).toEqual([]);
  });

  it.each([
    ['a NUL character', 'ada\u0000lovelace'],
    ['a lone surrogate', 'ada\uD800lovelace'],
  ])('refuses a customer holding %s with INVALID_INPUT at the gate: no lease, no marker, no row, no workflow', async (_, customer) => {
    const data = order({ customer });
    const key = `hostile-${randomUUID()}`;
    const intent = intentKey(orderSaga.scope, orderSaga.intent(data), TEST_INTENT_SECRET);

    const refused = h.client.start('order', data, { idempotencyKey: key });

    await expect(refused).rejects.toBeInstanceOf(SagaInputError);
    await expect(refused).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/^invalid order input at customer: /) });
    expect(await h.rms.inspect(intent)).toEqual({ intent, exists: false });
    expect(await rowOf(intent)).toBeUndefined();
    await expect(h.client.temporal.workflow.getHandle(sagaWorkflowId('order', key)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});
