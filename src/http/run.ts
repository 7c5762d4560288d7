/**
 * `saga serve`'s composition root: a SagaClient from the config (as the CLI makes one), the HTTP API
 * on SAGA_SERVE_ADDRESS, and a graceful stop on SIGINT or SIGTERM: stop accepting, answer every
 * request already received, then close the client and the probes' connections.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { ConfigError, type Config } from '../config';
import { createPool } from '../db/pool';
import { SagaMetrics, serveMetrics, type MetricsEndpoint } from '../metrics';
import { createRedis } from '../rms/connection';
import { sagaTypesOf, type SagaList } from '../sagas';
import { createSagaServer } from './server';

/** A running `saga serve`. */
export interface RunningSagaServer {
  /** `http://host:port` it listens on (the port chosen, when the config says 0). */
  url: string;
  app: FastifyInstance;
  /** `http://host:port/metrics` of its metrics endpoint (METRICS_ADDRESS), when it has one. */
  metricsUrl?: string;
  /** Stops as a signal does; resolves once stopped (idempotent). */
  close: () => Promise<void>;
  /** Resolves once stopped, by a signal or {@link close}. */
  closed: Promise<void>;
}

/** Options of {@link runSagaServer}. */
export interface RunSagaServerOptions {
  /** The app's saga types (the workers' own): what it accepts, and its OpenAPI document. */
  sagas: SagaList;
  /** Signals that stop the server gracefully. @default ['SIGINT', 'SIGTERM'] */
  signals?: NodeJS.Signals[];
  /** Where it says what it does (never a token). @default standard error */
  log?: (line: string) => void;
  /** Whether Fastify logs each request (method, URL, status, timing). @default false */
  logRequests?: boolean;
  /** Where the JSON log lines (LOG_LEVEL) go. @default standard output */
  logStream?: { write(line: string): void };
}

/**
 * Connects to Temporal (now: the server starts only once Temporal answers), Redis and PostgreSQL,
 * and serves the HTTP API until a signal or {@link RunningSagaServer.close}.
 * @throws ConfigError when SAGA_SERVE_TOKENS (or a secret every client needs) is not set.
 */
export async function runSagaServer(config: Config, options: RunSagaServerOptions): Promise<RunningSagaServer> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (config.serve.clients.length === 0) {
    throw new ConfigError('SAGA_SERVE_TOKENS', 'is not set: saga serve answers only callers with a token (`<client id>:<token>`, comma-separated, one per client)');
  }
  const { SagaClient } = await import('../client.js');
  const types = sagaTypesOf(options.sagas);
  // The gate's metrics, on an endpoint of their own (never on the API's address, which needs a token).
  const metrics = config.observability.metrics ? new SagaMetrics({ types }) : undefined;
  const client = await SagaClient.connect({ sagas: types, config, metrics });
  // The readiness probes' own connections: SagaClient keeps its own to itself.
  const redis = createRedis(config.redis);
  const pool = createPool({ ...config.db, poolMax: 1 });
  let endpoint: MetricsEndpoint | undefined;
  const closeConnections = async () => {
    await Promise.allSettled([client.close(), redis.quit().catch(() => redis.disconnect()), pool.end(), endpoint?.close()]);
  };
  let app: FastifyInstance;
  try {
    app = createSagaServer({
      client,
      types,
      clients: config.serve.clients,
      bodyLimitBytes: config.serve.bodyLimitBytes,
      maxHeaderBytes: config.serve.maxHeaderBytes,
      requestTimeoutMs: config.serve.requestTimeoutMs,
      logger: options.logRequests ?? false,
      logLevel: config.observability.logLevel,
      logStream: options.logStream,
      readiness: {
        redis: async () => void (await redis.ping()),
        postgres: async () => void (await pool.query('SELECT 1')),
        temporal: async () => void (await client.temporal.connection.workflowService.getSystemInfo({})),
      },
    });
    await app.listen({ host: config.serve.host, port: config.serve.port });
    if (metrics && config.observability.metrics) endpoint = await serveMetrics(metrics.registry, config.observability.metrics);
  } catch (err) {
    await closeConnections();
    throw err;
  }
  const { port } = app.server.address() as AddressInfo;
  const url = `http://${config.serve.host}:${port}`;

  const signals = options.signals ?? ['SIGINT', 'SIGTERM'];
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));
  let stopping: Promise<void> | undefined;
  const close = () => {
    stopping ??= (async () => {
      log(`serve: stopping; answering the ${app.sagaStats.inFlight} request(s) under way`);
      // Stops accepting, answers the requests received (idle keep-alive connections are closed).
      await app.close();
      await closeConnections();
      log(`serve: stopped after ${app.sagaStats.received} request(s)`);
      // Only now: while stopping, a second signal is ours to ignore (a process with no listener left
      // would be ended by it, or by a loader's handler that exits when it is the last one).
      for (const signal of signals) process.off(signal, onSignal);
      resolveClosed();
    })();
    return stopping;
  };
  const onSignal = () => void close();
  for (const signal of signals) process.on(signal, onSignal);
  log(
    `serve: listening on ${url} for ${config.serve.clients.length} client(s) (${config.serve.clients.map((c) => c.id).join(', ')}); task queue ${config.temporal.taskQueue}; body limit ${config.serve.bodyLimitBytes} B, deadline ${config.serve.requestTimeoutMs} ms`,
  );
  if (endpoint) log(`serve: metrics on ${endpoint.url}`);
  return { url, app, close, closed, ...(endpoint ? { metricsUrl: endpoint.url } : {}) };
}
