/**
 * The example payment provider as a process (`npm run provider`): its tables in schema
 * `payment_provider` of DATABASE_URL, listening on PAYMENT_PROVIDER_ADDRESS, until SIGINT or SIGTERM.
 */
import { paymentProviderSettings } from '../settings';
import { runPaymentProvider } from './main';

async function main(): Promise<void> {
  const { host, port } = paymentProviderSettings(process.env);
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/reservation_saga';
  const provider = await runPaymentProvider({ databaseUrl, host, port });
  process.stderr.write(`payment-provider: listening on ${provider.url} (tables in schema payment_provider of the configured database)\n`);
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
  });
  await provider.close();
  process.stderr.write('payment-provider: stopped\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`payment-provider: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
