/**
 * The example payment service as a process (`npm run services`): its tables in schema `payments`
 * of DATABASE_URL (`npm run migrate` creates the database; the tables are created here too if
 * missing, as PAYMENTS_SCHEMA_SQL is idempotent), listening on
 * PAYMENTS_ADDRESS, sending its webhooks to PAYMENTS_WEBHOOK_URL signed with
 * PAYMENTS_WEBHOOK_SECRET (required: the app verifies with the same secret), until SIGINT or
 * SIGTERM. PAYMENTS_CREATE_DELAY_MS makes it slow to create a payment intent.
 */
import pg from 'pg';
import { z } from 'zod';
import { createPaymentServer, PAYMENTS_SCHEMA_SQL } from './payments';

const settingsSchema = z.object({
  DATABASE_URL: z.string().min(1).default('postgres://postgres@127.0.0.1:5432/tickets_example'),
  PAYMENTS_ADDRESS: z.string().regex(/^[^\s:/]+:\d{1,5}$/, 'must be host:port').default('127.0.0.1:8243'),
  PAYMENTS_WEBHOOK_URL: z
    .string()
    .refine((v) => URL.canParse(v) && ['http:', 'https:'].includes(new URL(v).protocol), 'must be an http(s) URL')
    .default('http://127.0.0.1:8244/webhooks/payments'),
  PAYMENTS_WEBHOOK_SECRET: z.string({ error: 'is required: the secret the app verifies the webhooks with' }).min(16, 'must be at least 16 characters'),
  PAYMENTS_CREATE_DELAY_MS: z.coerce.number().int().min(0).max(600_000).default(0),
});

async function main(): Promise<void> {
  const parsed = settingsSchema.safeParse(process.env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`configuration error: ${issue.path.join('.')} ${issue.message}`);
  }
  const settings = parsed.data;
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const pool = new pg.Pool({ connectionString: settings.DATABASE_URL, max: 10 });
  await pool.query(PAYMENTS_SCHEMA_SQL);
  const server = createPaymentServer({
    pool,
    log,
    webhook: { url: settings.PAYMENTS_WEBHOOK_URL, secret: settings.PAYMENTS_WEBHOOK_SECRET },
    createDelayMs: settings.PAYMENTS_CREATE_DELAY_MS,
  });
  const cut = settings.PAYMENTS_ADDRESS.lastIndexOf(':');
  const url = await server.listen({ host: settings.PAYMENTS_ADDRESS.slice(0, cut), port: Number(settings.PAYMENTS_ADDRESS.slice(cut + 1)) });
  log(`services: payments listening on ${url}, webhooks to ${settings.PAYMENTS_WEBHOOK_URL}`);
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
  });
  await server.close();
  await pool.end();
  log('services: stopped');
}

main().catch((err: unknown) => {
  process.stderr.write(`services: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
