/**
 * Durable waits: a seat is held while its buyer pays. `seat-hold` holds the seat, waits for the
 * signal `payment-confirmed` (3 s here; minutes in a real app), then issues the ticket; an unpaid
 * hold expires and is undone. Against the real Temporal dev server, PostgreSQL and Redis; the seats
 * live in a schema of this file's own.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Pool } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SignalError } from '../../src/client';
import { ClientCore, temporalDefinitions } from '../../src/client/core';
import { updateRunning } from '../../src/client/operator';
import { ErrorType } from '../../src/shared/saga';
import { createPool } from '../../src/db';
import { createSagaServer } from '../../src/http';
import { SagaMetrics } from '../../src/metrics';
import { fencedTableSql } from '../../src/db/fenced-schema';
import { defineSaga, fencedTable, SagaDeclarationError, sagaTypesOf, type SagaTypes, type StepHandler } from '../../src/sagas';
import { testConfig } from '../helpers/context';
import { eventually, startHarness, withWorker, type SagaHarness } from '../helpers/saga-harness';

const schema = `waits_${randomBytes(4).toString('hex')}`;
const holds = fencedTable(`${schema}.holds`, ['seat']);
const seatSchema = z.object({ seat: z.string().min(1), holdMs: z.number().int().nonnegative().optional() }).strict();
type Seat = z.infer<typeof seatSchema>;

/** The sagas whose ticket waits for their test to let it go on (see {@link latchTicket}), by saga key. */
const ticketLatches = new Map<string, Promise<void>>();

/** Holds the ticket step of saga `sagaKey` until the function returned is called (a saga then runs on after its signal). */
function latchTicket(sagaKey: string): () => void {
  let open!: () => void;
  ticketLatches.set(sagaKey, new Promise<void>((resolve) => (open = resolve)));
  return () => {
    ticketLatches.delete(sagaKey);
    open();
  };
}

/** Each step writes what it did to the ledger, keyed by its saga: the effects a test counts. */
const record =
  (what: string): StepHandler<Seat> =>
  async (tx, ctx) => {
    if (ctx.input.holdMs && what === 'held') await new Promise((resolve) => setTimeout(resolve, ctx.input.holdMs));
    if (what === 'issued') await ticketLatches.get(ctx.sagaKey);
    const seen = JSON.stringify(ctx.entity?.results ?? {});
    await tx.query(`INSERT INTO ${schema}.ledger (saga_key, what, seen) VALUES ($1, $2, $3) ON CONFLICT (saga_key, what) DO NOTHING`, [ctx.sagaKey, what, seen]);
    return { [what]: true };
  };

const seatHold = (type: string, wait: { signal?: string; timeoutMs: number; onTimeout?: 'compensate' | 'continue' }) =>
  defineSaga({
    type,
    scope: 'seat',
    schema: seatSchema,
    intent: (input) => ({ seat: input.seat }),
    table: holds,
    row: (input) => ({ seat: input.seat }),
    steps: [{ step: 'holdSeat', compensation: 'releaseSeat' }, { step: 'paid', wait }, { step: 'issueTicket' }],
    handlers: { holdSeat: record('held'), releaseSeat: record('released'), issueTicket: record('issued') },
  });

const PAY_WITHIN_MS = 3000;
const types: SagaTypes = sagaTypesOf([
  seatHold('seat-hold', { signal: 'payment-confirmed', timeoutMs: PAY_WITHIN_MS }),
  seatHold('seat-hold-lenient', { signal: 'payment-confirmed', timeoutMs: 500, onTimeout: 'continue' }),
  seatHold('seat-hold-timed', { timeoutMs: 300 }),
]);

let h: SagaHarness;
let setup: Pool;
beforeAll(async () => {
  setup = createPool(testConfig('saga waits').db);
  await setup.query(`CREATE SCHEMA ${schema}`);
  await setup.query(fencedTableSql(`${schema}.holds`, 'seat text NOT NULL'));
  await setup.query(`CREATE TABLE ${schema}.ledger (saga_key text NOT NULL, what text NOT NULL, seen jsonb NOT NULL, PRIMARY KEY (saga_key, what))`);
  h = await startHarness('saga waits', { sagaTypes: types, worker: false });
});
afterAll(async () => {
  await h?.stop();
  await setup?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await setup?.end();
});

async function ledgerOf(sagaKey: string): Promise<{ what: string; seen: Record<string, unknown> }[]> {
  const { rows } = await h.pool.query<{ what: string; seen: Record<string, unknown> }>(`SELECT what, seen FROM ${schema}.ledger WHERE saga_key = $1 ORDER BY what`, [sagaKey]);
  return rows;
}

const seat = () => `seat-${randomUUID()}`;

/** A worker of this file's types, until `fn` resolves (each test runs its own). */
const run = <T>(fn: () => Promise<T>): Promise<T> => withWorker({ config: h.config, sagas: types, metrics }, fn);

/** The workers' metrics: every worker of this file counts into them. */
const metrics = new SagaMetrics({ types });

/** `saga_waits_total` by `<saga type>/<event>`. */
async function waitCounts(): Promise<Record<string, number>> {
  const { values } = await metrics.registry.getSingleMetric('saga_waits_total')!.get();
  return Object.fromEntries(values.map((v) => [`${String(v.labels.saga_type)}/${String(v.labels.outcome)}`, v.value]));
}

describe('a saga that waits for a signal', () => {
  it('waits holding its entity, with no lease kept, and goes on with the first signal it gets; a repeat changes nothing', () => run(async () => {
    const s = seat();
    const started = await h.client.start('seat-hold', { seat: s });
    // The ticket waits until the repeat below is answered: the repeat reaches a saga still running.
    const letTicketGo = latchTicket(started.workflowId);
    const waiting = await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'WAITING', 'the saga to wait');
    expect(waiting.state.waiting).toMatchObject({ step: 'paid', signal: 'payment-confirmed', until: expect.any(String) });
    // Waiting costs no lease: the entity's marker holds the intent, and another request is a DUPLICATE.
    expect((await h.rms.inspect(started.intentKey)).holder).toBeUndefined();
    expect((await h.client.start('seat-hold', { seat: s })).reservation.status).toBe('DUPLICATE');
    const listed = await h.client.list({ type: 'seat-hold', phase: 'WAITING' });
    expect(listed.map((s) => s.workflowId)).toContain(started.workflowId);

    let first, again;
    try {
      first = await h.client.signal(started.workflowId, 'payment-confirmed', { paymentId: 'pay-1' });
      again = await h.client.signal(started.workflowId, 'payment-confirmed', { paymentId: 'pay-2' });
    } finally {
      letTicketGo();
    }

    expect(first).toEqual({ signal: 'payment-confirmed', first: true });
    expect(again).toEqual({ signal: 'payment-confirmed', first: false });
    const final = await h.client.result(started.workflowId);
    expect(final).toMatchObject({ outcome: 'COMPLETED', stepsDone: ['holdSeat', 'paid', 'issueTicket'] });
    expect(final.waiting).toBeUndefined();
    const ledger = await ledgerOf(started.workflowId);
    expect(ledger.map((l) => l.what)).toEqual(['held', 'issued']);
    // The ticket's step saw the first signal's payload.
    expect(ledger.find((l) => l.what === 'issued')!.seen).toMatchObject({ paid: { signal: 'payment-confirmed', payload: { paymentId: 'pay-1' } } });
    await expect(h.client.signal(started.workflowId, 'payment-confirmed')).rejects.toThrow(SignalError);
  }));

  it('refuses a signal that meets the saga\'s end on its way as one sent after the end: typed, and nothing recorded', () => run(async () => {
    const started = await h.client.start('seat-hold', { seat: seat() });
    const letTicketGo = latchTicket(started.workflowId);
    await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'WAITING', 'the saga to wait');
    expect(await h.client.signal(started.workflowId, 'payment-confirmed', { paymentId: 'pay-1' })).toEqual({ signal: 'payment-confirmed', first: true });
    const { signalUpdate } = await temporalDefinitions();
    const refusals = { refusal: ErrorType.NOT_WAITING, refused: (message: string) => new SignalError(started.workflowId, message), ended: (status: string) => `ended (${status})` };

    // The check finds the saga running; the saga ends before the update is sent (Temporal refuses
    // it then, or aborts it when the saga closes with the update on its way).
    const late = updateRunning(new ClientCore(h.clientOptions({}, { operator: true })), started.workflowId, {}, async (handle) => {
      letTicketGo();
      await handle.result();
      return handle.executeUpdate(signalUpdate, { args: [{ signal: 'payment-confirmed', payload: { paymentId: 'pay-late' } }] });
    }, refusals);

    await expect(late).rejects.toThrow(SignalError);
    await expect(late).rejects.toThrow('ended (COMPLETED)');
    expect((await h.client.result(started.workflowId)).outcome).toBe('COMPLETED');
    expect((await ledgerOf(started.workflowId)).find((l) => l.what === 'issued')!.seen).toMatchObject({ paid: { payload: { paymentId: 'pay-1' } } });
  }));

  it('expires an unpaid hold: the seat is released and the intent free for the next buyer', () => run(async () => {
    const s = seat();
    const started = await h.client.start('seat-hold', { seat: s });

    const final = await h.client.result(started.workflowId);

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'WAIT_TIMED_OUT', stepsDone: ['holdSeat'], compensationsRun: ['releaseSeat', 'undoEntity'] });
    expect((await ledgerOf(started.workflowId)).map((l) => l.what)).toEqual(['held', 'released']);
    // Paid too late: refused, nothing recorded.
    await expect(h.client.signal(started.workflowId, 'payment-confirmed')).rejects.toThrow(`saga ${started.workflowId} has ended (COMPLETED): it waits for no signal`);
    const next = await h.client.start('seat-hold', { seat: s });
    expect(next.reservation.status).toBe('SUCCESS');
    await h.client.cancel(next.workflowId);
    await h.client.result(next.workflowId);
  }));

  it('takes a signal sent before the saga reached its wait', () => run(async () => {
    // The hold takes a second: the payment is confirmed meanwhile.
    const started = await h.client.start('seat-hold', { seat: seat(), holdMs: 1000 });
    expect(await h.client.signal(started.workflowId, 'payment-confirmed', { early: true })).toEqual({ signal: 'payment-confirmed', first: true });

    const final = await h.client.result(started.workflowId);

    expect(final.outcome).toBe('COMPLETED');
    expect((await ledgerOf(started.workflowId)).find((l) => l.what === 'issued')!.seen).toMatchObject({ paid: { payload: { early: true } } });
  }));

  it('refuses a signal it does not wait for, and answers another owner as if there were no saga', () => run(async () => {
    const started = await h.client.start('seat-hold', { seat: seat() });
    await eventually(() => h.client.status(started.workflowId), (s) => s.state.phase === 'WAITING', 'the saga to wait');

    await expect(h.client.signal(started.workflowId, 'item-collected')).rejects.toThrow(`saga ${started.workflowId} waits for no signal "item-collected"`);
    await expect(h.newClient({}, { owner: 'someone-else' }).signal(started.workflowId, 'payment-confirmed')).rejects.toThrow(WorkflowNotFoundError);
    await expect(h.client.signal(started.workflowId, 'bad name!')).rejects.toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
    await h.client.cancel(started.workflowId);
    expect(await h.client.result(started.workflowId)).toMatchObject({ outcome: 'COMPENSATED', reason: 'CANCELLED', compensationsRun: ['releaseSeat', 'undoEntity'] });
  }));

  it('goes on after a timeout that continues, and after a timer', () => run(async () => {
    const [lenient, timed] = await Promise.all([h.client.start('seat-hold-lenient', { seat: seat() }), h.client.start('seat-hold-timed', { seat: seat() })]);

    expect(await h.client.result(lenient.workflowId)).toMatchObject({ outcome: 'COMPLETED' });
    expect(await h.client.result(timed.workflowId)).toMatchObject({ outcome: 'COMPLETED' });
    expect((await ledgerOf(lenient.workflowId)).find((l) => l.what === 'issued')!.seen).toMatchObject({ paid: { timedOut: true } });
    expect((await ledgerOf(timed.workflowId)).find((l) => l.what === 'issued')!.seen).toMatchObject({ paid: { elapsed: true } });
  }));

  it('keeps waiting across a worker that stops: no worker runs during the wait, and the signal still completes it', async () => {
    const started = await run(async () => {
      const saga = await h.client.start('seat-hold', { seat: seat() });
      await eventually(() => h.client.status(saga.workflowId), (s) => s.state.phase === 'WAITING', 'the saga to wait');
      return saga;
    });
    // No worker runs now: the saga waits in Temporal alone. A new worker takes the signal.
    const final = await run(async () => {
      expect(await h.client.signal(started.workflowId, 'payment-confirmed', { late: 'but in time' })).toMatchObject({ first: true });
      return h.client.result(started.workflowId);
    });

    expect(final.outcome).toBe('COMPLETED');
  });
});

describe('the waits metric', () => {
  it('counts each wait as it begins and as it ends, by how', () => run(async () => {
    const before = await waitCounts();
    const paid = await h.client.start('seat-hold', { seat: seat() });
    const unpaid = await h.client.start('seat-hold', { seat: seat() });
    await eventually(() => h.client.status(paid.workflowId), (s) => s.state.phase === 'WAITING', 'the saga to wait');
    await h.client.signal(paid.workflowId, 'payment-confirmed');
    await Promise.all([h.client.result(paid.workflowId), h.client.result(unpaid.workflowId)]);

    const after = await waitCounts();
    const delta = (key: string) => (after[key] ?? 0) - (before[key] ?? 0);
    expect([delta('seat-hold/started'), delta('seat-hold/signalled'), delta('seat-hold/timed_out')]).toEqual([2, 1, 1]);
  }));
});

describe('a signal over HTTP', () => {
  it("is taken from the saga's own client, once; another client's is a 404 and a signal it does not wait for a 409", () => run(async () => {
    const clients = [
      { id: 'box_office', token: 'box-office-token-0123456789' },
      { id: 'reseller', token: 'reseller-token-0123456789ab' },
    ];
    const app = createSagaServer({ client: h.client, types, clients, readiness: {} });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    let letTicketGo = () => {};
    try {
      const post = (path: string, token: string, body?: unknown, key?: string) =>
        fetch(`${base}${path}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...(key ? { 'Idempotency-Key': key } : {}) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const created = await post('/v1/sagas/seat-hold', clients[0]!.token, { seat: seat() }, `hold-${randomUUID()}`);
      expect(created.status).toBe(201);
      const { workflowId } = (await created.json()) as { workflowId: string };
      const signalPath = `/v1/sagas/${workflowId}/signals/payment-confirmed`;
      // As above: the repeat reaches a saga still running.
      letTicketGo = latchTicket(workflowId);

      const foreign = await post(signalPath, clients[1]!.token, { paymentId: 'theirs' });
      const unknown = await post(`/v1/sagas/${workflowId}/signals/item-collected`, clients[0]!.token);
      const first = await post(signalPath, clients[0]!.token, { paymentId: 'pay-http' });
      const again = await post(signalPath, clients[0]!.token, { paymentId: 'pay-again' });
      letTicketGo();

      expect(foreign.status).toBe(404);
      expect(unknown.status).toBe(409);
      expect(((await unknown.json()) as { type: string }).type).toBe('/problems/not-waiting');
      expect(first.status).toBe(200);
      expect(await first.json()).toMatchObject({ workflowId, signal: 'payment-confirmed', first: true });
      expect(await again.json()).toMatchObject({ workflowId, signal: 'payment-confirmed', first: false });
      expect((await h.client.result(workflowId)).outcome).toBe('COMPLETED');
      expect((await ledgerOf(workflowId)).find((l) => l.what === 'issued')!.seen).toMatchObject({ paid: { payload: { paymentId: 'pay-http' } } });
    } finally {
      letTicketGo();
      await app.close();
    }
  }));
});

describe('a wait as declared', () => {
  it.each([
    [{ steps: [{ step: 'paid', wait: { signal: 'p', timeoutMs: 0 } }] }, 'wait "paid": timeoutMs must be a whole number of ms from 1 to 2592000000 (30 days)'],
    [{ steps: [{ step: 'paid', wait: { signal: 'p', timeoutMs: 10 }, compensation: 'x' }], handlers: { x: async () => null } }, 'wait "paid": a wait has no compensation'],
    [{ steps: [{ step: 'paid', wait: { signal: 'p q', timeoutMs: 10 } }] }, 'wait "paid": signal "p q" must be letters'],
    [{ steps: [{ step: 'paid', wait: { timeoutMs: 10, onTimeout: 'continue' } }] }, 'wait "paid": onTimeout without a signal'],
    [{ steps: [{ step: 'paid', wait: { signal: 'p', timeoutMs: 10 } }], handlers: { paid: async () => null } }, 'wait "paid": a wait has no handler'],
  ])('is refused where it is written when malformed (%#)', (overrides, message) => {
    const declare = () => defineSaga({ type: 'w', scope: 'w', schema: seatSchema, intent: (i) => i, table: holds, row: (i) => ({ seat: i.seat }), steps: [], handlers: {}, ...(overrides as object) });
    expect(declare).toThrow(SagaDeclarationError);
    expect(declare).toThrow(message);
  });
});
