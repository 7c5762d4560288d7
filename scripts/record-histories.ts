/**
 * Records the histories that test/workflows/replay.test.ts replays: a completed saga, a duplicate
 * and a compensated one, run for real against the dev stack (`make dev`). Run it when the workflow
 * changes on purpose (with a versioning plan for running sagas), and commit the files.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { SagaClient } from '../src/client';
import { loadConfigOrExit } from '../src/config';
import { createWorker } from '../src/worker';

async function main(): Promise<void> {
  const temporal = execFileSync(path.join(__dirname, 'ensure-temporal'), { encoding: 'utf8' }).trim();
  const config = loadConfigOrExit({ ...process.env, TEMPORAL_TASK_QUEUE: `record-${randomUUID()}` });
  const { worker, close } = await createWorker({ config });
  const client = await SagaClient.connect(config);
  const cart = (card: string, sku = 'widget', quantity = 1) => ({
    customer: `recorder-${randomUUID()}`,
    items: [{ sku, quantity, priceCents: 500 }],
    payment: { card },
  });
  try {
    await worker.runUntil(async () => {
      const completedCart = cart('4242424242424242');
      const runs = {
        completed: await client.start('order', completedCart),
        duplicate: undefined as unknown as Awaited<ReturnType<SagaClient['start']>>,
        compensated: await client.start('order', cart('4242424242424242', 'rare-coin', 2)),
      };
      await client.result(runs.completed.workflowId);
      runs.duplicate = await client.start('order', completedCart);
      for (const [name, run] of Object.entries(runs)) {
        const state = await client.result(run.workflowId);
        // The CLI writes the canonical proto JSON that the SDK's replayer reads.
        const history = execFileSync(temporal, ['workflow', 'show', '--workflow-id', run.workflowId, '--address', config.temporal.address, '--namespace', config.temporal.namespace, '--output', 'json']);
        writeFileSync(path.join(__dirname, '../test/workflows/histories', `${name}.json`), history);
        console.log(`${name}: ${run.workflowId} ${state.outcome}${state.reason ? ` (${state.reason})` : ''}`);
      }
    });
  } finally {
    await client.close();
    await close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
