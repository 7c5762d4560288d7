/**
 * Operations on an existing order, each a saga type of its own under the order's lock (see
 * EntityOperation): `order-cancel` (release the stock, mark the order cancelled, refund its charge),
 * `order-return` (the same, then the order is released: its cart may be ordered again) and `order-amend` (new quantities: charge the new total, move the stock, refund the previous
 * charge). Both run one at a time per order, and never while the order's creating saga runs.
 *
 * Their steps are ordered so that a holder that lost the lock can never leave stock, payments and
 * the row disagreeing: every charge is made before the database step that commits to it (and
 * refunded if that step is refused), and every refund settles what a committed step decided (it is
 * retried until it succeeds or is refused, and a refusal undoes that step).
 */
import type { PoolClient } from 'pg';
import { z } from 'zod';
import { ordersTable } from './orders-table';
import { PaymentDeclinedError, RefundRefusedError, type PaymentProviderClient } from './provider/client';
import {
  CompensationRefusedError,
  defineOperation,
  ENTITY_ID_PATTERN,
  externalStep,
  StepRejectedError,
  stepIdempotencyKey,
  type EntityOperation,
  type ExternalStepContext,
  type StepContext,
  type StepHandler,
} from 'reservation-saga';
import { bySku, paymentSchema, skuSchema, slowed } from './order';

/** An order's id, as the `order` saga's result names it (`entityId`). */
const orderId = z.string().regex(ENTITY_ID_PATTERN, 'must be an order id (the `entityId` of its order saga)');

const cancelSchema = z.object({ order: orderId }).strict();

/** A validated `order-cancel` input. */
export type OrderCancelInput = z.infer<typeof cancelSchema>;

const amendSchema = z
  .object({
    order: orderId,
    /** New quantities of lines of the order; 0 removes a line; lines not listed keep theirs. */
    items: z
      .array(z.object({ sku: skuSchema, quantity: z.number().int().min(0).max(1000) }).strict())
      .min(1)
      .max(100)
      .refine((items) => new Set(items.map((i) => i.sku)).size === items.length, 'each sku may appear once'),
    /** The card the amended total is charged to (the previous charge is refunded). */
    payment: paymentSchema,
  })
  .strict();

/** A validated `order-amend` input. */
export type OrderAmendInput = z.infer<typeof amendSchema>;

const simulatedAmendSchema = amendSchema
  .extend({
    /** The charge step waits this long before it calls the provider (tests and the demo only). */
    simulate: z.object({ stepDelayMs: z.number().int().min(0).max(600_000).optional() }).strict().optional(),
  })
  .strict();

/** A validated `order-amend` input with its simulation knob (see {@link orderAmendSagaWithSimulationsType}). */
export type SimulatedOrderAmendInput = z.infer<typeof simulatedAmendSchema>;

interface Line {
  sku: string;
  quantity: number;
  priceCents: number;
}

/** What an amendment changes, recorded in `order_amendments` and in its steps' results. */
interface OrderTerms {
  items: Line[];
  amountCents: number;
  paymentKey: string;
}

const amountOf = (items: readonly Line[]) => items.reduce((sum, i) => sum + i.quantity * i.priceCents, 0);

function operationOf(ctx: StepContext<unknown>) {
  if (!ctx.operation) throw new Error(`step of ${ctx.sagaKey} run without its operation context`);
  return ctx.operation;
}

/** The order's row as an operation sees it, after the runner claimed it in this transaction. */
async function orderRow(tx: PoolClient, id: string): Promise<{ terms: OrderTerms; cancelled: boolean }> {
  const { rows } = await tx.query<{ items: Line[]; amount_cents: string; payment_key: string | null; cancelled: boolean }>(
    'SELECT items, amount_cents, payment_key, cancelled_at IS NOT NULL AS cancelled FROM orders WHERE id = $1',
    [id],
  );
  // The runner claimed the row in this transaction: it exists.
  const row = rows[0]!;
  if (row.payment_key === null) throw new StepRejectedError(`order ${id} has no recorded charge (written before operations existed)`, 'PAYMENT_UNKNOWN');
  return { terms: { items: row.items, amountCents: Number(row.amount_cents), paymentKey: row.payment_key }, cancelled: row.cancelled };
}

/**
 * Moves stock by `delta` per sku (positive: taken from stock), in sku order so that concurrent
 * sagas cannot deadlock; `refuse` makes the error for a sku short of stock (giving back never is).
 */
async function moveStock(tx: PoolClient, delta: ReadonlyMap<string, number>, refuse?: (sku: string) => Error): Promise<void> {
  for (const [sku, d] of [...delta].sort(([a], [b]) => bySku({ sku: a }, { sku: b }))) {
    if (d === 0) continue;
    const { rowCount } = await tx.query('UPDATE stock SET available = available - $2 WHERE sku = $1 AND available >= $2', [sku, d]);
    if (rowCount !== 1) throw refuse?.(sku) ?? new Error(`stock ${sku} is missing`);
  }
}

/** Stock taken per sku when `from` becomes `to` (negative: given back). */
function stockDelta(from: readonly Line[], to: readonly Line[]): Map<string, number> {
  const delta = new Map<string, number>();
  for (const i of to) delta.set(i.sku, (delta.get(i.sku) ?? 0) + i.quantity);
  for (const i of from) delta.set(i.sku, (delta.get(i.sku) ?? 0) - i.quantity);
  return delta;
}


/** Refunds the charge made with `chargeKey`; the card network's refusal is the step's. */
async function refund(payments: PaymentProviderClient, ctx: ExternalStepContext<unknown>, chargeKey: string) {
  try {
    const done = await payments.refund({ idempotencyKey: ctx.idempotencyKey, chargeIdempotencyKey: chargeKey }, ctx.signal);
    return { refund: done.status, refundedCents: done.amountCents };
  } catch (err) {
    if (err instanceof RefundRefusedError) throw new StepRejectedError('the card network refused the refund', 'REFUND_REFUSED');
    throw err;
  }
}

/** The `order-cancel` saga type: refunds through `payments`. A cancelled order stays, cancelled: its cart is never ordered again. */
export function orderCancelSagaType(payments: PaymentProviderClient): EntityOperation<OrderCancelInput> & { readonly type: 'order-cancel' } {
  return cancellation(payments, 'order-cancel', false);
}

/**
 * The `order-return` saga type: cancels the order as `order-cancel` does (the stock given back, the
 * charge refunded), then **releases** it: its row becomes RELEASED (kept) and its intent is free, so
 * the customer may order the same cart again, as a new order.
 */
export function orderReturnSagaType(payments: PaymentProviderClient): EntityOperation<OrderCancelInput> & { readonly type: 'order-return' } {
  return cancellation(payments, 'order-return', true);
}

function cancellation<const T extends string>(payments: PaymentProviderClient, type: T, releases: boolean): EntityOperation<OrderCancelInput> & { readonly type: T } {
  const cancelOrder: StepHandler<OrderCancelInput> = async (tx, ctx) => {
    const { entityId } = operationOf(ctx);
    const { terms, cancelled } = await orderRow(tx, entityId);
    if (cancelled) throw new StepRejectedError('the order is cancelled already', 'ORDER_CANCELLED');
    await moveStock(tx, stockDelta(terms.items, []));
    await tx.query('UPDATE orders SET cancelled_at = now(), cancelled_by = $2, updated_at = now() WHERE id = $1', [entityId, ctx.sagaKey]);
    return { paymentKey: terms.paymentKey, amountCents: terms.amountCents };
  };

  // Only this saga's own cancellation is undone (a refused cancelOrder committed nothing).
  const reinstateOrder: StepHandler<OrderCancelInput> = async (tx, ctx) => {
    const { entityId } = operationOf(ctx);
    const { rows } = await tx.query<{ items: Line[] }>(
      'UPDATE orders SET cancelled_at = NULL, cancelled_by = NULL, updated_at = now() WHERE id = $1 AND cancelled_by = $2 RETURNING items',
      [entityId, ctx.sagaKey],
    );
    if (!rows[0]) return { reinstated: false };
    await moveStock(tx, stockDelta([], rows[0].items), (sku) => new CompensationRefusedError(`the stock of ${sku} was sold since the cancellation`));
    return { reinstated: true };
  };

  const refundOrder = externalStep<OrderCancelInput>(async (ctx) => {
    const cancelled = operationOf(ctx).results.cancelOrder as { paymentKey: string };
    return refund(payments, ctx, cancelled.paymentKey);
  });

  return defineOperation({
    type,
    scope: 'order',
    schema: cancelSchema,
    entity: (input) => input.order,
    table: ordersTable,
    releases,
    steps: [
      { step: 'cancelOrder', compensation: 'reinstateOrder' },
      // No compensation: once the order is cancelled its charge is refunded, or the refusal undoes the cancellation.
      { step: 'refundOrder' },
    ],
    handlers: { cancelOrder, reinstateOrder, refundOrder },
    compensation: { parallel: false, continueOnError: true, freeIntent: false },
  });
}

/** The `order-amend` saga type: charges and refunds through `payments`. */
export function orderAmendSagaType(payments: PaymentProviderClient): EntityOperation<OrderAmendInput> {
  // Reads the order under the lock (the claim fences out every older holder) and prices the amendment.
  const priceAmendment: StepHandler<OrderAmendInput> = async (tx, ctx) => {
    const { entityId } = operationOf(ctx);
    const { terms, cancelled } = await orderRow(tx, entityId);
    if (cancelled) throw new StepRejectedError('the order is cancelled', 'ORDER_CANCELLED');
    const lines = new Map(terms.items.map((i) => [i.sku, i]));
    for (const { sku } of ctx.input.items) {
      if (!lines.has(sku)) throw new StepRejectedError(`the order has no line ${sku}; an amendment changes quantities of its lines`, 'NOT_IN_ORDER');
    }
    const wanted = new Map(ctx.input.items.map((i) => [i.sku, i.quantity]));
    const items = terms.items.map((i) => ({ ...i, quantity: wanted.get(i.sku) ?? i.quantity })).filter((i) => i.quantity > 0);
    if (items.length === 0) throw new StepRejectedError('an amendment cannot remove every line; cancel the order instead', 'EMPTY_ORDER');
    const amountCents = amountOf(items);
    // Refused before the charge: a provider charges no zero amount, and the order would owe nothing.
    if (amountCents === 0) throw new StepRejectedError('the amended order would cost nothing (its priced lines removed); cancel the order instead', 'ZERO_TOTAL');
    return { previous: terms, items, amountCents };
  };

  const chargeAmendedOrder = externalStep<OrderAmendInput>(async ({ idempotencyKey, sagaKey, input, signal, operation }) => {
    const priced = operation!.results.priceAmendment as { amountCents: number };
    try {
      const charge = await payments.charge({ idempotencyKey, amountCents: priced.amountCents, card: input.payment.card, reference: sagaKey }, signal);
      return { chargeId: charge.id, chargedCents: charge.amountCents };
    } catch (err) {
      if (err instanceof PaymentDeclinedError) throw new StepRejectedError('the card was declined', 'PAYMENT_DECLINED');
      throw err;
    }
  });

  // Ordered after every attempt of the charge at the provider, as the order saga's refund is.
  const refundAmendedCharge = externalStep<OrderAmendInput>(async (ctx) => {
    try {
      return await refund(payments, ctx, ctx.keyOf('chargeAmendedOrder'));
    } catch (err) {
      if (err instanceof StepRejectedError) throw new CompensationRefusedError(err.message);
      throw err;
    }
  });

  // Commits to the new terms: the row (its live charge is now this saga's) and the stock.
  const applyAmendment: StepHandler<OrderAmendInput> = async (tx, ctx) => {
    const { entityId, results } = operationOf(ctx);
    const priced = results.priceAmendment as { previous: OrderTerms; items: Line[]; amountCents: number };
    const after: OrderTerms = { items: priced.items, amountCents: priced.amountCents, paymentKey: stepIdempotencyKey(ctx.sagaKey, 'chargeAmendedOrder') };
    await moveStock(tx, stockDelta(priced.previous.items, after.items), (sku) => new StepRejectedError(`not enough stock of ${sku}`, 'OUT_OF_STOCK'));
    await tx.query('UPDATE orders SET items = $2, amount_cents = $3, payment_key = $4, updated_at = now() WHERE id = $1', [
      entityId,
      JSON.stringify(after.items),
      after.amountCents,
      after.paymentKey,
    ]);
    await tx.query(`INSERT INTO order_amendments (saga_key, order_id, before, after, status) VALUES ($1, $2, $3, $4, 'APPLIED')`, [
      ctx.sagaKey,
      entityId,
      JSON.stringify(priced.previous),
      JSON.stringify(after),
    ]);
    return { amountCents: after.amountCents };
  };

  // Restores what this saga's amendment replaced, if it was applied.
  const revertAmendment: StepHandler<OrderAmendInput> = async (tx, ctx) => {
    const { entityId } = operationOf(ctx);
    const { rows } = await tx.query<{ before: OrderTerms; after: OrderTerms }>(
      `UPDATE order_amendments SET status = 'REVERTED', updated_at = now() WHERE saga_key = $1 AND status = 'APPLIED' RETURNING before, after`,
      [ctx.sagaKey],
    );
    if (!rows[0]) return { reverted: false };
    const { before, after } = rows[0];
    await moveStock(tx, stockDelta(after.items, before.items), (sku) => new CompensationRefusedError(`the stock of ${sku} was sold since the amendment`));
    await tx.query('UPDATE orders SET items = $2, amount_cents = $3, payment_key = $4, updated_at = now() WHERE id = $1', [
      entityId,
      JSON.stringify(before.items),
      before.amountCents,
      before.paymentKey,
    ]);
    return { reverted: true };
  };

  const refundPreviousCharge = externalStep<OrderAmendInput>(async (ctx) => {
    const priced = operationOf(ctx).results.priceAmendment as { previous: OrderTerms };
    return refund(payments, ctx, priced.previous.paymentKey);
  });

  return defineOperation<OrderAmendInput>({
    type: 'order-amend',
    scope: 'order',
    schema: amendSchema,
    entity: (input) => input.order,
    table: ordersTable,
    steps: [
      // Reads only: nothing to undo (its claim stays, and fences out older holders).
      { step: 'priceAmendment' },
      { step: 'chargeAmendedOrder', compensation: 'refundAmendedCharge' },
      { step: 'applyAmendment', compensation: 'revertAmendment' },
      // No compensation: the committed amendment replaced the previous charge, which is refunded (or
      // the refusal undoes the amendment).
      { step: 'refundPreviousCharge' },
    ],
    handlers: { priceAmendment, chargeAmendedOrder, refundAmendedCharge, applyAmendment, revertAmendment, refundPreviousCharge },
    compensation: { parallel: false, continueOnError: true, freeIntent: false },
  });
}

/**
 * `order-amend` with a knob for tests and the demo: `simulate.stepDelayMs` holds the charge step
 * that long before it calls the provider (a slow provider, a paused holder).
 */
export function orderAmendSagaWithSimulationsType(payments: PaymentProviderClient): EntityOperation<SimulatedOrderAmendInput> {
  const { kind: _kind, ...amend } = orderAmendSagaType(payments);
  return defineOperation<SimulatedOrderAmendInput>({
    ...amend,
    schema: simulatedAmendSchema,
    handlers: { ...amend.handlers, chargeAmendedOrder: slowed<OrderAmendInput, SimulatedOrderAmendInput>(amend.handlers.chargeAmendedOrder!) },
  });
}
