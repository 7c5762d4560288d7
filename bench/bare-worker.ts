/**
 * The bench worker: the workflows of bench/workflows.ts and no-op activities, with the same Worker
 * settings as src/worker.ts. Run as a process (like `npm run worker`); reads the same environment.
 */
import { Worker } from '@temporalio/worker';
import { loadConfigOrExit } from '../src/config';
import { connectWorker, dataConverterOf } from '../src/temporal';
import { createBenchActivities } from './activities';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const connection = await connectWorker(config.temporal);
  try {
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      workflowsPath: require.resolve('./workflows'),
      activities: createBenchActivities(),
      shutdownGraceTime: '10 seconds',
      // The sagas' data converter: the bench client encrypts every start, bare or saga, alike.
      dataConverter: dataConverterOf(config),
    });
    process.stderr.write(`worker: polling ${config.temporal.address} namespace=${config.temporal.namespace} task-queue=${config.temporal.taskQueue}\n`);
    await worker.run();
  } finally {
    await connection.close();
  }
  process.stderr.write('worker: stopped\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
