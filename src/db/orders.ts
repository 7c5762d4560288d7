/** The example domain's fenced table. */
import { FencedTable } from './fenced-table';

/**
 * Fenced rows of `orders` (migrations/20261121000001000, 20261123000002000): data columns `customer`
 * (text), `items` (jsonb), `amount_cents` (bigint: pass a decimal string or a bigint; read back as a
 * string) and `payment_key` (text: the idempotency key of the order's live charge). Operations
 * (order-cancel, order-amend) claim rows through `last_operation_token` and set `cancelled_at`.
 * Resolved through the connection's `search_path`.
 */
export const ordersTable = new FencedTable({ table: 'orders', dataColumns: ['customer', 'items', 'amount_cents', 'payment_key'] });
