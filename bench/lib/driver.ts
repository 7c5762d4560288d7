/**
 * A load driver in a process of its own (`node --import tsx bench/lib/driver.ts`), so that a benchmark
 * can compare two set-ups of the client side that cannot share one process: one with metrics and
 * traces, one without. It connects a SagaClient from its environment (src/config.ts's variables; with
 * `DRIVER_METRICS=true`, a SagaMetrics as `saga serve` has one; with the OTEL_* variables, traces, as
 * the CLI starts them) and runs the loads its parent sends over IPC, answering with their figures.
 */
// First: with traces asked for, the instrumentations are registered before ioredis and pg load.
import '../../src/tracing/preload';
import { randomUUID } from 'node:crypto';
import { SagaClient } from '../../src/client';
import { loadConfig } from '../../src/config';
import { SagaMetrics } from '../../src/metrics';

import { startTracingIfRequested } from '../../src/tracing';
import { closedLoop, timed } from './load';
import { latencyPercentiles } from './stats';
import { completeOrderSaga } from './temporal-load';
import { sagaTypesOf } from '../../src/sagas';
import { orderSagas } from '../../examples/orders/src/sagas';

/** A load the parent asks for: one saga to completion, DUPLICATE answers of a completed cart, or sagas. */
export type DriverLoad =
  | { kind: 'complete'; cart: unknown }
  | { kind: 'duplicates'; cart: unknown; concurrency: number; durationMs: number; maxOps: number }
  | { kind: 'sagas'; concurrency: number; durationMs: number; maxOps: number };

/** A load with the id its reply carries. */
export type DriverRequest = DriverLoad & { id: number };

/** The driver's answer: the load's figures, or why it failed. */
export type DriverReply = { id: number; ok: true; ops: number; throughput: number; p50: number; p99: number } | { id: number; ok: false; error: string };

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const tracing = await startTracingIfRequested('bench-driver');
  const types = sagaTypesOf(orderSagas({ simulations: config.simulations }));
  const metrics = process.env.DRIVER_METRICS === 'true' ? new SagaMetrics({ types }) : undefined;
  const sagas = await SagaClient.connect({ sagas: types, config, metrics });

  const handle = async (req: DriverRequest): Promise<DriverReply> => {
    if (req.kind === 'complete') {
      await completeOrderSaga(sagas, 'driver', req.cart);
      return { id: req.id, ok: true, ops: 1, throughput: Number.NaN, p50: Number.NaN, p99: Number.NaN };
    }
    const r = await closedLoop({
      concurrency: req.concurrency,
      durationMs: req.durationMs,
      maxOps: req.maxOps,
      op:
        req.kind === 'duplicates'
          ? async () => {
              const { result, ms } = await timed(() => sagas.start('order', req.cart, { idempotencyKey: randomUUID() }));
              if (result.reservation.status !== 'DUPLICATE') throw new Error(`expected DUPLICATE, got ${result.reservation.status}`);
              return ms;
            }
          : async () => (await timed(() => completeOrderSaga(sagas, 'driver'))).ms,
    });
    const { p50, p99 } = latencyPercentiles(r.latencies, r.samples);
    return { id: req.id, ok: true, ops: r.ops, throughput: r.throughput, p50, p99 };
  };

  process.on('message', (req: DriverRequest) => {
    void handle(req).then(
      (reply) => process.send!(reply),
      (err: unknown) => process.send!({ id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) } satisfies DriverReply),
    );
  });
  process.once('disconnect', () => {
    void sagas
      .close()
      .then(() => tracing?.shutdown())
      .finally(() => process.exit(0));
  });
  process.send!({ ready: true });
}

main().catch((err: unknown) => {
  process.stderr.write(`driver: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
