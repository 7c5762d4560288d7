/**
 * The `ticket` saga type: sells one seat of an event. Its fenced row goes into `tickets` (the seat
 * is held from then on: the same seat asked for again is answered DUPLICATE at the gate), then:
 *
 * 1. `requestPayment` asks the payment service for a payment of the seat's price (an external step,
 *    keyed by its idempotency key, with the saga's workflow id as the payment's reference);
 * 2. `paid` **waits** for the signal `payment-confirmed`, which the app's webhook (webhook.ts) sends
 *    when the payment service says the buyer paid. The seat is held for `holdMs`: unpaid by then,
 *    the hold expires and the saga compensates (reason WAIT_TIMED_OUT), so the seat is free again;
 * 3. `issueTicket` writes the ticket's code into the row.
 *
 * The compensation `cancelPayment` settles the payment whatever became of it: a payment the buyer
 * never made is cancelled, so a late attempt to pay is refused; one the buyer made just as the hold
 * expired is refunded; a payment whose creation is still on its way to the service is waited for
 * (the service answers 409 until it has settled), and a creation key that never made one is voided.
 * It is retried for an hour, 5 s apart at most, so an outage of the payment service of minutes
 * passes without an operator.
 *
 * Its **intent** is the event and the seat: one live ticket per seat. A refunded ticket
 * (`ticket-refund`) is released, and the seat is sold again as a new ticket.
 *
 * Example data: the payment service declines the card `4000000000000002` (DECLINED_CARD).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { defineSaga, externalStep, StepRejectedError, stepIdempotencyKey, type SagaDefinition, type StepHandler } from 'reservation-saga';
import { KeyVoidedError, PaymentRefusedError, type PaymentsClient } from './services/client';
import { ticketsTable } from './tickets-table';

/** The signal the app's webhook sends when the payment service confirms a payment. */
export const PAYMENT_CONFIRMED = 'payment-confirmed';

const ticketSchema = z
  .object({
    /** The event, e.g. `opera-2027-03-14`. */
    event: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'must be lower-case letters, digits and -'),
    /** The seat, e.g. `C12`. */
    seat: z.string().regex(/^[A-Z]{1,2}[0-9]{1,3}$/, 'must be a row and a number, e.g. C12'),
    /** Who buys it (the app's customer id). */
    buyer: z.string().trim().min(1).max(200),
    /** The seat's price, as the app quoted it. */
    amountCents: z.number().int().positive().max(10_000_000),
  })
  .strict();

/** A validated ticket request. */
export type TicketInput = z.infer<typeof ticketSchema>;

/** What the payment service's confirmation carries to the saga (see webhook.ts). */
export interface PaymentConfirmation {
  paymentIntent: string;
}

/** What `requestPayment` answered. */
interface PaymentRequested {
  paymentIntent: string;
}

/** Options of the `ticket` saga type. */
export interface TicketSagaOptions {
  /** How long a seat is held for its buyer to pay. */
  holdMs: number;
}

/** The ticket's code: from its saga, so that every attempt of `issueTicket` writes the same one. */
export function ticketCode(sagaKey: string): string {
  return `TK-${createHash('sha256').update(sagaKey).digest('hex').slice(0, 10).toUpperCase()}`;
}

/** The `ticket` saga type, taking payments through `payments`. */
export function ticketSagaType(payments: PaymentsClient, options: TicketSagaOptions): SagaDefinition<TicketInput> & { readonly type: 'ticket' } {
  // Runs once the buyer paid: the confirmation must name the payment this saga asked for.
  const issueTicket: StepHandler<TicketInput> = async (tx, { sagaKey, entity }) => {
    const requested = entity!.results.requestPayment as PaymentRequested;
    const { payload } = entity!.results.paid as { payload: Partial<PaymentConfirmation> | undefined };
    if (payload?.paymentIntent !== requested.paymentIntent) {
      // Not the payment this hold asked for: refused, so the compensation settles the one it did ask for.
      throw new StepRejectedError('the confirmation names another payment', 'PAYMENT_MISMATCH');
    }
    const code = ticketCode(sagaKey);
    await tx.query('UPDATE tickets SET payment_intent = $2, ticket_code = $3, issued_at = now(), updated_at = now() WHERE id = $1', [
      entity!.id,
      requested.paymentIntent,
      code,
    ]);
    return { ticket: code };
  };

  return defineSaga({
    type: 'ticket',
    scope: 'ticket',
    schema: ticketSchema,
    intent: (input) => ({ event: input.event, seat: input.seat }),
    table: ticketsTable,
    row: (input, { sagaKey }) => ({
      event: input.event,
      seat: input.seat,
      buyer: input.buyer,
      amount_cents: input.amountCents,
      payment_key: stepIdempotencyKey(sagaKey, 'requestPayment'),
    }),
    steps: [
      {
        step: 'requestPayment',
        compensation: 'cancelPayment',
        // An outage of the payment service of minutes passes without an operator.
        compensationRetry: { totalMs: 60 * 60_000, maximumIntervalMs: 5_000 },
      },
      // The seat is held while the buyer pays; unpaid after holdMs, the hold expires and the saga compensates.
      { step: 'paid', wait: { signal: PAYMENT_CONFIRMED, timeoutMs: options.holdMs } },
      // Nothing after it can fail, so nothing undoes it: a ticket once issued is refunded by `ticket-refund`.
      { step: 'issueTicket' },
    ],
    handlers: {
      requestPayment: externalStep<TicketInput>(async ({ idempotencyKey, sagaKey, input, signal }) => {
        try {
          const intent = await payments.createIntent(
            idempotencyKey,
            { amountCents: input.amountCents, reference: sagaKey, description: `${input.event} seat ${input.seat}` },
            signal,
          );
          return { paymentIntent: intent.id } satisfies PaymentRequested;
        } catch (err) {
          if (err instanceof PaymentRefusedError) throw new StepRejectedError(err.message, 'PAYMENT_REFUSED');
          // Only when this step's own compensation voided the key: this late attempt does nothing.
          if (err instanceof KeyVoidedError) throw new StepRejectedError(err.message, 'PAYMENT_VOIDED');
          throw err;
        }
      }),
      cancelPayment: externalStep<TicketInput>(async ({ idempotencyKey, keyOf, signal }) => {
        const settled = await payments.cancelByCreationKey(idempotencyKey, keyOf('requestPayment'), signal);
        return { payment: settled.status };
      }),
      issueTicket,
    },
    // The hold and the time to settle a payment: a ticket not sold by then is given up.
    deadlineMs: options.holdMs + 30 * 60_000,
  });
}
