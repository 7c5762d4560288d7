/** The example domain's fenced table. */
import { fencedTable } from 'reservation-saga';

/**
 * Fenced rows of `orders` (examples/orders/migrations): data columns `customer`
 * (text), `items` (jsonb), `amount_cents` (bigint: pass a decimal string or a bigint; read back as a
 * string) and `payment_key` (text: the idempotency key of the order's live charge). Operations
 * (order-cancel, order-amend) claim rows through `last_operation_token` and set `cancelled_at`.
 * Resolved through the connection's `search_path`.
 */
export const ordersTable = fencedTable('orders', ['customer', 'items', 'amount_cents', 'payment_key']);
