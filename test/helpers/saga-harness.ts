/**
 * A worker and a SagaClient for one test file: its own task queue and Redis key prefix on the run's
 * dev server and database (see global-setup.ts), with short leases so lease behaviour is quick to see,
 * and the saga simulations on (SAGA_SIMULATIONS: an order may ask for a long write or slow steps).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, type ActivityInterceptorsFactory, type WorkerOptions } from '@temporalio/worker';
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import { inject } from 'vitest';
import { SagaClient, type SagaClientOptions } from '../../src/client';
import { requireIntentSecret, type Config } from '../../src/config';
import { createPool } from '../../src/db/pool';

import { Rms } from '../../src/rms';
import { createRedis } from '../../src/rms/connection';
import { dataConverterOf } from '../../src/temporal';
import { createWorker, type AppWorker, type StartWorkerOptions } from '../../src/worker';
import { decodeEntityId, type SagaTypes } from '../../src/sagas';
import { TEST_INTENT_SECRET } from './secrets';
import type { SagaTimings } from '../../src/shared';
import { testConfig } from './context';
import { createProviderServer, ensureProviderSchema, PaymentProviderClient, type ProviderCharge, sagaTypesFor, type SimulatedOrderInput } from '../fixtures/orders';

/** Short timings: lease 3 s, beats every 300 ms, heartbeat timeout 1.5 s. */
export const FAST_TIMINGS = { LEASE_MS: '3000', HEARTBEAT_INTERVAL_MS: '300', HEARTBEAT_TIMEOUT_MS: '1500' };

/** What every harness sets besides its timings: the saga types with their test knobs. */
export const TEST_ENV = { SAGA_SIMULATIONS: 'true' };

export interface SagaHarness {
  config: Config;
  /** An operator's client ({@link SagaClientOptions.operator}) whose starts run for the default owner, `app`. */
  client: SagaClient;
  /** Redis and PostgreSQL clients of the test's own, for arranging and asserting. */
  redis: Redis | Cluster;
  pool: Pool;
  rms: Rms;
  /**
   * Another SagaClient on the same connections (its own in-flight sharing), with other timings and
   * options if given; of the default owner, and no operator's, unless given.
   */
  newClient: (timings?: Partial<SagaTimings>, options?: Pick<SagaClientOptions, 'pickupLeaseMs' | 'owner' | 'operator'>) => SagaClient;
  /** The options {@link newClient} makes its client with (for a test that needs the client's parts). */
  clientOptions: (timings?: Partial<SagaTimings>, options?: Pick<SagaClientOptions, 'pickupLeaseMs' | 'owner' | 'operator'>) => SagaClientOptions;
  /** The in-process worker, unless started with `worker: false`. */
  app?: AppWorker;
  /** The saga types of worker and client (the order app's, calling {@link payments}, unless given). */
  types: SagaTypes;
  /** The payment provider of this harness (in-process, real HTTP, at `providerUrl`). */
  payments: PaymentProviderClient;
  /** The provider's base URL (what PAYMENT_PROVIDER_URL names for worker processes of this harness). */
  providerUrl: string;
  /** The provider's charges of one saga (by the reference the order's charge sends: its saga key). */
  chargesOf: (sagaKey: string) => Promise<ProviderCharge[]>;
  stop: () => Promise<void>;
}

/**
 * Starts a payment provider, a worker (unless `worker: false`) and a client for the test file named
 * `name`. Worker and client run `sagaTypes` if given (or made from the config and the provider's URL,
 * when a function), else the order app's (with simulations, unless `env` turns SAGA_SIMULATIONS off).
 */
export async function startHarness(
  name: string,
  options: { worker?: boolean; env?: NodeJS.ProcessEnv; sagaTypes?: SagaTypes | ((config: Config, providerUrl: string) => SagaTypes) } = {},
): Promise<SagaHarness> {
  const pool = createPool(testConfig(name, { ...options.env }).db);
  await ensureProviderSchema(pool);
  const provider = createProviderServer({ pool });
  await provider.listen({ host: '127.0.0.1', port: 0 });
  const providerUrl = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;
  const config = testConfig(name, { ...FAST_TIMINGS, ...TEST_ENV, ...options.env });
  // The order app reads its provider from the environment: worker and CLI processes this file starts
  // inherit it (each test file runs in a process of its own).
  process.env.PAYMENT_PROVIDER_URL = providerUrl;
  const types = typeof options.sagaTypes === 'function' ? options.sagaTypes(config, providerUrl) : (options.sagaTypes ?? sagaTypesFor(config, providerUrl));
  const payments = new PaymentProviderClient({ baseUrl: providerUrl, timeoutMs: 5000 });
  let app: AppWorker | undefined;
  let running: Promise<void> = Promise.resolve();
  let nativeConnection: NativeConnection | undefined;
  if (options.worker !== false) {
    nativeConnection = await NativeConnection.connect({ address: config.temporal.address });
    app = await createWorker({ config, connection: nativeConnection, workflowBundle: { codePath: inject('workflowBundlePath') }, sagas: types });
    running = app.worker.run();
  }
  const redis = createRedis(config.redis);
  const rms = new Rms(redis, { keyPrefix: config.redis.keyPrefix });
  const connection = await Connection.connect({ address: config.temporal.address });
  const temporal = new Client({ connection, namespace: config.temporal.namespace, dataConverter: dataConverterOf(config) });
  const clientOptions = (timings: Partial<SagaTimings> = {}, options: Pick<SagaClientOptions, 'pickupLeaseMs' | 'owner' | 'operator'> = {}): SagaClientOptions => ({
    ...options,
    client: temporal,
    rms,
    pool,
    taskQueue: config.temporal.taskQueue,
    uiUrl: `${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}`,
    timings: { ...config.saga, compensationAttempts: 2, ...timings },
    types,
    intentSecret: requireIntentSecret(config),
    existsTtlMs: config.entityExistsTtlMs,
    keyRetentionMs: config.idempotencyRetentionMs,
  });
  const newClient: SagaHarness['newClient'] = (timings, options) => new SagaClient(clientOptions(timings, options));
  return {
    config,
    // The tests' view from outside: its reads reach every owner's sagas, as the operator's CLI does;
    // its starts run for the default owner.
    client: newClient({}, { operator: true }),
    newClient,
    clientOptions,
    redis,
    pool,
    rms,
    app,
    types,
    payments,
    providerUrl,
    chargesOf: (sagaKey) => payments.chargesByReference(sagaKey),
    stop: async () => {
      app?.worker.shutdown();
      await running;
      await app?.close();
      await nativeConnection?.close();
      await connection.close();
      redis.disconnect();
      await provider.close();
      await pool.end();
    },
  };
}

/**
 * A valid order for a customer of its own (so its intent is new), with overrides; `simulate` only
 * with the simulations on (as every harness has them).
 */
export function order(overrides: Partial<SimulatedOrderInput> = {}): SimulatedOrderInput {
  return {
    customer: `customer-${randomUUID()}`,
    items: [
      { sku: 'widget', quantity: 2, priceCents: 1250 },
      { sku: 'gadget', quantity: 1, priceCents: 4999 },
    ],
    payment: { card: '4242424242424242' },
    ...overrides,
  };
}

/** Polls `read` until `done` holds for its value (each poll awaits the previous; 20 ms apart). */
export async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * How `promise` settled within `ms`, or `undefined` when it had not by then: a bounded wait for an
 * answer that may never come (a test then fails on what it expected, instead of hanging).
 */
export async function settledWithin<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined)));
  try {
    return await Promise.race([promise.then((value) => ({ value }), (error: unknown) => ({ error })), bound]);
  } finally {
    clearTimeout(timer);
  }
}

/** The row id an entity id handed to a caller names in `table` (the tests' intent secret). */
export function rowIdOf(entityId: string, table = 'orders'): string {
  const row = decodeEntityId(TEST_INTENT_SECRET, table, entityId);
  if (row === undefined) throw new Error(`${entityId} names no row of ${table}`);
  return row;
}

/**
 * Runs an in-process worker of `sagas` under `config` (with `workerOptions`, if given) until `fn`
 * resolves, then stops it; what it opened is closed on every path, a worker that refuses to start included.
 */
export async function withWorker<T>(
  worker: { config: Config; sagas: SagaTypes; workerOptions?: StartWorkerOptions['workerOptions']; metrics?: StartWorkerOptions['metrics'] },
  fn: () => Promise<T>,
): Promise<T> {
  const connection = await NativeConnection.connect({ address: worker.config.temporal.address });
  try {
    const app = await createWorker({
      sagas: worker.sagas,
      config: worker.config,
      connection,
      workflowBundle: { codePath: inject('workflowBundlePath') },
      ...(worker.workerOptions ? { workerOptions: worker.workerOptions } : {}),
      ...(worker.metrics ? { metrics: worker.metrics } : {}),
    });
    try {
      return await app.worker.runUntil(fn);
    } finally {
      await app.close();
    }
  } finally {
    await connection.close();
  }
}

/** A failed attempt of an activity, as {@link activityFailures} records it. */
export interface ActivityFailure {
  workflowId: string | undefined;
  /** The ApplicationFailure's type, or the error's class name. */
  type: string;
}

/**
 * Records every failed attempt of the activity (or local activity) named `activity` that a worker
 * runs with `workerOptions`: what a test reads when the workflow that ran it is gone (deleted).
 */
export function activityFailures(activity: string): { failures: ActivityFailure[]; workerOptions: Partial<WorkerOptions> } {
  const failures: ActivityFailure[] = [];
  const recorder: ActivityInterceptorsFactory = (ctx) => ({
    inbound: {
      async execute(input, next) {
        try {
          return await next(input);
        } catch (err) {
          if (ctx.info.activityType === activity) {
            const type = err instanceof ApplicationFailure && err.type ? err.type : err instanceof Error ? err.name : typeof err;
            failures.push({ workflowId: ctx.info.workflowExecution?.workflowId, type });
          }
          throw err;
        }
      },
    },
  });
  return { failures, workerOptions: { interceptors: { activity: [recorder] } } };
}
