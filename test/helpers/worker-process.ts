/**
 * A worker process on the workflow code the test run bundled once (WORKFLOW_BUNDLE_PATH), for tests
 * that start and kill many of them (`startWorkerProcess` with `prebundled`): the app's saga module,
 * activities and Worker of `npm run worker` (createWorker), without bundling the workflow sources
 * again in each process, which takes most of a minute on a loaded 2-core machine. It says
 * `worker: polling` as `npm run worker` does, and stops on SIGTERM.
 */
import { Runtime } from '@temporalio/worker';
import { loadConfig } from '../../src/config';
import { jsonLogger } from '../../src/logging/json-logger';
import { loadSagaModule, locateSagaModule } from '../../src/sagas/load';
import { createWorker } from '../../src/worker';

async function main(): Promise<void> {
  const codePath = process.env.WORKFLOW_BUNDLE_PATH;
  if (!codePath) throw new Error('WORKFLOW_BUNDLE_PATH names no workflow bundle');
  const config = loadConfig(process.env);
  Runtime.install({ logger: jsonLogger(config.observability.logLevel) });
  const sagas = await loadSagaModule(locateSagaModule(), config);
  const { worker, close } = await createWorker({ sagas, config, workflowBundle: { codePath } });
  process.once('SIGTERM', () => worker.shutdown());
  process.stderr.write(`worker: polling ${config.temporal.address} task-queue=${config.temporal.taskQueue} (prebundled)\n`);
  try {
    await worker.run();
  } finally {
    await close();
  }
  process.stderr.write('worker: stopped\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
