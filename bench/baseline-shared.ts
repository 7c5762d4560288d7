/**
 * What the hand-written baseline's workflow, activities and the benchmark share: its input and
 * result, and the types of its business failures. Sandbox-safe: no Node built-ins, no I/O.
 */
import type { OrderInput } from '../examples/orders/src/order';

/** An order: the order example's input (customer, lines, card). */
export type BaselineOrder = OrderInput;

/** The types of the baseline's business failures: non-retryable, and the workflow branches on them. */
export const BaselineFailure = {
  /** A live order of the same customer and cart exists (23505 on the intent's unique index). */
  DUPLICATE: 'DUPLICATE',
  PAYMENT_DECLINED: 'PAYMENT_DECLINED',
  OUT_OF_STOCK: 'OUT_OF_STOCK',
  REFUND_REFUSED: 'REFUND_REFUSED',
} as const;

/**
 * How an order ended: COMPLETED; DUPLICATE (nothing done); FAILED after its compensations, each
 * named with its outcome (`refundPayment: refunded`, `releaseStock: 1 line`, or the failure's message).
 */
export type BaselineResult =
  | { outcome: 'COMPLETED' }
  | { outcome: 'DUPLICATE'; reason: string }
  | { outcome: 'FAILED'; reason: string; failure: string | undefined; compensations: string[] };
