/**
 * The baseline worker: the hand-written order workflow (bench/baseline-workflow.ts) and its
 * activities, with the saga worker's Worker settings and PostgreSQL pool settings (src/db/pool.ts).
 * Run as a process (like `npm run worker`); reads the same environment, and PAYMENT_PROVIDER_URL for
 * the provider it charges through.
 */
import { Worker } from '@temporalio/worker';
import { loadConfigOrExit } from '../src/config';
import { createPool } from '../src/db/pool';
import { connectWorker, dataConverterOf } from '../src/temporal';
import { PaymentProviderClient } from '../examples/orders/src/provider/client';
import { paymentProviderSettings } from '../examples/orders/src/settings';
import { createBaselineActivities } from './baseline-activities';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const { url, timeoutMs } = paymentProviderSettings(process.env);
  const pool = createPool(config.db);
  const connection = await connectWorker(config.temporal);
  try {
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      workflowsPath: require.resolve('./baseline-workflow'),
      activities: createBaselineActivities({ pool, payments: new PaymentProviderClient({ baseUrl: url, timeoutMs }) }),
      shutdownGraceTime: '10 seconds',
      // The sagas' data converter: the bench client encrypts every start (the order carries a card number).
      dataConverter: dataConverterOf(config),
    });
    process.stderr.write(`worker: polling ${config.temporal.address} namespace=${config.temporal.namespace} task-queue=${config.temporal.taskQueue}\n`);
    await worker.run();
  } finally {
    await connection.close();
    await pool.end();
  }
  process.stderr.write('worker: stopped\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
