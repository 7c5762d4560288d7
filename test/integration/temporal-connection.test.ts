/**
 * Closing a client while Temporal is unreachable. The SDK retries a call that failed UNAVAILABLE
 * from a timer that `Connection.close` does not clear; when it fired after the close, grpc-js threw
 * "Channel has been shut down" from inside it, an uncaught exception that ends the process, and the
 * call never settled (src/temporal.ts, closedChannelGuard).
 */
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { SagaClient } from '../../src/client';
import { testConfig } from '../helpers/context';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { sagaTypesFor } from '../fixtures/orders';

let proxy: TcpProxy;
beforeAll(async () => {
  proxy = await startTcpProxy(Number(new URL(`grpc://${inject('temporalAddress')}`).port));
});
afterAll(async () => {
  await proxy?.close();
});

/** What a call ended with: its error's message and its cause's, or that it succeeded. */
const outcome = (call: Promise<unknown>) =>
  call.then(
    () => 'succeeded',
    (err: Error) => `${err.message}: ${(err.cause as Error | undefined)?.message ?? ''}`,
  );

it('close() while Temporal is unreachable ends the call in flight with an error, throws nothing after, and refuses later calls', async () => {
  const config = testConfig('temporal connection closed while unreachable', { TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}` });
  const sagas = await SagaClient.connect({ sagas: sagaTypesFor({ simulations: false }), config });
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => void uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    proxy.cut();
    const inFlight = outcome(sagas.result('order-nobody'));
    // The interleaving under test: the call's first attempt fails at once on the cut link, so by now the
    // SDK waits to retry it (its retries last some 20 s) when the client closes.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await sagas.close();

    // Before the guard this never settled: the retry threw instead of ending the call. It ends when the
    // SDK's next retry comes due, at most 5 s after the close.
    const settled = await Promise.race([inFlight, new Promise((resolve) => setTimeout(resolve, 20_000, 'still pending 20 s after close()'))]);
    expect(settled).toMatch(/CANCELLED: the Temporal connection is closed/);
    expect(await outcome(sagas.result('order-nobody'))).toMatch(/CANCELLED: the Temporal connection is closed/);
    expect(uncaught).toEqual([]);
  } finally {
    process.off('uncaughtException', onUncaught);
    proxy.restore();
  }
});
