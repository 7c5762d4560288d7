/**
 * The demo: runs the smoke workflow through a worker against the dev stack started by `make dev`,
 * and prints its result with a link to it in the Temporal UI.
 */
import { Client } from '@temporalio/client';
import { loadConfigOrExit } from '../src/config';
import { connectClient } from '../src/temporal';
import { createWorker } from '../src/worker';
import { smokeWorkflow } from '../src/workflows';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const { worker, close } = await createWorker({ config });
  const connection = await connectClient(config.temporal);
  const client = new Client({ connection, namespace: config.temporal.namespace });
  const workflowId = `smoke-demo-${Date.now()}`;
  try {
    const result = await worker.runUntil(
      client.workflow.execute(smokeWorkflow, { taskQueue: config.temporal.taskQueue, workflowId, args: ['demo'] }),
    );
    console.log(`smoke workflow ${workflowId}: ${JSON.stringify(result)}`);
    console.log(`UI: ${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}/workflows/${workflowId}`);
  } finally {
    await connection.close();
    await close();
  }
}

main().catch((err: unknown) => {
  console.error(`demo: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
