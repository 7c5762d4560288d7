/**
 * The payment service's webhook deliveries (see payments.ts). An event is written to
 * `payments.webhook_events` (an outbox) in the transaction of the payment it announces; once that
 * has committed it is POSTed to the app, signed (see signature.ts), and again with backoff (200 ms
 * doubling to 5 s) until the app answers 2xx. A 4xx other than 408 and 429 is final, as is the last
 * of `attempts`. Each attempt is recorded and logged.
 *
 * Stopping (the server closing) clears the timers and aborts the attempts under way; what was not
 * delivered stays pending, and the next server to start resumes it. So an event is delivered at
 * least once: the receiver recognises one it had by its `id`.
 */
import type pg from 'pg';
import { signPayment } from './signature';

/** The body of a webhook (`Payment-Signature` signs it as sent). */
export interface PaymentEvent {
  id: string;
  type: 'payment_intent.succeeded';
  payment_intent: string;
  reference: string;
  amount_cents: number;
}

/** Where the events go: POSTed to `url`, signed with `secret`; `attempts` per event (@default 10). */
export interface WebhookOptions {
  url: string;
  secret: string;
  attempts?: number;
}

/** An event to send, its body exactly as stored (and signed), and the attempts made so far. */
export interface Delivery {
  event: PaymentEvent;
  body: string;
  attempts: number;
}

export interface DeliveryHooks {
  /** The app answered `status` (2xx) to the event, and the event is recorded delivered. */
  webhookDelivered?(event: PaymentEvent, status: number): void;
  /** The event will not be sent again (a final 4xx, or its attempts used up). */
  webhookFailed?(event: PaymentEvent, reason: string): void;
}

/** The deliveries of one server: none without a webhook (the events stay pending). */
export function webhookDeliveries(pool: pg.Pool, webhook: WebhookOptions | undefined, log: (line: string) => void, hooks: DeliveryHooks = {}) {
  const maxAttempts = webhook?.attempts ?? 10;
  if (webhook && !URL.canParse(webhook.url)) throw new TypeError(`payments: webhook URL ${JSON.stringify(webhook.url)} is not a URL`);
  if (webhook && webhook.secret === '') throw new TypeError('payments: the webhook secret is empty');
  const timers = new Set<NodeJS.Timeout>();
  const underWay = new Set<Promise<void>>();
  const aborter = new AbortController();

  /** Sends `delivery` in `delayMs`, in the background. */
  function schedule(delivery: Delivery, delayMs: number): void {
    if (!webhook || aborter.signal.aborted) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      const attempt = deliver(webhook, delivery).catch((err: unknown) => log(`payments: webhook ${delivery.event.id} left pending: ${err instanceof Error ? err.message : String(err)}`));
      underWay.add(attempt);
      void attempt.finally(() => underWay.delete(attempt));
    }, delayMs);
    timers.add(timer);
  }

  async function deliver({ url, secret }: WebhookOptions, { event, body, attempts }: Delivery): Promise<void> {
    const attempt = attempts + 1;
    let status: number | undefined;
    let why: string;
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'payment-signature': signPayment(secret, body, Math.floor(Date.now() / 1000)) },
        body,
        signal: AbortSignal.any([aborter.signal, AbortSignal.timeout(5000)]),
      });
      await response.arrayBuffer();
      status = response.status;
      why = `answered ${status}`;
    } catch (err) {
      if (aborter.signal.aborted) return;
      const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
      why = `no answer: ${err instanceof Error ? err.message : String(err)}${cause}`;
    }
    const delivered = status !== undefined && status >= 200 && status < 300;
    const refused = status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429;
    const final = delivered || refused || attempt >= maxAttempts;
    await pool.query(
      `UPDATE payments.webhook_events SET attempts = $2, last_status = $3, status = $4, delivered_at = CASE WHEN $4 = 'delivered' THEN clock_timestamp() END WHERE id = $1`,
      [event.id, attempt, status ?? null, delivered ? 'delivered' : final ? 'failed' : 'pending'],
    );
    const what = `payments: webhook ${event.id} (${event.type} ${event.payment_intent}) attempt ${attempt}`;
    if (delivered) {
      log(`${what}: delivered (${status})`);
      hooks.webhookDelivered?.(event, status!);
    } else if (final) {
      log(`${what}: ${why}; ${refused ? 'refused, final' : 'attempts used up'}: not sent again`);
      hooks.webhookFailed?.(event, why);
    } else {
      const delayMs = Math.min(200 * 2 ** (attempt - 1), 5000);
      log(`${what}: ${why}; again in ${delayMs} ms`);
      schedule({ event, body, attempts: attempt }, delayMs);
    }
  }

  return {
    schedule,
    /** Sends the events still pending (a server stopped before they were delivered). */
    async resume(): Promise<void> {
      if (!webhook) return;
      const { rows } = await pool.query<{ body: string; attempts: number }>(`SELECT body, attempts FROM payments.webhook_events WHERE status = 'pending' ORDER BY created_at LIMIT 1000`);
      for (const row of rows) schedule({ event: JSON.parse(row.body) as PaymentEvent, body: row.body, attempts: row.attempts }, 0);
      if (rows.length > 0) log(`payments: resuming ${rows.length} pending webhook deliveries`);
    },
    /** Stops: no attempt is made after it resolves. */
    async stop(): Promise<void> {
      aborter.abort();
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await Promise.all(underWay);
    },
  };
}
