/**
 * Records the histories that test/workflows/replay.test.ts replays: one per saga shape, run for real
 * against the dev stack (`make dev`). Run it when the workflow changes on purpose (with a versioning
 * plan for running sagas), and commit the files. The `legacy-*` files were recorded before the gate
 * (the workflow reserved by itself, with its run id as the session), the `pre-heartbeat-*` files
 * before steps heartbeated (patch `steps-heartbeat`) and the `pre-folded-*` files before the patches
 * were folded into one (patch `folded-patches`); all are kept, never re-recorded: they prove that
 * sagas started then still replay.
 *
 *   npx tsx scripts/record-histories.ts             every shape
 *   npx tsx scripts/record-histories.ts NAME ...    only these (the others' files stay as they are)
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { SagaClient } from '../src/client';
import { EncryptionCodec, createCodecServer } from '../src/codec';
import { loadConfigOrExit, requireCodecKeys, type Config } from '../src/config';
import type { PoolClient } from 'pg';
import { z } from 'zod';
import { fencedTableSql } from '../src/db/fenced-schema';
import { createPool } from '../src/db/pool';
import { defineOperation, defineSaga, defineSagaTypes, fencedTable, type EntityOperation, type ExternalStep, type SagaDefinition, type SagaTypes, type StepContext, type StepHandler } from '../src/sagas';
import { SAGA_OUTCOME, sagaWorkflowId, type SagaState } from '../src/shared';
import { createWorker } from '../src/worker';
import { TEST_CODEC_KEYS } from '../test/helpers/secrets';
import { sagaTypesFor } from '../test/fixtures/orders';
import { externalFailingDuring, failingDuring, givingUpSoon } from '../test/fixtures/outages';

const DIR = path.join(__dirname, '../test/workflows/histories');

/** Whether the stock compensation of `order-fragile` fails (as if its service were down). */
const stock = { down: true };

/** Whether the refund of `order-amend-fragile`'s charge fails (as if the provider were down). */
const refunds = { down: true };

/**
 * The order app's types, and `order-grouped`: the order saga with its two steps as one group (run
 * at once); `order-fragile`: one whose stock compensation fails while `stock.down`, waiting 3 s in
 * NEEDS_ATTENTION (`order-fragile-patient`: a minute); `order-unattended`: one that does not wait;
 * `order-limited`: the order saga with limits per caller and per customer (gate-limits);
 * `order-amend-fragile`: order-amend, whose refund of the amended charge fails while `refunds.down`;
 * `order-noted`: the order saga with a notice between its steps (a step without a compensation);
 * `order-trusting`: one whose stock step, refused, did nothing (`undoRefused: false`); and
 * `loan` with `loan-return`, an operation that releases its entity; `seat-hold` and
 * `seat-hold-timed`, which wait for a signal and on a timer.
 */
function recordedTypes(config: Config): SagaTypes {
  const types = sagaTypesFor(config);
  const { kind: _kind, ...order } = types.order as SagaDefinition<unknown>;
  const releaseStock = failingDuring(stock, 'the stock service', order.handlers.releaseStock as StepHandler<unknown>);
  const { kind: _operation, ...amend } = types['order-amend'] as EntityOperation<unknown>;
  const refundAmendedCharge = externalFailingDuring(refunds, 'the payment provider', amend.handlers.refundAmendedCharge as ExternalStep<unknown>);
  return defineSagaTypes(
    ...Object.values(types),
    defineOperation({ ...givingUpSoon(amend, 'refundAmendedCharge'), type: 'order-amend-fragile', handlers: { ...amend.handlers, refundAmendedCharge } }),
    defineSaga({ ...order, type: 'order-grouped', steps: order.steps.map((s) => ({ ...s, group: 'together' })) }),
    defineSaga({
      ...order,
      type: 'order-noted',
      steps: [order.steps[0]!, { step: 'noteOrder' }, ...order.steps.slice(1)],
      handlers: { ...order.handlers, noteOrder: async (_tx, ctx) => ({ noticeOf: ctx.entity?.id, after: Object.keys(ctx.entity?.results ?? {}) }) },
    }),
    defineSaga({ ...order, type: 'order-trusting', steps: order.steps.map((s) => (s.step === 'reserveStock' ? { ...s, undoRefused: false } : s)) }),
    defineSaga({ ...givingUpSoon(order, 'releaseStock'), type: 'order-fragile', handlers: { ...order.handlers, releaseStock }, compensation: { ...order.compensation, attentionMs: 3000 } }),
    defineSaga({ ...givingUpSoon(order, 'releaseStock'), type: 'order-fragile-patient', handlers: { ...order.handlers, releaseStock }, compensation: { ...order.compensation, attentionMs: 60_000 } }),
    defineSaga({ ...order, type: 'order-unattended', compensation: { ...order.compensation, attentionMs: 0 } }),
    defineSaga({ ...order, type: 'order-limited', limits: [{ inFlight: 100 }, { per: (input) => (input as { customer: string }).customer, inFlight: 10 }] }),
    ...loanTypes,
    ...seatTypes,
  );
}

/** The table of `seat-hold`, a hold that waits for its payment (or expires). */
const SEATS_SQL = fencedTableSql('recorded_seat_holds', 'seat text NOT NULL');
const seats = fencedTable('recorded_seat_holds', ['seat']);

/** `seat-hold`: holds a seat, waits 3 s for `payment-confirmed`, issues the ticket; `seat-hold-timed`: waits on a timer instead. */
const seatTypes = [
  defineSaga({
    type: 'seat-hold',
    scope: 'recorded-seat',
    schema: z.object({ seat: z.string() }).strict(),
    intent: (input) => input,
    table: seats,
    row: (input) => ({ seat: input.seat }),
    steps: [{ step: 'holdSeat', compensation: 'releaseSeat' }, { step: 'paid', wait: { signal: 'payment-confirmed', timeoutMs: 3000 } }, { step: 'issueTicket' }],
    handlers: { holdSeat: noted, releaseSeat: noted, issueTicket: noted },
  }),
  defineSaga({
    type: 'seat-hold-timed',
    scope: 'recorded-seat-timed',
    schema: z.object({ seat: z.string() }).strict(),
    intent: (input) => input,
    table: seats,
    row: (input) => ({ seat: input.seat }),
    steps: [{ step: 'holdSeat', compensation: 'releaseSeat' }, { step: 'due', wait: { timeoutMs: 500 } }, { step: 'issueTicket' }],
    handlers: { holdSeat: noted, releaseSeat: noted, issueTicket: noted },
  }),
];

/** The table of `loan` (a copy of a book lent), which its operation `loan-return` releases. */
const LOANS_SQL = fencedTableSql('recorded_loans', 'copy text NOT NULL', { operations: true });
const loans = fencedTable('recorded_loans', ['copy']);
/** A step that notes where it ran (hoisted: every recorded type below uses it). */
async function noted(_tx: PoolClient, ctx: StepContext<unknown>): Promise<unknown> {
  return { at: ctx.operation?.entityId ?? ctx.entity?.id };
}

/** `loan` creates a loan of a copy; `loan-return` ends it and releases the copy's intent, so it can be lent again. */
const loanTypes = [
  defineSaga({
    type: 'loan',
    scope: 'recorded-loan',
    schema: z.object({ copy: z.string() }).strict(),
    intent: (input) => input,
    table: loans,
    row: (input) => ({ copy: input.copy }),
    steps: [{ step: 'lend', compensation: 'unlend' }],
    handlers: { lend: noted, unlend: noted },
  }),
  defineOperation({
    type: 'loan-return',
    scope: 'recorded-loan',
    schema: z.object({ loan: z.string() }).strict(),
    entity: (input) => input.loan,
    table: loans,
    releases: true,
    steps: [{ step: 'takeBack', compensation: 'handBack' }],
    handlers: { takeBack: noted, handBack: noted },
  }),
];

async function main(): Promise<void> {
  const temporal = execFileSync(path.join(__dirname, 'ensure-temporal'), { encoding: 'utf8' }).trim();
  // Simulations on: the cancelled shapes need a step slow enough to cancel during it.
  // A secret of the recording's own (replay reads the plan from history and never makes a key), and
  // the tests' codec key, with which test/workflows/replay.test.ts reads the recorded payloads.
  const env = {
    ...process.env,
    TEMPORAL_TASK_QUEUE: `record-${randomUUID()}`,
    SAGA_SIMULATIONS: 'true',
    INTENT_KEY_SECRET: randomBytes(32).toString('base64'),
    SAGA_CODEC_KEYS: TEST_CODEC_KEYS,
  };
  const config = loadConfigOrExit({ ...env, LEASE_MS: '30000', HEARTBEAT_INTERVAL_MS: '300', HEARTBEAT_TIMEOUT_MS: '1500' });
  // The loans' table, before any worker checks it.
  const setup = createPool(config.db);
  await setup.query(`${LOANS_SQL}\n${SEATS_SQL}`).finally(() => setup.end());
  const client = await SagaClient.connect({ sagas: recordedTypes(config), config, operator: true });
  // A lease that ends before the worker starts (every worker down past the pickup lease): the saga has to reserve again.
  const shortLease = loadConfigOrExit({ ...env, LEASE_MS: '1000', PICKUP_LEASE_MS: '1000', HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TIMEOUT_MS: '600' });
  const shortClient = await SagaClient.connect({ sagas: recordedTypes(shortLease), config: shortLease, operator: true });
  // The Temporal CLI encrypts what it sends and decrypts answers through a codec server with the
  // recording's keys; `workflow show` goes without it, so the files keep the payloads as stored.
  const codecServer = createCodecServer({ codec: new EncryptionCodec(requireCodecKeys(config)), corsOrigins: [] });
  const codecEndpoint = await codecServer.listen({ host: '127.0.0.1', port: 0 });
  // Asynchronous: the codec server answers from this very process.
  const cli = async (args: string[], codec = true) =>
    (
      await promisify(execFile)(
        temporal,
        [...args, '--address', config.temporal.address, '--namespace', config.temporal.namespace, ...(codec ? ['--codec-endpoint', codecEndpoint] : [])],
        { encoding: 'utf8' },
      )
    ).stdout;
  const cart = (card: string, sku = 'widget', quantity = 1) => ({
    customer: `recorder-${randomUUID()}`,
    items: [{ sku, quantity, priceCents: 500 }],
    payment: { card },
  });
  // Each step works 5 s: long enough for a cancellation to reach it by a heartbeat.
  const slowSteps = () => ({ ...cart('4242424242424242'), simulate: { stepDelayMs: 5000 } });
  /** Resolves once `ready` holds for the saga's state (polled through the `state` query). */
  const until = async (workflowId: string, ready: (state: SagaState) => boolean) => {
    for (;;) {
      const { state } = await client.status(workflowId);
      if (ready(state)) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  /** Cancels the saga once `ready` holds for its state. */
  const cancelWhen = async (workflowId: string, ready: (state: SagaState) => boolean) => {
    await until(workflowId, ready);
    await client.cancel(workflowId);
  };
  const startByType = async (key: string, input: unknown) => {
    const workflowId = sagaWorkflowId('order', key);
    await cli(['workflow', 'start', '--type', 'reservationSaga', '--task-queue', config.temporal.taskQueue, '--workflow-id', workflowId, '--input', JSON.stringify(input)]);
    return workflowId;
  };
  const shapes: Record<string, string> = {};
  try {
    // Started by SagaClient before any worker runs; the third one's gate lease ends first.
    shapes['gate-completed'] = (await client.start('order', cart('4242424242424242'))).workflowId;
    shapes['gate-compensated'] = (await client.start('order', cart('4242424242424242', 'rare-coin', 2))).workflowId;
    // Its two steps run at once (a step group).
    shapes['gate-grouped-steps'] = (await client.start('order-grouped', cart('4242424242424242'))).workflowId;
    // A notice between its steps (no compensation), each step given what the steps before returned;
    // short of stock after it, the steps around it are undone.
    shapes['gate-notice-completed'] = (await client.start('order-noted', cart('4242424242424242'))).workflowId;
    shapes['gate-notice-compensated'] = (await client.start('order-noted', cart('4242424242424242', 'rare-coin', 2))).workflowId;
    // Its stock step refused, and declared to have done nothing then: only the charge is undone.
    shapes['gate-refused-not-undone'] = (await client.start('order-trusting', cart('4242424242424242', 'rare-coin', 2))).workflowId;
    // Of a type with limits: each counts itself out of its caller's counters when it ends (gate-limits).
    shapes['gate-limited-completed'] = (await client.start('order-limited', cart('4242424242424242'))).workflowId;
    shapes['gate-limited-compensated'] = (await client.start('order-limited', cart('4242424242424242', 'rare-coin', 2))).workflowId;
    // A saga of a version that records its plan's step names in its memo (memo-plan-steps).
    shapes['gate-steps-recorded'] = (await client.start('order', cart('4242424242424242'))).workflowId;
    shapes['gate-lease-expired'] = (await shortClient.start('order', cart('4242424242424242'))).workflowId;
    // A refund the card network refuses: the saga ends COMPENSATION_FAILED, keeping its entity (its type does not wait for a redrive).
    shapes['gate-compensation-failed'] = (await client.start('order-unattended', cart('4000000000000259', 'rare-coin', 5))).workflowId;
    // The stock compensation fails: the saga waits in NEEDS_ATTENTION; redriven twice (the cause
    // lasts, then it is fixed) it ends COMPENSATED; not redriven, its wait ends COMPENSATION_FAILED.
    shapes['gate-redriven'] = (await client.start('order-fragile', cart('4242424242424242', 'rare-coin', 9))).workflowId;
    shapes['gate-attention-ended'] = (await client.start('order-fragile', cart('4242424242424242', 'rare-coin', 9))).workflowId;
    // The same, cancelled while it waits, then redriven once the cause is fixed: the redrive is
    // answered with its end (redrive-of-cancelled-saga), COMPENSATED.
    shapes['gate-cancelled-redriven'] = (await client.start('order-fragile-patient', cart('4242424242424242', 'rare-coin', 9))).workflowId;
    // Cancelled during its first step and during its last: the running step stops, the saga compensates.
    shapes['gate-cancelled'] = (await client.start('order', slowSteps())).workflowId;
    shapes['gate-cancelled-after-steps'] = (await client.start('order', slowSteps())).workflowId;
    // Cancelled before any worker ran it: it plans and confirms its reservation, then compensates.
    shapes['gate-cancelled-before-worker'] = (await client.start('order', cart('4242424242424242'))).workflowId;
    await client.cancel(shapes['gate-cancelled-before-worker']);
    // Its gate lease ends before the worker starts, and another request takes the intent meanwhile:
    // it ends REJECTED, a failed workflow (rejected-saga-fails).
    const contested = cart('4242424242424242');
    shapes['gate-rejected'] = (await shortClient.start('order', contested)).workflowId;
    await new Promise((resolve) => setTimeout(resolve, 2 * shortLease.saga.leaseMs));
    const taker = await client.start('order', contested);
    // Past its deadline: during its steps (it compensates, EXPIRED), and before any worker ran it (it
    // writes nothing). The deadline counts from the start, before the worker below starts (it took
    // up to 9 s): 16 s leave it time to write, not to finish both of its 5 s steps.
    shapes['gate-expired'] = (await client.start('order', slowSteps(), { deadlineMs: 16_000 })).workflowId;
    shapes['gate-expired-unwritten'] = (await client.start('order', cart('4242424242424242'), { deadlineMs: 1 })).workflowId;
    // Started by a plain Temporal client: a saga that reserves by itself, one rejected, one malformed.
    const held = cart('4242424242424242');
    const holder = await client.start('order', held);
    const key = randomUUID();
    shapes['by-type-completed'] = await startByType(key, { type: 'order', idempotencyKey: key, data: cart('4242424242424242') });
    const conflictKey = randomUUID();
    shapes['by-type-conflict'] = await startByType(conflictKey, { type: 'order', idempotencyKey: conflictKey, data: held });
    // One that names its owner: the saga records the owner in its memo (memo-owner).
    const ownedKey = randomUUID();
    shapes['by-type-owned'] = await startByType(ownedKey, { type: 'order', idempotencyKey: ownedKey, data: cart('4242424242424242'), owner: 'plain-owner' });
    const badKey = randomUUID();
    shapes['by-type-invalid'] = await startByType(badKey, { type: 'order', idempotencyKey: badKey, payload: held });
    // The idempotency store's purge, as its schedule starts it (src/schedules.ts).
    const purgeId = `purge-${randomUUID()}`;
    await client.temporal.workflow.start('purgeIdempotencyStore', {
      taskQueue: config.temporal.taskQueue,
      workflowId: purgeId,
      args: [{ olderThanMs: config.idempotencyRetentionMs, batchSize: 1000, maxBatches: 500 }],
    });
    shapes['purge-completed'] = purgeId;

    const { worker, close } = await createWorker({ sagas: recordedTypes(config), config });
    try {
      await worker.runUntil(async () => {
        // Asynchronously: the worker answering the update runs in this process.
        const args = ['workflow', 'update', 'execute', '--name', 'reservation', '--workflow-id', shapes['by-type-completed']!];
        await promisify(execFile)(temporal, [...args, '--address', config.temporal.address, '--namespace', config.temporal.namespace, '--codec-endpoint', codecEndpoint]);
        await cancelWhen(shapes['gate-cancelled']!, (s) => s.phase === 'RUNNING_STEPS');
        await cancelWhen(shapes['gate-cancelled-after-steps']!, (s) => s.stepsDone.includes('chargePayment'));
        await cancelWhen(shapes['gate-cancelled-redriven']!, (s) => s.phase === 'NEEDS_ATTENTION');
        await until(shapes['gate-redriven']!, (s) => s.phase === 'NEEDS_ATTENTION');
        await client.redrive(shapes['gate-redriven']!);
        stock.down = false;
        await client.redrive(shapes['gate-redriven']!);
        await client.redrive(shapes['gate-cancelled-redriven']!);
        await Promise.all([...Object.values(shapes), holder.workflowId, taker.workflowId].map((id) => client.result(id).catch(() => undefined)));
        // Operations on existing orders, under each order's lock: a cancellation, an amendment, an
        // amendment whose card is declined, and one cancelled while it charges.
        const orderOf = async () => (await client.result((await client.start('order', cart('4242424242424242', 'widget', 2))).workflowId)).entityId!;
        const [cancelled, amended, declined, interrupted] = await Promise.all([orderOf(), orderOf(), orderOf(), orderOf()]);
        const amend = (order: string, card: string, simulate?: { stepDelayMs: number }) => ({ order, items: [{ sku: 'widget', quantity: 3 }], payment: { card }, ...(simulate ? { simulate } : {}) });
        shapes['operation-cancel-completed'] = (await client.start('order-cancel', { order: cancelled })).workflowId;
        shapes['operation-amend-completed'] = (await client.start('order-amend', amend(amended, '4242424242424242'))).workflowId;
        shapes['operation-amend-declined'] = (await client.start('order-amend', amend(declined, '4000000000000002'))).workflowId;
        shapes['operation-amend-cancelled'] = (await client.start('order-amend', amend(interrupted, '4242424242424242', { stepDelayMs: 5000 }))).workflowId;
        await cancelWhen(shapes['operation-amend-cancelled'], (s) => s.stepsDone.includes('priceAmendment'));
        // An amendment charged, then short of stock, whose refund fails: it waits in NEEDS_ATTENTION
        // holding the order's lock, and a redrive once the refunds work again undoes it.
        const sku = `recorder-${randomUUID().slice(0, 8)}`;
        const pool = createPool(config.db);
        await pool.query('INSERT INTO stock (sku, available) VALUES ($1, 2)', [sku]).finally(() => pool.end());
        const scarce = (await client.result((await client.start('order', { ...cart('4242424242424242'), items: [{ sku, quantity: 1, priceCents: 500 }] })).workflowId)).entityId!;
        shapes['operation-redriven'] = (await client.start('order-amend-fragile', { order: scarce, items: [{ sku, quantity: 5 }], payment: { card: '4242424242424242' } })).workflowId;
        await until(shapes['operation-redriven'], (s) => s.phase === 'NEEDS_ATTENTION');
        refunds.down = false;
        await client.redrive(shapes['operation-redriven']);
        // A loan returned: its row RELEASED and its copy's intent freed, then the copy lent again.
        const copy = `recorder-${randomUUID()}`;
        const loan = (await client.result((await client.start('loan', { copy })).workflowId)).entityId!;
        shapes['operation-release-completed'] = (await client.start('loan-return', { loan })).workflowId;
        await client.result(shapes['operation-release-completed']);
        const again = await client.start('loan', { copy });
        if (again.reservation.status !== 'SUCCESS') throw new Error(`the returned copy was answered ${again.reservation.status}`);
        // A seat held until its payment's signal; one whose hold expired unpaid (compensated); one on a timer.
        shapes['gate-wait-signalled'] = (await client.start('seat-hold', { seat: `recorder-${randomUUID()}` })).workflowId;
        shapes['gate-wait-expired'] = (await client.start('seat-hold', { seat: `recorder-${randomUUID()}` })).workflowId;
        shapes['gate-wait-timer'] = (await client.start('seat-hold-timed', { seat: `recorder-${randomUUID()}` })).workflowId;
        await until(shapes['gate-wait-signalled'], (s) => s.phase === 'WAITING');
        await client.signal(shapes['gate-wait-signalled'], 'payment-confirmed', { paymentId: 'recorded' });
        await Promise.all(Object.values(shapes).map((id) => client.result(id).catch(() => undefined)));
      });
    } finally {
      await close();
    }
    const only = process.argv.slice(2);
    for (const name of only) if (!(name in shapes)) throw new Error(`no shape ${name} (shapes: ${Object.keys(shapes).join(', ')})`);
    for (const [name, workflowId] of Object.entries(shapes)) {
      if (only.length > 0 && !only.includes(name)) continue;
      // The CLI writes the canonical proto JSON that the SDK's replayer reads.
      writeFileSync(path.join(DIR, `${name}.json`), await cli(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json'], false));
      const description = await client.temporal.workflow.getHandle(workflowId).describe();
      console.log(`${name}: ${workflowId} ${description.status.name} ${description.typedSearchAttributes.get(SAGA_OUTCOME) ?? ''}`);
    }
  } finally {
    await client.close();
    await shortClient.close();
    await codecServer.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
