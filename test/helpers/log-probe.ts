/**
 * A process that makes a worker as an app's own process does (createWorker, on the run's workflow
 * bundle), runs it while it writes one entry of each level to the Temporal runtime's log, and exits: what its
 * standard output shows is what that app's log would show. With PROBE_OWN_RUNTIME=1 it installs a
 * runtime of its own first, whose lines start with `own:`.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { loadConfig } from '../../src/config';
import { createWorker } from '../../src/worker';
import { sagaTypes } from '../fixtures/orders';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  if (process.env.PROBE_OWN_RUNTIME === '1') Runtime.install({ logger: new DefaultLogger('TRACE', (entry) => process.stdout.write(`own: ${entry.level} ${entry.message}\n`)) });
  const { worker, close } = await createWorker({ sagas: sagaTypes, config, workflowBundle: { codePath: process.env.WORKFLOW_BUNDLE_PATH! } });
  await worker.runUntil(async () => {
    const { logger } = Runtime.instance();
    logger.info('probe info');
    logger.warn('probe warn', { error: new Error('expected in the probe') });
    logger.error('probe error');
  });
  await close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`log-probe: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
