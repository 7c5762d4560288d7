/**
 * The client of a Stripe-style payment provider (the example one in this folder, or a real one that
 * speaks the same API; docs/payment-provider.md). Every `POST` carries an `Idempotency-Key`: send
 * the same key on every attempt of one operation, and the provider applies it once and answers the
 * retries with its stored answer. Uses only the global `fetch`: no server code, no database.
 */
import {
  IdempotencyKeyInUseError,
  IdempotencyKeyReusedError,
  IdempotencyKeyVoidedError,
  PaymentDeclinedError,
  ProviderErrorCode,
  ProviderRequestError,
  ProviderUnavailableError,
  RefundRefusedError,
} from './errors';
import {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  type ChargeResponseBody,
  type ProblemDocument,
  type ProviderCharge,
  type RefundResponseBody,
} from './types';

export * from './errors';
export type { ProviderCharge } from './types';

/** Options of {@link PaymentProviderClient}. */
export interface PaymentProviderClientOptions {
  /** The provider's base URL, e.g. `http://127.0.0.1:8235` (a trailing `/` is ignored). */
  baseUrl: string;
  /** Time limit of one call, in ms; past it the call fails with {@link ProviderUnavailableError}. */
  timeoutMs: number;
}

/** What {@link PaymentProviderClient.charge} sends. */
export interface ChargeRequest {
  /** Same on every attempt of this charge, e.g. `<saga key>:chargePayment`. */
  idempotencyKey: string;
  /** A positive whole number of cents. */
  amountCents: number;
  /** The card number, 12–19 digits (the provider keeps its last 4 only). */
  card: string;
  /** Up to 200 characters to find the charge by later ({@link PaymentProviderClient.chargesByReference}). */
  reference?: string | null;
}

/** A successful charge. */
export interface ChargeResult {
  /** The provider's charge id, `ch_…`. */
  id: string;
  amountCents: number;
  status: 'succeeded';
  reference: string | null;
  /** Whether this was the stored answer of an earlier request with the same key. */
  replayed: boolean;
}

/** What {@link PaymentProviderClient.refund} sends. */
export interface RefundRequest {
  /** Same on every attempt of this refund, e.g. `<saga key>:refundPayment`. */
  idempotencyKey: string;
  /** The key the charge to undo was (or would be) made with. */
  chargeIdempotencyKey: string;
}

/**
 * A refund's outcome: `refunded` (now or by an earlier refund), `voided` (no charge was ever made
 * with the key, and now none ever will be), `nothing_to_refund` (the charge was declined).
 */
export interface RefundResult {
  status: 'refunded' | 'voided' | 'nothing_to_refund';
  chargeId: string | null;
  amountCents: number;
  /** Whether this was the stored answer of an earlier request with the same key. */
  replayed: boolean;
}

/** Wait before retrying a 409 that carries no readable `Retry-After`. */
const DEFAULT_RETRY_AFTER_MS = 1000;

/** A client of the payment provider's HTTP API. Stateless; one instance can serve every caller. */
export class PaymentProviderClient {
  readonly #baseUrl: string;
  readonly #timeoutMs: number;

  /** @throws TypeError for a base URL that is not http(s) or a time limit that is not a positive number of ms. */
  constructor(options: PaymentProviderClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`payment provider baseUrl: ${JSON.stringify(options.baseUrl)} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`payment provider baseUrl: must be http or https (got ${url.protocol})`);
    }
    if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) {
      throw new TypeError(`payment provider timeoutMs: must be a positive number of ms (got ${options.timeoutMs})`);
    }
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs;
  }

  /**
   * Charges a card once per idempotency key.
   * @throws PaymentDeclinedError when the card is declined (also on every retry with the key).
   * @throws IdempotencyKeyVoidedError when a refund voided the key before any charge was made with it.
   * @throws IdempotencyKeyInUseError while another request with the key is being processed.
   * @throws IdempotencyKeyReusedError when the key was used for another request.
   * @throws ProviderUnavailableError when the outcome is unknown (network, timeout, abort, 5xx): retry with the key.
   * @throws ProviderRequestError for a request the provider refused as malformed.
   */
  async charge(request: ChargeRequest, signal?: AbortSignal): Promise<ChargeResult> {
    const body = { amount_cents: request.amountCents, card: request.card, ...(request.reference == null ? {} : { reference: request.reference }) };
    const { data, replayed } = await this.#call<ChargeResponseBody>('POST', '/v1/charges', { body, idempotencyKey: request.idempotencyKey, signal, refusal: 'charge' });
    if (typeof data.id !== 'string' || typeof data.amount_cents !== 'number' || data.status !== 'succeeded') {
      throw new ProviderUnavailableError('the payment provider answered the charge with a body the client cannot read');
    }
    return { id: data.id, amountCents: data.amount_cents, status: 'succeeded', reference: data.reference ?? null, replayed };
  }

  /**
   * Refunds the charge made with `chargeIdempotencyKey`, once per refund key. Ordered after every
   * charge attempt with that key: it answers 409 (thrown as IdempotencyKeyInUseError) while such an
   * attempt is in flight, and voids the key when no charge was made with it.
   * @throws RefundRefusedError when the provider refuses the refund (also on every retry with the key).
   * @throws IdempotencyKeyInUseError while this refund, or the charge, is being processed.
   * @throws IdempotencyKeyReusedError, IdempotencyKeyVoidedError, ProviderUnavailableError, ProviderRequestError as for {@link charge}.
   */
  async refund(request: RefundRequest, signal?: AbortSignal): Promise<RefundResult> {
    const body = { charge_idempotency_key: request.chargeIdempotencyKey };
    const { data, replayed } = await this.#call<RefundResponseBody>('POST', '/v1/refunds', { body, idempotencyKey: request.idempotencyKey, signal, refusal: 'refund' });
    if (!['refunded', 'voided', 'nothing_to_refund'].includes(data.status) || typeof data.amount_cents !== 'number') {
      throw new ProviderUnavailableError('the payment provider answered the refund with a body the client cannot read');
    }
    return { status: data.status, chargeId: data.charge_id ?? null, amountCents: data.amount_cents, replayed };
  }

  /**
   * The charges (succeeded and declined) made with `reference`, oldest first.
   * @throws ProviderUnavailableError, ProviderRequestError.
   */
  async chargesByReference(reference: string, signal?: AbortSignal): Promise<ProviderCharge[]> {
    const { data } = await this.#call<{ data: ProviderCharge[] }>('GET', `/v1/charges?reference=${encodeURIComponent(reference)}`, { signal });
    if (!Array.isArray(data.data)) throw new ProviderUnavailableError('the payment provider answered the charge list with a body the client cannot read');
    return data.data;
  }

  async #call<T>(
    method: 'GET' | 'POST',
    path: string,
    options: { body?: unknown; idempotencyKey?: string; signal?: AbortSignal | undefined; refusal?: 'charge' | 'refund' },
  ): Promise<{ data: T; replayed: boolean }> {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.idempotencyKey !== undefined) headers[IDEMPOTENCY_KEY_HEADER] = options.idempotencyKey;
    const what = `${method} ${path.split('?')[0]}`;
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.#baseUrl}${path}`, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal,
      });
      text = await response.text();
    } catch (err) {
      const reason = timeout.aborted ? `no answer within ${this.#timeoutMs} ms` : signal.aborted ? 'the call was aborted' : 'the provider could not be reached';
      throw new ProviderUnavailableError(`payment provider ${what}: ${reason}; the outcome is unknown, retry with the same key`, { cause: err });
    }
    const replayed = response.headers.get(IDEMPOTENT_REPLAYED_HEADER) === 'true';
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (response.ok) {
      if (!isRecord(parsed)) {
        throw new ProviderUnavailableError(`payment provider ${what}: answered ${response.status} with a body that is not a JSON object`, { status: response.status });
      }
      return { data: parsed as T, replayed };
    }
    throw errorOf(response, isRecord(parsed) ? parsed : {}, what, options.refusal);
  }
}

/** The error a non-2xx answer stands for: the one place where statuses and codes map to classes. */
function errorOf(response: Response, problem: Partial<ProblemDocument>, what: string, refusal: 'charge' | 'refund' | undefined): Error {
  const { status } = response;
  const code = typeof problem.code === 'string' ? problem.code : `http_${status}`;
  const message = `payment provider ${what}: ${status} ${code}${typeof problem.detail === 'string' ? `: ${problem.detail}` : ''}`;
  if (status >= 500) return new ProviderUnavailableError(message, { status });
  if (status === 402) {
    // A 402 without one of our codes is still the provider refusing this operation.
    if (code === ProviderErrorCode.REFUND_REFUSED || (code !== ProviderErrorCode.CARD_DECLINED && refusal === 'refund')) return new RefundRefusedError(message);
    return new PaymentDeclinedError(message, typeof problem.charge_id === 'string' ? { chargeId: problem.charge_id } : {});
  }
  if (status === 422 && code === ProviderErrorCode.IDEMPOTENCY_KEY_REUSED) return new IdempotencyKeyReusedError(message);
  if (status === 409 && code === ProviderErrorCode.IDEMPOTENCY_KEY_VOIDED) return new IdempotencyKeyVoidedError(message);
  if (status === 409) return new IdempotencyKeyInUseError(message, { retryAfterMs: retryAfterMs(response.headers.get('retry-after')) });
  return new ProviderRequestError(message, { status, code });
}

/** `Retry-After` (seconds or an HTTP date) in ms. */
function retryAfterMs(header: string | null): number {
  if (header === null) return DEFAULT_RETRY_AFTER_MS;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? DEFAULT_RETRY_AFTER_MS : Math.max(0, at - Date.now());
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
