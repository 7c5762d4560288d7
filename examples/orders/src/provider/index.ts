/**
 * The example payment provider (a Stripe-style HTTP service over PostgreSQL) and its client; see
 * docs/payment-provider.md. No Temporal code: the client is all a saga step needs.
 */
export { PaymentProviderClient, type ChargeRequest, type ChargeResult, type PaymentProviderClientOptions, type RefundRequest, type RefundResult } from './client';
export {
  IdempotencyKeyInUseError,
  IdempotencyKeyReusedError,
  IdempotencyKeyVoidedError,
  PaymentDeclinedError,
  PaymentProviderError,
  ProviderErrorCode,
  ProviderRequestError,
  ProviderUnavailableError,
  RefundRefusedError,
} from './errors';
export { runPaymentProvider, type RunningPaymentProvider, type RunPaymentProviderOptions } from './main';
export { ensureProviderSchema } from './schema';
export { createProviderServer, PROVIDER_BODY_LIMIT_BYTES, type ProviderOperation, type ProviderServerOptions } from './server';
export * from './types';
