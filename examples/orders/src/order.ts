/**
 * The example saga type `order`: the intent is the customer and the cart's contents; the entity is a
 * row of `orders`; the remaining steps charge the payment (an external step: the payment provider,
 * over HTTP, keyed by the step's idempotency key) and reserve stock (in our database). Its variant
 * `orderSagaWithSimulations` (tests and the demo, `SAGA_SIMULATIONS=true`) also accepts `simulate`:
 * a long write and slow steps.
 *
 * Example data (for tests and the demo): the provider declines card `4000000000000002` and refuses
 * the refunds of card `4000000000000259`; `rare-coin` has one unit in stock.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { PoolClient } from 'pg';
import { z } from 'zod';
import { ordersTable } from './orders-table';
import { PaymentDeclinedError, PaymentProviderClient, RefundRefusedError } from './provider/client';
import { CompensationRefusedError, defineSaga, externalStep, isExternalStep, StepRejectedError, stepIdempotencyKey, type SagaDefinition, type StepHandler, type StepImplementation } from 'reservation-saga';

/** The payment provider's test card that every charge declines. */
export const DECLINED_CARD = '4000000000000002';
/** The payment provider's test card whose charges succeed and whose refunds are refused. */
export const REFUND_REFUSED_CARD = '4000000000000259';

/** A SKU: lower-case letters, digits and `-`. */
export const skuSchema = z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'must be lower-case letters, digits and -');

/** The card a charge is made to (the provider keeps only its last 4 digits; we keep none). */
export const paymentSchema = z.object({ card: z.string().regex(/^\d{12,19}$/, 'must be 12 to 19 digits') }).strict();

const orderSchema = z
  .object({
    customer: z.string().trim().min(1).max(200),
    items: z
      .array(
        z
          .object({
            sku: skuSchema,
            quantity: z.number().int().min(1).max(1000),
            priceCents: z.number().int().min(0).max(100_000_000),
          })
          .strict(),
      )
      .min(1)
      .max(100)
      .refine((items) => new Set(items.map((i) => i.sku)).size === items.length, 'each sku may appear once')
      // The charge step charges the total, and a provider charges no nothing: refused here, before any lease or stock.
      .refine((items) => items.some((i) => i.priceCents > 0), 'an order must cost something (every item is priced 0)'),
    payment: paymentSchema,
  })
  .strict();

/** A validated order. */
export type OrderInput = z.infer<typeof orderSchema>;

/**
 * The order with the knobs of {@link orderSagaWithSimulations}: a long monolithic write, slow steps.
 * Never part of the production input: each knob holds a pooled connection, and a transaction with
 * its row locks, for as long as the caller asks.
 */
const simulatedOrderSchema = orderSchema
  .extend({
    simulate: z
      .object({
        /** The write's transaction stays open this long after the fenced row is written. */
        writeDelayMs: z.number().int().min(0).max(600_000).optional(),
        /** Each forward step waits this long before its effect. */
        stepDelayMs: z.number().int().min(0).max(600_000).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** A validated order of {@link orderSagaWithSimulations}, with its optional `simulate` knobs. */
export type SimulatedOrderInput = z.infer<typeof simulatedOrderSchema>;

/**
 * SKUs in code-unit order: the same on every host. (`localeCompare` depends on the host's locale and
 * ICU data, so two hosts could derive different intent keys for one cart.)
 */
export const bySku = (a: { sku: string }, b: { sku: string }) => (a.sku < b.sku ? -1 : a.sku > b.sku ? 1 : 0);

const amountOf = (input: OrderInput) => input.items.reduce((sum, i) => sum + i.quantity * i.priceCents, 0);

/** The payment steps of an order, charging and refunding through `payments` (see ExternalStep). */
function paymentSteps(payments: PaymentProviderClient) {
  const chargePayment = externalStep<OrderInput>(async ({ idempotencyKey, sagaKey, input, signal }) => {
    try {
      const charge = await payments.charge({ idempotencyKey, amountCents: amountOf(input), card: input.payment.card, reference: sagaKey }, signal);
      return { chargeId: charge.id, chargedCents: charge.amountCents };
    } catch (err) {
      // The provider's refusal is the step's (recorded, compensated, never retried); anything else
      // (the provider out of reach, its answer lost, the key in use) is retried with the same key.
      if (err instanceof PaymentDeclinedError) throw new StepRejectedError('the card was declined', 'PAYMENT_DECLINED');
      throw err;
    }
  });

  // Ordered after every attempt of the charge at the provider: a refund of a key it never charged
  // voids that key, and one while the charge is in flight is answered 409 and retried.
  const refundPayment = externalStep<OrderInput>(async ({ idempotencyKey, keyOf, signal }) => {
    try {
      const refund = await payments.refund({ idempotencyKey, chargeIdempotencyKey: keyOf('chargePayment') }, signal);
      return { refund: refund.status, refundedCents: refund.amountCents };
    } catch (err) {
      if (err instanceof RefundRefusedError) throw new CompensationRefusedError('the card network refused the refund');
      throw err;
    }
  });
  return { chargePayment, refundPayment };
}

const reserveStock: StepHandler<OrderInput> = async (tx, { sagaKey, input }) => {
  // Lock rows in sku order so concurrent orders cannot deadlock.
  for (const item of [...input.items].sort(bySku)) {
    const { rowCount } = await tx.query('UPDATE stock SET available = available - $2 WHERE sku = $1 AND available >= $2', [
      item.sku,
      item.quantity,
    ]);
    if (rowCount !== 1) throw new StepRejectedError(`not enough stock of ${item.sku}`, 'OUT_OF_STOCK');
    await tx.query(`INSERT INTO stock_reservations (saga_key, sku, quantity, status) VALUES ($1, $2, $3, 'RESERVED')`, [
      sagaKey,
      item.sku,
      item.quantity,
    ]);
  }
  return { reserved: input.items.length };
};

const releaseStock: StepHandler<OrderInput> = async (tx, { sagaKey }) => {
  const { rows } = await tx.query<{ sku: string; quantity: string }>(
    `UPDATE stock_reservations SET status = 'RELEASED', updated_at = now()
     WHERE saga_key = $1 AND status = 'RESERVED' RETURNING sku, quantity`,
    [sagaKey],
  );
  for (const r of rows) await tx.query('UPDATE stock SET available = available + $2 WHERE sku = $1', [r.sku, r.quantity]);
  return { released: rows.length };
};

/** The `order` saga type, charging and refunding through `payments`. */
export function orderSagaType(payments: PaymentProviderClient): SagaDefinition<OrderInput> {
  return defineSaga<OrderInput>({
  type: 'order',
  scope: 'order',
  schema: orderSchema,
  intent: (input) => ({
    customer: input.customer,
    cart: [...input.items].sort(bySku).map(({ sku, quantity }) => ({ sku, quantity })),
  }),
  table: ordersTable,
  // payment_key: the charge step's idempotency key, which the order's cancellation refunds.
  row: (input, { sagaKey }) => ({ customer: input.customer, items: input.items, amount_cents: amountOf(input), payment_key: stepIdempotencyKey(sagaKey, 'chargePayment') }),
  steps: [
    { step: 'chargePayment', compensation: 'refundPayment' },
    { step: 'reserveStock', compensation: 'releaseStock' },
  ],
    handlers: { ...paymentSteps(payments), reserveStock, releaseStock },
    compensation: { parallel: false, continueOnError: true, freeIntent: true },
  });
}

/** The provider of a deployment left at the defaults (PAYMENT_PROVIDER_URL): see {@link orderSagaType}. */
export const DEFAULT_PAYMENT_PROVIDER = { baseUrl: 'http://127.0.0.1:8235', timeoutMs: 10_000 };

/** The `order` saga type with the default provider's address; workers build theirs from the config (`sagaTypesFor`). */
export const orderSaga: SagaDefinition<OrderInput> = orderSagaType(new PaymentProviderClient(DEFAULT_PAYMENT_PROVIDER));

/**
 * Works `ms` inside the transaction (a simulated slow step: statements, as a real step's slow work
 * would be, so the transaction is never idle), stopping when `signal` aborts.
 */
async function work(tx: PoolClient, ms: number | undefined, signal: AbortSignal): Promise<void> {
  const until = Date.now() + (ms ?? 0);
  while (Date.now() < until) {
    signal.throwIfAborted();
    await tx.query('SELECT pg_sleep($1)', [Math.min(0.1, (until - Date.now()) / 1000)]);
  }
  signal.throwIfAborted();
}

/** An input that may ask its steps to be slow (tests and the demo only). */
type SlowableInput = { simulate?: { stepDelayMs?: number } };

/** `step`, after the step delay the input asks for (in its transaction, or before its call). */
export function slowed<I, S extends I & SlowableInput>(step: StepImplementation<I>): StepImplementation<S> {
  if (isExternalStep(step)) {
    return externalStep<S>(async (ctx) => {
      await delay(ctx.input.simulate?.stepDelayMs ?? 0, undefined, { signal: ctx.signal }).catch((err: unknown) => {
        ctx.signal.throwIfAborted(); // the attempt's reason (cancelled, timed out), not a bare AbortError
        throw err;
      });
      return step.run(ctx);
    });
  }
  return async (tx, ctx) => {
    await work(tx, ctx.input.simulate?.stepDelayMs, ctx.signal);
    return step(tx, ctx);
  };
}

/**
 * The `order` saga type with simulations, for tests and the demo only (a worker and a client run it
 * when the config turns `SAGA_SIMULATIONS` on): the same type name, intent, table, steps and
 * compensations, and an input that may also carry `simulate` (a long write, slow steps).
 */
export function orderSagaWithSimulationsType(payments: PaymentProviderClient): SagaDefinition<SimulatedOrderInput> {
  const { kind: _kind, ...order } = orderSagaType(payments);
  return defineSaga<SimulatedOrderInput>({
    ...order,
    schema: simulatedOrderSchema,
    async writeWork(tx, input, signal) {
      // A long, monolithic write: work in the transaction, in slices, stopping when the lease is lost.
      await work(tx, input.simulate?.writeDelayMs, signal);
    },
    handlers: { ...order.handlers, chargePayment: slowed(order.handlers.chargePayment!), reserveStock: slowed(order.handlers.reserveStock!) },
  });
}

/** {@link orderSagaWithSimulationsType} with the default provider's address. */
export const orderSagaWithSimulations: SagaDefinition<SimulatedOrderInput> = orderSagaWithSimulationsType(new PaymentProviderClient(DEFAULT_PAYMENT_PROVIDER));
