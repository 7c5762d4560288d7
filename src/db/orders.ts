/** The example domain's fenced table. */
import { FencedTable } from './fenced-table';

/**
 * Fenced rows of `orders` (migrations/20261121000001000): data columns `customer` (text),
 * `items` (jsonb) and `amount_cents` (bigint: pass a decimal string or a bigint; read back as a
 * string). Resolved through the connection's `search_path`.
 */
export const ordersTable = new FencedTable({ table: 'orders', dataColumns: ['customer', 'items', 'amount_cents'] });
