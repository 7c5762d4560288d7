/** Connections to Temporal built from the config: plain for the dev server, TLS/API key for a cluster or Cloud. */
import type { AsyncLocalStorage } from 'node:async_hooks';
import { readFileSync } from 'node:fs';
import { InterceptingCall, Metadata, status, type Interceptor, type NextCall } from '@grpc/grpc-js';
import { Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { TLSConfig } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { createDataConverter } from './codec/encryption-codec';
import { requireCodecKeys, type Config } from './config';

function tlsOf(temporal: Config['temporal']): TLSConfig | undefined {
  const tls = temporal.tls;
  if (!tls) return undefined;
  return {
    serverNameOverride: tls.serverName,
    serverRootCACertificate: tls.caPath ? readFileSync(tls.caPath) : undefined,
    clientCertPair:
      tls.certPath && tls.keyPath ? { crt: readFileSync(tls.certPath), key: readFileSync(tls.keyPath) } : undefined,
  };
}

/**
 * A call that ends at once with CANCELLED and `details`, never touching a channel: what a call made on
 * a closed connection becomes (see {@link closedChannelGuard}). It ends as grpc-js ends a unary call
 * that got no reply (every call of Temporal's services is unary): an empty message, then the status.
 */
function endedCall(details: string): ReturnType<NextCall> {
  return {
    start: (_metadata, listener) =>
      setImmediate(() => {
        listener?.onReceiveMessage?.(null);
        listener?.onReceiveStatus?.({ code: status.CANCELLED, details, metadata: new Metadata() });
      }),
    sendMessageWithContext: (context) => context.callback?.(),
    sendMessage: () => undefined,
    startRead: () => undefined,
    halfClose: () => undefined,
    cancelWithStatus: () => undefined,
    getPeer: () => '',
    getAuthContext: () => null,
  };
}

/**
 * The innermost gRPC interceptor of a client connection. The SDK's retry interceptor (1.24) waits
 * for a retry with a timer that `Connection.close` does not clear: a call in flight when the
 * connection closes, say while Temporal is unreachable, retried afterwards, and grpc-js threw
 * "Channel has been shut down" from inside that timer, an uncaught exception that ends the process,
 * while the call itself never settled. Here a call that cannot be made on the channel ends with
 * CANCELLED instead, which the retry interceptor does not retry: its caller gets the error.
 */
const closedChannelGuard: Interceptor = (options, nextCall) => {
  let call: ReturnType<NextCall>;
  try {
    call = nextCall(options);
  } catch (err) {
    call = endedCall(`the Temporal connection is closed (${err instanceof Error ? err.message : String(err)})`);
  }
  return new InterceptingCall(call);
};

/**
 * A client connection (for `SagaClient` and the CLI).
 *
 * `Connection.connect` checks the server under a deadline it sets through its AsyncLocalStorage. On
 * Node 20 the first `run` of any AsyncLocalStorage turns on an async hook that every promise of the
 * process pays for from then on, used or not: a gate answer is a few promises deep, and that was
 * about a fifth of its CPU (docs/performance-archive.md, section 13). Disabled once connected, the hook is off
 * again unless another storage needs it; a later call with a deadline or an abort signal
 * (`withAbortSignal`) enables it anew. The storage is a protected member of the SDK's (1.24):
 * a release without it costs speed, never the connection.
 */
export async function connectClient(temporal: Config['temporal']): Promise<Connection> {
  const connection = await Connection.connect({
    address: temporal.address,
    tls: tlsOf(temporal),
    apiKey: temporal.apiKey,
    // The SDK's default retries, then the guard, next to the channel (see closedChannelGuard).
    interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions()), closedChannelGuard],
  });
  (connection as unknown as { callContextStorage?: Partial<AsyncLocalStorage<unknown>> }).callContextStorage?.disable?.();
  return connection;
}

/**
 * The data converter of every process that talks to Temporal: payloads, failure messages and stack
 * traces encrypted with the config's codec keys (src/codec).
 * @throws ConfigError when SAGA_CODEC_KEYS is not set.
 */
export function dataConverterOf(config: Config): DataConverter {
  return createDataConverter(requireCodecKeys(config));
}

/** A worker connection. */
export async function connectWorker(temporal: Config['temporal']): Promise<NativeConnection> {
  // Loaded here, not at the top: the clients and the CLI import this module and need no worker.
  const { NativeConnection } = await import('@temporalio/worker');
  return NativeConnection.connect({ address: temporal.address, tls: tlsOf(temporal), apiKey: temporal.apiKey });
}
