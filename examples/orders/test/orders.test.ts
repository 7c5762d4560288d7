/**
 * The order app against real services: PostgreSQL and Redis on their default local addresses (or
 * DATABASE_URL's server and REDIS_URL), and a Temporal dev server of the run's own (from the Temporal
 * CLI: `temporal` on PATH, or TEMPORAL_CLI). reservation-saga/testing makes the run's database, Redis
 * key prefix and task queue and runs a worker in this process; the test runs the payment provider on
 * that database; everything is removed at the end.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { ENTITY_ID_PATTERN, type SagaClient } from 'reservation-saga';
import { startTestDatabase, startTestEnvironment, type TestEnvironment } from 'reservation-saga/testing';
import { migrateOrders } from '../src/migrate';
import { createProviderServer, ensureProviderSchema, runPaymentProvider } from '../src/provider';
import { DECLINED_CARD, orderSagas, type OrderInput } from '../src/sagas';

let env: TestEnvironment;
let provider: ReturnType<typeof createProviderServer>;
let client: SagaClient<ReturnType<typeof orderSagas>>;

before(async () => {
  env = await startTestEnvironment({ migrate: migrateOrders });
  // The payment provider keeps its charges in the run's database; the sagas are told where it listens.
  await ensureProviderSchema(env.pool);
  provider = createProviderServer({ pool: env.pool, log: () => {} });
  await provider.listen({ host: '127.0.0.1', port: 0 });
  const providerUrl = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;
  client = await env.startWorker(orderSagas({ paymentProvider: { url: providerUrl, timeoutMs: 5000 } }));
});

after(async () => {
  await provider?.close();
  await env?.stop();
});

const order = (overrides: Partial<OrderInput> = {}): OrderInput => ({
  customer: `customer-${randomUUID()}`,
  items: [{ sku: 'widget', quantity: 2, priceCents: 1250 }],
  payment: { card: '4242424242424242' },
  ...overrides,
});

void describe('the order app', () => {
  void it('creates an order: SUCCESS at the gate, then COMPLETED with its row and its charge', async () => {
    const started = await client.start('order', order(), { idempotencyKey: `o-${randomUUID()}` });
    assert.equal(started.reservation.status, 'SUCCESS');

    const final = await client.result(started.workflowId);

    assert.equal(final.outcome, 'COMPLETED');
    // The id the order is handed out by is opaque; the row is found by its intent.
    assert.match(final.entityId ?? '', ENTITY_ID_PATTERN);
    const { rows } = await env.pool.query<{ status: string; amount_cents: string }>('SELECT status, amount_cents FROM orders WHERE intent_key = $1', [started.intentKey]);
    assert.deepEqual(rows, [{ status: 'COMPLETED', amount_cents: '2500' }]);
  });

  void it('answers the same order under another idempotency key DUPLICATE, starting no saga', async () => {
    const cart = order();
    const first = await client.start('order', cart, { idempotencyKey: `o-${randomUUID()}` });
    await client.result(first.workflowId);

    const again = await client.start('order', cart, { idempotencyKey: `o-${randomUUID()}` });

    assert.equal(again.reservation.status, 'DUPLICATE');
    assert.equal(again.started, false);
  });

  void it('compensates a declined card: the order COMPENSATED, and its intent free for a good card', async () => {
    const cart = order({ payment: { card: DECLINED_CARD } });
    const declined = await client.start('order', cart, { idempotencyKey: `o-${randomUUID()}` });

    const final = await client.result(declined.workflowId);

    assert.equal(final.outcome, 'COMPENSATED');
    const retry = await client.start('order', { ...cart, payment: { card: '4242424242424242' } }, { idempotencyKey: `o-${randomUUID()}` });
    assert.equal((await client.result(retry.workflowId)).outcome, 'COMPLETED');
  });

  void it('cancels a completed order with order-cancel: the row cancelled and the charge refunded', async () => {
    const created = await client.start('order', order(), { idempotencyKey: `o-${randomUUID()}` });
    const { entityId } = await client.result(created.workflowId);

    const cancel = await client.start('order-cancel', { order: entityId }, { idempotencyKey: `c-${randomUUID()}` });

    assert.equal((await client.result(cancel.workflowId)).outcome, 'COMPLETED');
    const { rows } = await env.pool.query<{ cancelled: boolean }>('SELECT cancelled_at IS NOT NULL AS cancelled FROM orders WHERE intent_key = $1', [created.intentKey]);
    assert.deepEqual(rows, [{ cancelled: true }]);
  });

  void it('returns a completed order with order-return: refunded, released, and the same cart ordered again as a new order', async () => {
    const cart = order();
    const created = await client.start('order', cart, { idempotencyKey: `o-${randomUUID()}` });
    const { entityId } = await client.result(created.workflowId);

    const returned = await client.start('order-return', { order: entityId }, { idempotencyKey: `r-${randomUUID()}` });
    assert.equal((await client.result(returned.workflowId)).outcome, 'COMPLETED');

    const again = await client.start('order', cart, { idempotencyKey: `o-${randomUUID()}` });
    assert.equal(again.reservation.status, 'SUCCESS');
    const reordered = await client.result(again.workflowId);
    assert.equal(reordered.outcome, 'COMPLETED');
    assert.notEqual(reordered.entityId, entityId);
    const { rows } = await env.pool.query<{ status: string; cancelled: boolean }>('SELECT status, cancelled_at IS NOT NULL AS cancelled FROM orders WHERE intent_key = $1 ORDER BY id', [created.intentKey]);
    assert.deepEqual(rows, [
      { status: 'RELEASED', cancelled: true },
      { status: 'COMPLETED', cancelled: false },
    ]);
  });
});

void describe('the payment provider process', () => {
  void it('outlives PostgreSQL ending its idle connection, and answers on a new one', { timeout: 30_000 }, async () => {
    const database = await startTestDatabase({ migrate: false });
    let heard: (line: string) => void = () => {};
    const connectionLost = new Promise<string>((resolve) => (heard = resolve));
    const log = (line: string) => {
      if (line.includes('connection lost')) heard(line);
    };
    const provider = await runPaymentProvider({ databaseUrl: database.url, host: '127.0.0.1', port: 0, log });
    const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
    await admin.connect();
    try {
      const list = () => fetch(`${provider.url}/v1/charges?reference=r-${randomUUID()}`);
      assert.equal((await list()).status, 200); // its pool now holds an idle connection

      const { rows } = await admin.query<{ ended: boolean }>('SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = $1', [database.name]);
      assert.ok(rows.length > 0 && rows.every((r) => r.ended), 'PostgreSQL ended the provider\'s connections');
      // The pool hears of it as an error event (which, unheard, would end this process).
      assert.match(await connectionLost, /^payment provider: PostgreSQL connection lost: /);
      assert.equal((await list()).status, 200);
    } finally {
      await provider.close();
      await admin.end();
      await database.stop();
    }
  });
});
