/**
 * The client of a hold service (the hotel, the airline: see hold-server.ts). Uses only the global
 * `fetch`. Send the same idempotency key on every attempt of one hold or release: the service does
 * it once and answers the retries with its stored answer.
 */
import { setTimeout as delay } from 'node:timers/promises';

/** The service refused the hold (`sold_out`, `unknown_hotel`, …): final for its key. */
export class HoldRefusedError extends Error {
  override readonly name = 'HoldRefusedError';
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** A request with the key (or, for a release, the hold it names) is still being processed: retry later. */
export class KeyInUseError extends Error {
  override readonly name = 'KeyInUseError';
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/** A release voided the hold's key before any hold was made with it: no hold will ever be made with it. */
export class KeyVoidedError extends Error {
  override readonly name = 'KeyVoidedError';
}

/** No answer (network, timeout, abort) or a 5xx: the outcome is unknown, retry with the same key. */
export class ServiceUnavailableError extends Error {
  override readonly name = 'ServiceUnavailableError';
}

/** The service refused the request as malformed (or the key was reused with another body): a bug of the caller. */
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

/** What a release did: `released` (now or before), `voided` (no hold was made with the key, and none will be), `nothing_to_release` (the hold was refused). */
export interface ReleaseResult {
  status: 'released' | 'voided' | 'nothing_to_release';
  holdId: string | null;
}

/** A hold as the service lists it. */
export interface HoldSummary {
  id: string;
  resource: string;
  reference: string;
  status: 'HELD' | 'RELEASED';
}

/** Options of {@link HoldServiceClient}. */
export interface HoldServiceClientOptions {
  /** `hotel` or `airline`, for messages. */
  name: string;
  /** e.g. `http://127.0.0.1:8241`. */
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

/** A client of a hold service's HTTP API. Stateless; one instance serves every saga. */
export class HoldServiceClient {
  readonly name: string;
  readonly #baseUrl: string;
  readonly #timeoutMs: number;
  readonly #waitWhileInUseMs: number;

  constructor(options: HoldServiceClientOptions) {
    if (!URL.canParse(options.baseUrl)) throw new TypeError(`${options.name} service URL ${JSON.stringify(options.baseUrl)} is not a URL`);
    this.name = options.name;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs;
    this.#waitWhileInUseMs = options.waitWhileInUseMs ?? 20_000;
  }

  /**
   * Holds one unit (a room, a seat) once per idempotency key.
   * @throws HoldRefusedError, KeyVoidedError (final for the key); KeyInUseError, ServiceUnavailableError (retry with the key).
   */
  async hold(idempotencyKey: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<{ id: string; resource: string }> {
    const data = await this.#patiently(() => this.#call('POST', '/v1/holds', { body, idempotencyKey, signal }), signal);
    if (typeof data.id !== 'string' || typeof data.resource !== 'string') throw new ServiceUnavailableError(`${this.name}: unreadable answer to a hold`);
    return { id: data.id, resource: data.resource };
  }

  /**
   * Releases the hold made with `holdKey`, once per release key. Ordered after every attempt of that
   * hold at the service: while one is processed the service answers 409, and this call waits and
   * asks again (up to `waitWhileInUseMs`, then throws KeyInUseError); a key no hold was made with is
   * voided, so a late hold with it is refused.
   * @throws KeyInUseError, ServiceUnavailableError (retry with the same keys).
   */
  async release(idempotencyKey: string, holdKey: string, signal?: AbortSignal): Promise<ReleaseResult> {
    const data = await this.#patiently(() => this.#call('POST', '/v1/releases', { body: { hold_key: holdKey }, idempotencyKey, signal }), signal);
    if (data.status !== 'released' && data.status !== 'voided' && data.status !== 'nothing_to_release') {
      throw new ServiceUnavailableError(`${this.name}: unreadable answer to a release`);
    }
    return { status: data.status, holdId: typeof data.hold_id === 'string' ? data.hold_id : null };
  }

  /** The holds made with `reference` (e.g. a trip's saga key), oldest first. */
  async holds(reference: string, signal?: AbortSignal): Promise<HoldSummary[]> {
    const data = await this.#call('GET', `/v1/holds?reference=${encodeURIComponent(reference)}`, { signal });
    return (data.data as HoldSummary[]).map(({ id, resource, reference: ref, status }) => ({ id, resource, reference: ref, status }));
  }

  /** A `GET` of the service's own (e.g. `/v1/flights/TS101`). */
  async get(path: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
    return this.#call('GET', path, { signal });
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
    const what = `${this.name} ${method} ${path.split('?')[0]}`;
    let response: Response;
    let parsed: unknown;
    try {
      response = await fetch(`${this.#baseUrl}${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), signal });
      const text = await response.text();
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch (err) {
      const why = timeout.aborted ? `no answer within ${this.#timeoutMs} ms` : signal.aborted ? 'the call was aborted' : 'no readable answer';
      throw new ServiceUnavailableError(`${what}: ${why}; the outcome is unknown, retry with the same key`, { cause: err });
    }
    const body = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
    if (response.ok) return body;
    const code = typeof body.code === 'string' ? body.code : `http_${response.status}`;
    const message = `${what}: ${response.status} ${code}${typeof body.detail === 'string' ? `: ${body.detail}` : ''}`;
    if (response.status >= 500) throw new ServiceUnavailableError(message);
    if (response.status === 409 && code === 'idempotency_key_voided') throw new KeyVoidedError(message);
    if (response.status === 409) throw new KeyInUseError(message, retryAfterMs(response.headers.get('retry-after')));
    if (response.status === 422 && code !== 'idempotency_key_reused') throw new HoldRefusedError(message, code);
    throw new ServiceRequestError(message, response.status, code);
  }
}

function retryAfterMs(header: string | null): number {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header.trim()) * 1000 : 1000;
}
