/**
 * Errors of the payment provider's client. A refusal by the provider (a declined card, a refused
 * refund) is final for its idempotency key; an unavailable provider, or a key in use, is worth a
 * retry with the same key; a bad request or a reused key is a bug of the caller.
 */

/** The `code` members of the provider's problem documents, and the client's own `unavailable`. */
export const ProviderErrorCode = {
  CARD_DECLINED: 'card_declined',
  REFUND_REFUSED: 'refund_refused',
  IDEMPOTENCY_KEY_REUSED: 'idempotency_key_reused',
  IDEMPOTENCY_KEY_IN_USE: 'idempotency_key_in_use',
  IDEMPOTENCY_KEY_VOIDED: 'idempotency_key_voided',
  IDEMPOTENCY_KEY_MISSING: 'idempotency_key_missing',
  IDEMPOTENCY_KEY_INVALID: 'idempotency_key_invalid',
  INVALID_REQUEST: 'invalid_request',
  NOT_FOUND: 'not_found',
  INTERNAL_ERROR: 'internal_error',
  UNAVAILABLE: 'unavailable',
} as const;

/** One of {@link ProviderErrorCode}, or another code a provider sent. */
export type ProviderErrorCodeValue = (typeof ProviderErrorCode)[keyof typeof ProviderErrorCode];

/** Base class of every error the {@link PaymentProviderClient} throws. */
export class PaymentProviderError extends Error {
  override readonly name: string = 'PaymentProviderError';
  /** The HTTP status of the provider's answer; undefined when there was none (network, timeout). */
  readonly status?: number;
  /** The problem document's `code` (see {@link ProviderErrorCode}). */
  readonly code: string;
  constructor(message: string, options: { code: string; status?: number; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code;
    if (options.status !== undefined) this.status = options.status;
  }
}

/** 402 `card_declined`: the provider declined the charge. Final for the key: a retry replays it. */
export class PaymentDeclinedError extends PaymentProviderError {
  override readonly name = 'PaymentDeclinedError';
  /** The declined charge's id at the provider, when it sent one. */
  readonly chargeId?: string;
  constructor(message: string, options: { chargeId?: string; cause?: unknown } = {}) {
    super(message, { code: ProviderErrorCode.CARD_DECLINED, status: 402, cause: options.cause });
    if (options.chargeId !== undefined) this.chargeId = options.chargeId;
  }
}

/** 402 `refund_refused`: the provider refused to refund the charge. Final for the refund's key. */
export class RefundRefusedError extends PaymentProviderError {
  override readonly name = 'RefundRefusedError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { code: ProviderErrorCode.REFUND_REFUSED, status: 402, cause: options.cause });
  }
}

/** 422 `idempotency_key_reused`: the key was used before with another request (a caller's bug). */
export class IdempotencyKeyReusedError extends PaymentProviderError {
  override readonly name = 'IdempotencyKeyReusedError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { code: ProviderErrorCode.IDEMPOTENCY_KEY_REUSED, status: 422, cause: options.cause });
  }
}

/**
 * 409 `idempotency_key_in_use`: another request with this key (or, for a refund, with the charge's
 * key) is being processed right now. Retry with the same key after {@link retryAfterMs}.
 */
export class IdempotencyKeyInUseError extends PaymentProviderError {
  override readonly name = 'IdempotencyKeyInUseError';
  /** How long to wait before the retry (from the answer's `Retry-After`). */
  readonly retryAfterMs: number;
  constructor(message: string, options: { retryAfterMs: number; cause?: unknown }) {
    super(message, { code: ProviderErrorCode.IDEMPOTENCY_KEY_IN_USE, status: 409, cause: options.cause });
    this.retryAfterMs = options.retryAfterMs;
  }
}

/**
 * 409 `idempotency_key_voided`: a refund naming this charge key arrived before any charge with it,
 * so the provider voided the key; no charge will ever be made with it. Final.
 */
export class IdempotencyKeyVoidedError extends PaymentProviderError {
  override readonly name = 'IdempotencyKeyVoidedError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { code: ProviderErrorCode.IDEMPOTENCY_KEY_VOIDED, status: 409, cause: options.cause });
  }
}

/**
 * The provider could not be reached, did not answer in time, the call was aborted, it answered
 * 5xx, or its answer could not be read (`code` `unavailable`). The request may or may not have been
 * processed: retry with the same key.
 */
export class ProviderUnavailableError extends PaymentProviderError {
  override readonly name = 'ProviderUnavailableError';
  constructor(message: string, options: { status?: number; cause?: unknown } = {}) {
    super(message, { code: ProviderErrorCode.UNAVAILABLE, status: options.status, cause: options.cause });
  }
}

/** Any other 4xx (a malformed request, an unknown route or charge): a bug of the caller, not retryable. */
export class ProviderRequestError extends PaymentProviderError {
  override readonly name = 'ProviderRequestError';
  constructor(message: string, options: { status: number; code: string; cause?: unknown }) {
    super(message, options);
  }
}
