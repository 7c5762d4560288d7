/** The tickets app's fenced table. */
import { fencedTable } from 'reservation-saga';

/**
 * Fenced rows of `tickets` (see migrate.ts): one per seat held, live while the hold or the ticket
 * lasts. Its data columns are what the `ticket` saga writes when it holds the seat; `issueTicket`
 * fills in the payment and the ticket's code, and `ticket-refund` claims the row (through
 * `last_operation_token`), marks it refunded and releases it, so the seat can be sold again.
 */
export const ticketsTable = fencedTable('tickets', ['event', 'seat', 'buyer', 'amount_cents', 'payment_key']);
