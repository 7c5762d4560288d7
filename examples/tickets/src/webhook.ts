/**
 * The app's side of the payment service: its webhook. When the buyer pays, the payment service posts
 * `payment_intent.succeeded`, signed with the secret the two share; this endpoint checks the
 * signature and sends the signal `payment-confirmed` to the saga the payment was asked for (the
 * payment's reference is the saga's workflow id), which then issues the ticket.
 *
 * - `POST /webhooks/payments`: 204 once the saga has the signal (or had it before: a redelivery),
 *   and also when the saga no longer waits for it (its hold expired: its compensation refunds the
 *   payment, so there is nothing to do here); 401 for a bad signature; 400 for a body that is not an
 *   event; 503 when the signal could not be sent (Temporal unreachable): the payment service
 *   delivers it again.
 *
 * Run as a script (`npm run webhook`), it listens on WEBHOOK_ADDRESS with the saga types of the
 * environment, checking signatures with PAYMENTS_WEBHOOK_SECRET.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { SagaClient, SignalError } from 'reservation-saga';
import { z } from 'zod';
import { sagas } from './sagas';
import { verifyPaymentSignature } from './services/signature';
import { hostPort, ticketSettings } from './settings';
import { PAYMENT_CONFIRMED, type PaymentConfirmation } from './ticket';

const eventSchema = z.object({ type: z.string(), payment_intent: z.string().min(1), reference: z.string().min(1) });

/** Options of {@link createPaymentWebhook}. */
export interface PaymentWebhookOptions {
  /** The client the signals are sent with (the sagas' owner's). Not closed by the server. */
  client: SagaClient;
  /** The secret the payment service signs with. */
  secret: string;
  /** One line per event. @default no logging */
  log?: (line: string) => void;
}

/** The webhook's server; call `listen`. */
export function createPaymentWebhook(options: PaymentWebhookOptions): FastifyInstance {
  const { client, secret, log = () => {} } = options;
  const app = Fastify({ logger: false });
  // The signature is over the body as sent: keep it as text, parse it once it is verified.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.post('/webhooks/payments', async (request, reply) => {
    const raw = typeof request.body === 'string' ? request.body : '';
    const header = request.headers['payment-signature'];
    if (!verifyPaymentSignature(secret, typeof header === 'string' ? header : undefined, raw)) {
      return reply.code(401).send({ code: 'bad_signature', detail: 'the Payment-Signature does not match the body' });
    }
    let event: z.infer<typeof eventSchema>;
    try {
      event = eventSchema.parse(JSON.parse(raw));
    } catch {
      return reply.code(400).send({ code: 'bad_event', detail: 'the body is not a payment event' });
    }
    if (event.type !== 'payment_intent.succeeded') return reply.code(204).send();
    const confirmation: PaymentConfirmation = { paymentIntent: event.payment_intent };
    try {
      const receipt = await client.signal(event.reference, PAYMENT_CONFIRMED, confirmation);
      log(`webhook: ${event.payment_intent} confirmed to ${event.reference}${receipt.first ? '' : ' (again)'}`);
      return reply.code(204).send();
    } catch (err) {
      if (err instanceof SignalError || (err instanceof Error && err.name === 'WorkflowNotFoundError')) {
        // The hold expired (or never was ours): the saga's compensation settles the payment.
        log(`webhook: ${event.payment_intent} not taken by ${event.reference}: ${err.message}`);
        return reply.code(204).send();
      }
      log(`webhook: ${event.payment_intent} for ${event.reference} not delivered: ${err instanceof Error ? err.message : String(err)}`);
      return reply.code(503).send({ code: 'unavailable', detail: 'the saga could not be reached; deliver again' });
    }
  });

  app.get('/livez', async () => ({ ok: true }));
  return app;
}

if (require.main === module) {
  void (async () => {
    const settings = ticketSettings(process.env);
    if (!settings.PAYMENTS_WEBHOOK_SECRET) throw new Error('configuration error: PAYMENTS_WEBHOOK_SECRET is not set (the payment service signs with it)');
    const client = await SagaClient.connect({ sagas });
    const log = (line: string) => process.stderr.write(`${line}\n`);
    const server = createPaymentWebhook({ client, secret: settings.PAYMENTS_WEBHOOK_SECRET, log });
    log(`webhook: listening on ${await server.listen(hostPort(settings.WEBHOOK_ADDRESS))}`);
    await new Promise<void>((resolve) => {
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
    });
    await server.close();
    await client.close();
  })().catch((err: unknown) => {
    process.stderr.write(`webhook: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
