/**
 * `ticket-refund`: an operation on an issued ticket, a saga type of its own under the ticket's lock
 * (see EntityOperation in reservation-saga): it runs only once the ticket's `ticket` saga has
 * COMPLETED, and one operation at a time per ticket.
 *
 * `markRefunded` commits to the refund in our database (its compensation takes that back), then
 * `refundPayment` refunds the buyer at the payment service; it has no compensation, so it is
 * retried until it is done (or refused, and then the ticket stays as it was). The operation
 * declares `releases: true`: once both are done, the ticket's row becomes RELEASED (kept, with
 * `refunded_at`) and its seat is free, so the next buyer of the seat gets a new ticket.
 */
import { z } from 'zod';
import { defineOperation, ENTITY_ID_PATTERN, externalStep, StepRejectedError, type EntityOperation, type StepContext, type StepHandler } from 'reservation-saga';
import { PaymentRefusedError, type PaymentsClient } from './services/client';
import { ticketsTable } from './tickets-table';

const refundSchema = z.object({ ticket: z.string().regex(ENTITY_ID_PATTERN, 'must be a ticket id (the `entityId` of its ticket saga)') }).strict();

/** A validated `ticket-refund` input. */
export type TicketRefundInput = z.infer<typeof refundSchema>;

function operationOf(ctx: StepContext<TicketRefundInput>) {
  if (!ctx.operation) throw new Error(`step of ${ctx.sagaKey} run without its operation context`);
  return ctx.operation;
}

/** The `ticket-refund` saga type, refunding through `payments`. */
export function ticketRefundSagaType(payments: PaymentsClient): EntityOperation<TicketRefundInput> & { readonly type: 'ticket-refund' } {
  // The runner has claimed the ticket's row in this transaction before the handler runs.
  const markRefunded: StepHandler<TicketRefundInput> = async (tx, ctx) => {
    const { entityId } = operationOf(ctx);
    const { rows } = await tx.query<{ payment_intent: string | null; refunded: boolean }>(
      'SELECT payment_intent, refunded_at IS NOT NULL AS refunded FROM tickets WHERE id = $1',
      [entityId],
    );
    const ticket = rows[0]!;
    if (ticket.refunded) throw new StepRejectedError('the ticket is refunded already', 'TICKET_REFUNDED');
    if (!ticket.payment_intent) throw new StepRejectedError('the ticket was never paid', 'TICKET_NOT_PAID');
    await tx.query('UPDATE tickets SET refunded_at = now(), refunded_by = $2, updated_at = now() WHERE id = $1', [entityId, ctx.sagaKey]);
    return { paymentIntent: ticket.payment_intent };
  };

  // Undoes only this saga's own mark.
  const unmarkRefunded: StepHandler<TicketRefundInput> = async (tx, ctx) => {
    const { rowCount } = await tx.query('UPDATE tickets SET refunded_at = NULL, refunded_by = NULL, updated_at = now() WHERE id = $1 AND refunded_by = $2', [
      operationOf(ctx).entityId,
      ctx.sagaKey,
    ]);
    return { unmarked: rowCount === 1 };
  };

  return defineOperation({
    type: 'ticket-refund',
    scope: 'ticket',
    schema: refundSchema,
    entity: (input) => input.ticket,
    table: ticketsTable,
    // A refunded ticket gives its seat back: the next buyer of the seat gets a new ticket.
    releases: true,
    steps: [
      // A refusal of markRefunded changed nothing: nothing to undo then.
      { step: 'markRefunded', compensation: 'unmarkRefunded', undoRefused: false },
      { step: 'refundPayment' },
    ],
    handlers: {
      markRefunded,
      unmarkRefunded,
      refundPayment: externalStep<TicketRefundInput>(async (ctx) => {
        const { paymentIntent } = operationOf(ctx).results.markRefunded as { paymentIntent: string };
        try {
          const refund = await payments.refund(ctx.idempotencyKey, paymentIntent, ctx.signal);
          return { refund: refund.id, amountCents: refund.amountCents };
        } catch (err) {
          if (err instanceof PaymentRefusedError) throw new StepRejectedError(err.message, 'REFUND_REFUSED');
          throw err;
        }
      }),
    },
  });
}
