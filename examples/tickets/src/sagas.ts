/**
 * The tickets app's saga types, what its worker runs and its clients accept: `ticket` (holds a seat
 * while its buyer pays, then issues the ticket) and `ticket-refund` (an operation on an issued
 * ticket that refunds it and frees the seat). The `saga` CLI loads this module (package.json's
 * `reservation-saga.sagas`) and takes `sagas`.
 */
import { PaymentsClient } from './services/client';
import { ticketSettings } from './settings';
import { ticketSagaType } from './ticket';
import { ticketRefundSagaType } from './ticket-refund';

export { PAYMENT_CONFIRMED, ticketCode, ticketSagaType, type PaymentConfirmation, type TicketInput } from './ticket';
export { ticketRefundSagaType, type TicketRefundInput } from './ticket-refund';
export { ticketsTable } from './tickets-table';
export { DECLINED_CARD } from './services/payments';

/** Where the payment service is, and how long a seat is held. */
export interface TicketSagaListOptions {
  /** @default PAYMENTS_URL and PAYMENTS_TIMEOUT_MS of the environment */
  payments?: { url: string; timeoutMs: number };
  /** @default TICKET_HOLD_MS of the environment (10 minutes) */
  holdMs?: number;
}

/** The tickets app's saga types, taking payments at `options.payments`. */
export function ticketSagas(options: TicketSagaListOptions = {}) {
  const settings = ticketSettings(process.env);
  const { url, timeoutMs } = options.payments ?? { url: settings.PAYMENTS_URL, timeoutMs: settings.PAYMENTS_TIMEOUT_MS };
  const payments = new PaymentsClient({ baseUrl: url, timeoutMs });
  return [ticketSagaType(payments, { holdMs: options.holdMs ?? settings.TICKET_HOLD_MS }), ticketRefundSagaType(payments)] as const;
}

/** The saga types with the services of the environment: what the worker and the `saga` CLI load. */
export const sagas = ticketSagas();
