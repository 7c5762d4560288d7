/**
 * The tickets app's own settings, from the environment (the library's, such as DATABASE_URL and
 * TEMPORAL_ADDRESS, are read by `loadConfig`): where the payment service is, how long a seat is held
 * for its buyer, and where the app hears from the payment service.
 */
import { z } from 'zod';

const httpUrl = z
  .string()
  .refine((v) => URL.canParse(v) && ['http:', 'https:'].includes(new URL(v).protocol), 'must be an http(s) URL')
  .transform((v) => v.replace(/\/+$/, ''));
const address = z.string().regex(/^[^\s:/]+:\d{1,5}$/, 'must be host:port');

const settingsSchema = z.object({
  /** The payment service the `ticket` saga asks to take the buyer's payment. */
  PAYMENTS_URL: httpUrl.default('http://127.0.0.1:8243'),
  /** Time limit of one call to the payment service (the step is retried with the same key). */
  PAYMENTS_TIMEOUT_MS: z.coerce.number().int().positive().max(50_000).default(5000),
  /** How long a seat is held for its buyer to pay; unpaid, the hold expires and the seat is free again. */
  TICKET_HOLD_MS: z.coerce.number().int().min(1000).max(60 * 60_000).default(10 * 60_000),
  /** Where `npm run webhook` hears the payment service's confirmations. */
  WEBHOOK_ADDRESS: address.default('127.0.0.1:8244'),
  /** The secret the payment service signs its webhooks with (shared with it; base64 or any long string). */
  PAYMENTS_WEBHOOK_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
});

/** The tickets app's settings. */
export type TicketSettings = z.infer<typeof settingsSchema>;

/** The variables this app reads besides the library's. */
export const TICKET_VARIABLES = Object.keys(settingsSchema.shape);

/** The app's settings from `env`. @throws Error naming the variable that is wrong. */
export function ticketSettings(env: NodeJS.ProcessEnv): TicketSettings {
  const parsed = settingsSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`configuration error: ${issue.path.join('.')} ${issue.message}`);
  }
  return parsed.data;
}

/** `host:port` as the pieces `listen` takes. */
export function hostPort(value: string): { host: string; port: number } {
  const cut = value.lastIndexOf(':');
  return { host: value.slice(0, cut), port: Number(value.slice(cut + 1)) };
}
