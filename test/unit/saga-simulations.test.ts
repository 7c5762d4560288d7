/**
 * Test knobs stay out of production input: the `order` type refuses `simulate` (a caller could
 * otherwise hold a connection, a transaction and a row lock for minutes); only the variant that
 * tests and the demo switch on with SAGA_SIMULATIONS accepts and honours it.
 */
import type { PoolClient } from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { planSaga, prepareSaga, type ExternalStep, type StepHandler } from '../../src/sagas';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { orderSaga, orderSagaWithSimulations, sagaTypes, sagaTypesFor, type OrderInput, type SimulatedOrderInput } from '../fixtures/orders';

const timings = { leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000, compensationAttempts: 5 };
const cart: OrderInput = {
  customer: 'ada',
  items: [{ sku: 'jam', quantity: 2, priceCents: 250 }],
  payment: { card: '4242424242424242' },
};
const slow = { ...cart, simulate: { writeDelayMs: 600_000, stepDelayMs: 600_000 } };

/** A transaction that records its statements and answers every one, on a later turn, with no rows. */
function recordingTx(): { tx: PoolClient; statements: string[] } {
  const statements: string[] = [];
  const query = (text: string) => {
    statements.push(text);
    return new Promise((resolve) => setImmediate(() => resolve({ rows: [], rowCount: 1 })));
  };
  const tx = { query } as unknown as PoolClient;
  return { tx, statements };
}

describe('the production order type', () => {
  it('refuses a simulate field with INVALID_INPUT, from a client and from a plain Temporal start', () => {
    expect(() => prepareSaga('order', slow, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes })).toThrow(expect.objectContaining({ name: 'SagaInputError', code: 'INVALID_INPUT' }));
    expect(() => prepareSaga('order', slow, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes })).toThrow(/^invalid order input at \(root\): .*simulate/);
    expect(() => planSaga({ type: 'order', idempotencyKey: 'k1', data: slow }, { workflowId: 'order-k1', namespace: 'default', timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringMatching(/simulate/) }),
    );
  });

  it('is what the project ships, and what a config without SAGA_SIMULATIONS selects', () => {
    expect(sagaTypes.order!.schema).toBe(orderSaga.schema);
    // A worker's own (its payment steps call the config's provider), with the production schema.
    expect(Object.keys(sagaTypesFor(loadConfig({})))).toEqual(['order', 'order-cancel', 'order-return', 'order-amend']);
    expect(sagaTypesFor(loadConfig({})).order!.schema).toBe(orderSaga.schema);
  });

  it('never waits on a delay that slipped past the schema, in its write or its steps', async () => {
    const { tx, statements } = recordingTx();
    const smuggled = { ...cart, simulate: { writeDelayMs: 2000, stepDelayMs: 2000 } } as OrderInput;
    const t0 = Date.now();

    await orderSaga.writeWork?.(tx, smuggled, AbortSignal.timeout(100)).catch(() => undefined);
    await (orderSaga.handlers.reserveStock as StepHandler<OrderInput>)(tx, { sagaKey: 'order-k1', intentKey: 'order:x', fencingToken: '1', input: smuggled, signal: new AbortController().signal });

    expect(statements.filter((s) => /pg_sleep/.test(s))).toEqual([]);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe('the order type with simulations (SAGA_SIMULATIONS=true)', () => {
  const types = () => sagaTypesFor(loadConfig({ SAGA_SIMULATIONS: 'true' }));

  it('is selected by the switch, under the same type name, scope and steps', () => {
    expect(types().order!.schema).toBe(orderSagaWithSimulations.schema);
    expect(orderSagaWithSimulations).toMatchObject({ type: 'order', scope: 'order', steps: orderSaga.steps, table: orderSaga.table });
  });

  it('accepts simulate, and derives the same intent as the production type (simulate is no part of it)', () => {
    const prepared = prepareSaga('order', slow, { timings, intentSecret: TEST_INTENT_SECRET, types: types() });

    expect(prepared.payload).toEqual(slow);
    expect(prepared.intentKey).toBe(prepareSaga('order', cart, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }).intentKey);
  });

  it('keeps the production bounds on the knobs: at most 10 minutes, whole milliseconds, no other field', () => {
    for (const simulate of [{ writeDelayMs: 600_001 }, { stepDelayMs: 1.5 }, { sleep: 1 }]) {
      expect(() => prepareSaga('order', { ...cart, simulate }, { timings, intentSecret: TEST_INTENT_SECRET, types: types() }), JSON.stringify(simulate)).toThrow(
        expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringMatching(/at simulate/) }),
      );
    }
  });

  it('honours writeDelayMs in the write, and stops when the lease is lost', async () => {
    const { tx, statements } = recordingTx();
    const lost = new AbortController();

    const writing = orderSagaWithSimulations.writeWork!(tx, { ...cart, simulate: { writeDelayMs: 60_000 } }, lost.signal);
    await new Promise((r) => setTimeout(r, 20));
    lost.abort(new Error('lease lost'));

    await expect(writing).rejects.toThrow('lease lost');
    expect(statements.some((s) => /pg_sleep/.test(s))).toBe(true);
  });

  it('honours stepDelayMs in a step before its effect', async () => {
    const { tx, statements } = recordingTx();
    const ctx = { sagaKey: 'order-k1', intentKey: 'order:x', fencingToken: '1', input: { ...cart, simulate: { stepDelayMs: 200 } }, signal: new AbortController().signal };
    const t0 = Date.now();

    await (orderSagaWithSimulations.handlers.reserveStock as StepHandler<SimulatedOrderInput>)(tx, ctx);

    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    // The delay is work in the transaction (never an idle one), then the effect.
    expect(statements.some((s) => /pg_sleep/.test(s))).toBe(true);
    expect(statements.at(-1)).toContain('INSERT INTO stock_reservations');
  });

  it('stops a slow step when its attempt is given up, before its effect', async () => {
    const { tx, statements } = recordingTx();
    const givenUp = new AbortController();
    const ctx = { sagaKey: 'order-k1', intentKey: 'order:x', fencingToken: '1', input: { ...cart, simulate: { stepDelayMs: 60_000 } }, signal: givenUp.signal };

    const charging = (orderSagaWithSimulations.handlers.reserveStock as StepHandler<SimulatedOrderInput>)(tx, ctx);
    await new Promise((r) => setTimeout(r, 20));
    givenUp.abort(new Error('cancelled'));

    await expect(charging).rejects.toThrow('cancelled');
    expect(statements.some((s) => s.includes('stock'))).toBe(false);
  });

  it('stops a slow external step (the charge) when its attempt is given up, before it calls the provider', async () => {
    const charge = orderSagaWithSimulations.handlers.chargePayment as ExternalStep<SimulatedOrderInput>;
    const givenUp = new AbortController();
    const called: string[] = [];
    const fetchSpy = globalThis.fetch;
    globalThis.fetch = (async (url: string) => {
      called.push(String(url));
      throw new Error('no provider in a unit test');
    }) as typeof fetch;
    try {
      const ctx = { sagaKey: 'order-k1', intentKey: 'order:x', fencingToken: '1', input: { ...cart, simulate: { stepDelayMs: 60_000 } }, signal: givenUp.signal, idempotencyKey: 'order-k1:chargePayment', keyOf: (step: string) => `order-k1:${step}` };
      const charging = charge.run(ctx);
      await new Promise((r) => setTimeout(r, 20));
      givenUp.abort(new Error('cancelled'));

      await expect(charging).rejects.toThrow('cancelled');
      expect(called).toEqual([]);
    } finally {
      globalThis.fetch = fetchSpy;
    }
  });
});
