/**
 * The client of the payment service (see payments.ts). Uses only the global `fetch`. Send the same
 * idempotency key on every attempt of one creation, cancellation or refund: the service does it
 * once and answers the retries with its stored answer. Paying needs no key (paying a paid intent
 * charges nothing more).
 */
import { setTimeout as delay } from 'node:timers/promises';

/**
 * The service refused (`card_declined`, `payment_intent_canceled`, `payment_intent_refunded`,
 * `payment_intent_not_paid`, `payment_intent_not_found`): final for the request (a declined card
 * aside, which another card may pay).
 */
export class PaymentRefusedError extends Error {
  override readonly name = 'PaymentRefusedError';
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * A request with the key (`idempotency_key_in_use`) or, for a cancellation, the creation it names
 * (`creation_in_progress`) is still being processed, past `waitWhileInUseMs`: retry later, same key.
 */
export class KeyInUseError extends Error {
  override readonly name = 'KeyInUseError';
  constructor(
    message: string,
    readonly code: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/** A cancellation voided the creation's key before any intent was created with it: none ever will be. */
export class KeyVoidedError extends Error {
  override readonly name = 'KeyVoidedError';
}

/** No answer (network, timeout, abort), a 5xx, 408 or 429: the outcome is unknown, retry with the same key. */
export class ServiceUnavailableError extends Error {
  override readonly name = 'ServiceUnavailableError';
}

/** The service refused the request as malformed (400), or the key was reused with another body (422): a bug of the caller. */
export class ServiceRequestError extends Error {
  override readonly name = 'ServiceRequestError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
  }
}

export type PaymentIntentStatus = 'requires_payment' | 'succeeded' | 'canceled' | 'refunded';

/** A payment intent as the service lists it. */
export interface PaymentIntentSummary {
  id: string;
  status: PaymentIntentStatus;
  amountCents: number;
  reference: string;
  refunded: boolean;
}

/** A payment intent, all of it. */
export interface PaymentIntent extends PaymentIntentSummary {
  description: string | null;
  cardLast4: string | null;
  /** Its refund (`re_…`), if refunded. */
  refund: string | null;
}

/**
 * What a cancellation did: `voided` (no intent was created with the key, and none will be:
 * `paymentIntent` null), `canceled` (the intent was not paid, and now cannot be), `refunded` (it
 * was paid: refunded, by `refund`). Now or before.
 */
export interface CancellationResult {
  status: 'voided' | 'canceled' | 'refunded';
  paymentIntent: string | null;
  refund: string | null;
}

/** Options of {@link PaymentsClient}. */
export interface PaymentsClientOptions {
  /** e.g. `http://127.0.0.1:8243`. */
  baseUrl: string;
  /** Time limit of one call; past it the call fails with ServiceUnavailableError (retry with the same key). */
  timeoutMs: number;
  /**
   * How long a call keeps retrying, inside one attempt of its step, while the service answers 409
   * "still processing this key" (then it throws KeyInUseError, and the saga retries the step).
   * @default 20000
   */
  waitWhileInUseMs?: number;
}

/** A client of the payment service's HTTP API. Stateless; one instance serves every saga. */
export class PaymentsClient {
  readonly #baseUrl: string;
  readonly #timeoutMs: number;
  readonly #waitWhileInUseMs: number;

  constructor(options: PaymentsClientOptions) {
    if (!URL.canParse(options.baseUrl)) throw new TypeError(`payment service URL ${JSON.stringify(options.baseUrl)} is not a URL`);
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs;
    this.#waitWhileInUseMs = options.waitWhileInUseMs ?? 20_000;
  }

  /**
   * Creates a payment intent once per idempotency key (a retry gets the stored answer: `status` is
   * the intent's at its creation; see {@link intent} for now).
   * @throws KeyVoidedError (final for the key); KeyInUseError, ServiceUnavailableError (retry with the key); ServiceRequestError.
   */
  async createIntent(idempotencyKey: string, body: { amountCents: number; reference: string; description?: string }, signal?: AbortSignal): Promise<{ id: string; status: PaymentIntentStatus }> {
    const payload = { amount_cents: body.amountCents, reference: body.reference, ...(body.description === undefined ? {} : { description: body.description }) };
    const data = await this.#patiently(() => this.#call('POST', '/v1/payment-intents', { body: payload, idempotencyKey, signal }), signal);
    return { id: text(data.id, 'a creation'), status: text(data.status, 'a creation') as PaymentIntentStatus };
  }

  /**
   * Pays the intent with `card` (the buyer's side); paying a paid intent again charges nothing and answers `succeeded`.
   * @throws PaymentRefusedError (`card_declined`, `payment_intent_canceled`, `payment_intent_refunded`, `payment_intent_not_found`); ServiceUnavailableError (retry).
   */
  async pay(id: string, card: string, signal?: AbortSignal): Promise<{ id: string; status: PaymentIntentStatus }> {
    const data = await this.#call('POST', `/v1/payment-intents/${encodeURIComponent(id)}/pay`, { body: { card }, signal });
    return { id: text(data.id, 'a payment'), status: text(data.status, 'a payment') as PaymentIntentStatus };
  }

  /**
   * Settles the payment of the intent created with `creationKey`, once per cancellation key: voids
   * the key, cancels the intent, or refunds it. Ordered after every attempt of that creation at the
   * service: while one is processed the service answers 409, and this call waits and asks again (up
   * to `waitWhileInUseMs`, then throws KeyInUseError).
   * @throws KeyInUseError, ServiceUnavailableError (retry with the same keys); ServiceRequestError.
   */
  async cancelByCreationKey(idempotencyKey: string, creationKey: string, signal?: AbortSignal): Promise<CancellationResult> {
    const data = await this.#patiently(() => this.#call('POST', '/v1/cancellations', { body: { creation_key: creationKey }, idempotencyKey, signal }), signal);
    if (data.status !== 'voided' && data.status !== 'canceled' && data.status !== 'refunded') throw new ServiceUnavailableError('payments: unreadable answer to a cancellation');
    return { status: data.status, paymentIntent: orNull(data.payment_intent), refund: orNull(data.refund) };
  }

  /**
   * Refunds a paid intent in full, once per intent (another key gets the same refund).
   * @throws PaymentRefusedError (`payment_intent_not_paid`, `payment_intent_not_found`: stored with the key); KeyInUseError, ServiceUnavailableError (retry with the key).
   */
  async refund(idempotencyKey: string, paymentIntent: string, signal?: AbortSignal): Promise<{ id: string; amountCents: number }> {
    const data = await this.#patiently(() => this.#call('POST', '/v1/refunds', { body: { payment_intent: paymentIntent }, idempotencyKey, signal }), signal);
    if (typeof data.amount_cents !== 'number') throw new ServiceUnavailableError('payments: unreadable answer to a refund');
    return { id: text(data.id, 'a refund'), amountCents: data.amount_cents };
  }

  /** The intents created with `reference` (e.g. a saga's workflow id), oldest first. */
  async intents(reference: string, signal?: AbortSignal): Promise<PaymentIntentSummary[]> {
    const data = await this.#call('GET', `/v1/payment-intents?reference=${encodeURIComponent(reference)}`, { signal });
    return (data.data as Record<string, unknown>[]).map(summaryOf);
  }

  /** The intent `id`. @throws PaymentRefusedError `payment_intent_not_found`. */
  async intent(id: string, signal?: AbortSignal): Promise<PaymentIntent> {
    const data = await this.#call('GET', `/v1/payment-intents/${encodeURIComponent(id)}`, { signal });
    return { ...summaryOf(data), description: orNull(data.description), cardLast4: orNull(data.card_last4), refund: orNull(data.refund) };
  }

  /** `call`, again after the service's Retry-After while it answers "still processing this key", for up to waitWhileInUseMs. */
  async #patiently<T>(call: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    const until = Date.now() + this.#waitWhileInUseMs;
    for (;;) {
      try {
        return await call();
      } catch (err) {
        if (!(err instanceof KeyInUseError) || Date.now() + err.retryAfterMs > until) throw err;
        await delay(err.retryAfterMs, undefined, signal ? { signal } : {});
      }
    }
  }

  async #call(method: 'GET' | 'POST', path: string, options: { body?: unknown; idempotencyKey?: string; signal?: AbortSignal | undefined }): Promise<Record<string, unknown>> {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    const what = `payments ${method} ${path.split('?')[0]}`;
    let response: Response;
    let parsed: unknown;
    try {
      response = await fetch(`${this.#baseUrl}${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), signal });
      const body = await response.text();
      parsed = body === '' ? undefined : JSON.parse(body);
    } catch (err) {
      const why = timeout.aborted ? `no answer within ${this.#timeoutMs} ms` : signal.aborted ? 'the call was aborted' : 'no readable answer';
      throw new ServiceUnavailableError(`${what}: ${why}; the outcome is unknown, retry with the same key`, { cause: err });
    }
    const body = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
    if (response.ok) return body;
    const code = typeof body.code === 'string' ? body.code : `http_${response.status}`;
    const message = `${what}: ${response.status} ${code}${typeof body.detail === 'string' ? `: ${body.detail}` : ''}`;
    if (response.status >= 500 || response.status === 408 || response.status === 429) throw new ServiceUnavailableError(message);
    if (code === 'idempotency_key_voided') throw new KeyVoidedError(message);
    if (code === 'idempotency_key_in_use' || code === 'creation_in_progress') throw new KeyInUseError(message, code, retryAfterMs(response.headers.get('retry-after')));
    if (response.status === 402 || response.status === 404 || response.status === 409) throw new PaymentRefusedError(message, code);
    throw new ServiceRequestError(message, response.status, code);
  }
}

function summaryOf(data: Record<string, unknown>): PaymentIntentSummary {
  if (typeof data.amount_cents !== 'number') throw new ServiceUnavailableError('payments: unreadable payment intent');
  return { id: text(data.id, 'an intent'), status: text(data.status, 'an intent') as PaymentIntentStatus, amountCents: data.amount_cents, reference: text(data.reference, 'an intent'), refunded: data.refunded === true };
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new ServiceUnavailableError(`payments: unreadable answer to ${what}`);
  return value;
}

function orNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function retryAfterMs(header: string | null): number {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header.trim()) * 1000 : 1000;
}
