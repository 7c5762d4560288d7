/**
 * The trip app's own settings, from the environment (the library's, such as DATABASE_URL and
 * TEMPORAL_ADDRESS, are read by `loadConfig`): where the hotel and the airline are.
 */
import { z } from 'zod';

const httpUrl = z
  .string()
  .refine((v) => URL.canParse(v) && ['http:', 'https:'].includes(new URL(v).protocol), 'must be an http(s) URL')
  .transform((v) => v.replace(/\/+$/, ''));
const address = z.string().regex(/^[^\s:/]+:\d{1,5}$/, 'must be host:port');

const settingsSchema = z.object({
  /** The hotel service the `trip` saga holds rooms at. */
  HOTEL_URL: httpUrl.default('http://127.0.0.1:8241'),
  /** The airline service the `trip` saga holds seats at. */
  AIRLINE_URL: httpUrl.default('http://127.0.0.1:8242'),
  /** Time limit of one call to either service (the step is retried with the same key). */
  TRIP_SERVICE_TIMEOUT_MS: z.coerce.number().int().positive().max(50_000).default(5000),
  /** Where `npm run services` serves the hotel and the airline. */
  HOTEL_ADDRESS: address.default('127.0.0.1:8241'),
  AIRLINE_ADDRESS: address.default('127.0.0.1:8242'),
  /** How long the airline of `npm run services` takes to hold a seat (a slow airline). */
  AIRLINE_HOLD_DELAY_MS: z.coerce.number().int().min(0).max(600_000).default(0),
});

/** The trip app's settings. */
export type TripSettings = z.infer<typeof settingsSchema>;

/** The variables this app reads besides the library's. */
export const TRIP_VARIABLES = Object.keys(settingsSchema.shape);

/** The app's settings from `env`. @throws Error naming the variable that is wrong. */
export function tripSettings(env: NodeJS.ProcessEnv): TripSettings {
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
