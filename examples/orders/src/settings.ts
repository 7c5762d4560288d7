/**
 * The order app's own settings, from the environment (the library's, such as DATABASE_URL, are read
 * by `loadConfig`): where the payment provider is.
 */
import { z } from 'zod';

const httpUrl = z
  .string()
  .refine((v) => URL.canParse(v) && ['http:', 'https:'].includes(new URL(v).protocol), 'must be an http(s) URL')
  .transform((v) => v.replace(/\/+$/, ''));

const settingsSchema = z.object({
  /** Base URL of the payment provider the `order` saga charges and refunds through. */
  PAYMENT_PROVIDER_URL: httpUrl.default('http://127.0.0.1:8235'),
  /** Time limit of one call to the payment provider (the step is retried with the same key). */
  PAYMENT_PROVIDER_TIMEOUT_MS: z.coerce.number().int().positive().max(50_000).default(10_000),
  /** Where the example payment provider listens (host:port). */
  PAYMENT_PROVIDER_ADDRESS: z
    .string()
    .regex(/^[^\s:/]+:\d{1,5}$/, 'must be host:port')
    .default('127.0.0.1:8235'),
});

/** The variables this app reads besides the library's, with their defaults. */
export const ORDER_VARIABLES = Object.keys(settingsSchema.shape);

/** The payment provider's settings: the URL the steps call, and where the provider listens. */
export function paymentProviderSettings(env: NodeJS.ProcessEnv): { url: string; timeoutMs: number; host: string; port: number } {
  const parsed = settingsSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`configuration error: ${issue.path.join('.')} ${issue.message}`);
  }
  const { PAYMENT_PROVIDER_URL: url, PAYMENT_PROVIDER_TIMEOUT_MS: timeoutMs, PAYMENT_PROVIDER_ADDRESS: address } = parsed.data;
  const cut = address.lastIndexOf(':');
  return { url, timeoutMs, host: address.slice(0, cut), port: Number(address.slice(cut + 1)) };
}
