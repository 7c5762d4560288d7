/**
 * The library API for starting and inspecting sagas. `start` is the gate: the request is validated
 * and reduced to its intent, the intent is reserved in Redis (SUCCESS adds one PostgreSQL point
 * lookup), and only a SUCCESS starts a workflow, with one start call. DUPLICATE and CONFLICT are
 * answered without Temporal and leave nothing behind.
 *
 * SagaClient is the face; its parts live under client/: the gate (client/gate.ts) and what a start
 * is asked and answers (client/start.ts), the reads (client/reads.ts), the operator verbs
 * (client/operator.ts), and what they share (client/core.ts: the options, the Temporal client, the
 * owner scope).
 */
import type { Client, Connection } from '@temporalio/client';
import type { Cluster, Redis } from 'ioredis';
import { loadConfig, requireCodecKeys, requireIntentSecret, type Config } from './config';
import { createPool } from './db/pool';
import type { SagaMetrics } from './metrics';
import { MAX_LEASE_MS, Rms } from './rms';
import { createRedis } from './rms/connection';
import { activeTracing } from './tracing';
import { loadTemporalTracing } from './tracing/env';
import { checkSagaTimings, sagaTypesOf, type SagaInputOf, type SagaList, type SagaNameOf } from './sagas';
import { DEFAULT_COMPENSATION_ATTEMPTS, DEFAULT_OWNER, type SagaInput, type SagaSignalReceipt, type SagaState } from './shared/saga';
import { checkOwner, ClientCore, temporalClientLibrary, temporalDefinitions, type OwnerScope, type SagaClientOptions } from './client/core';
import * as operator from './client/operator';
import * as reads from './client/reads';
import type { ListFilter, SagaSummary } from './client/reads';
import { SagaGate } from './client/gate';
import type { GateCounts, StartedSaga, StartOptions } from './client/start';

export { SagaEndedError, type OwnerScope, type SagaClientOptions, type TemporalOnFirstUse } from './client/core';
export { MAX_WAIT_MS, type GateCounts, type StartedSaga, type StartOptions } from './client/start';
export type { ListFilter, SagaSummary } from './client/reads';
export { RedriveError, SettleError, SignalError } from './client/operator';
export { DEFAULT_OWNER };

/** Options of {@link SagaClient.connect}. */
export interface SagaClientConnectOptions<S extends SagaList = SagaList> {
  /**
   * The app's saga types: the ones its workers run. A list (or object) of declarations made by
   * `defineSaga` and `defineOperation` types the client's starts: `start` takes only their names,
   * each with its own input, and a misspelt name does not compile.
   */
  sagas: S;
  /** The settings. @default `loadConfig(process.env)` */
  config?: Config;
  /** Attempts of a compensation its other system refuses (`CompensationRefusedError`), for the sagas it starts; other failures are retried by the compensation's policy (DEFAULT_COMPENSATION_RETRY unless its type declares one). @default 5 */
  compensationAttempts?: number;
  /**
   * When to connect to Temporal: `now`, or `on first use` (see {@link TemporalOnFirstUse}: a request
   * rejected at the gate then costs no Temporal client at all, as the CLI wants; Temporal out of
   * reach surfaces at the first call that needs it). @default 'now'
   */
  temporal?: 'now' | 'on first use';
  /** The process's metrics (see {@link SagaClientOptions.metrics}). @default none */
  metrics?: SagaMetrics;
  /** Who the client acts for (see {@link SagaClientOptions.owner}). @default {@link DEFAULT_OWNER} */
  owner?: string;
  /** An operator's client, which reaches every owner's sagas (see {@link SagaClientOptions.operator}). @default false */
  operator?: boolean;
}

/**
 * Starts, finds and inspects sagas. `S`: the app's saga types, as {@link SagaClient.connect} was
 * given them; they type {@link start}. A client made without them takes any name and input.
 */
export class SagaClient<S extends SagaList = SagaList> {
  readonly #core: ClientCore;
  readonly #close?: () => Promise<void>;
  readonly #gate: SagaGate;

  /** @throws TypeError for timings a worker would refuse (see TIMING_BOUNDS). */
  constructor(options: SagaClientOptions, close?: () => Promise<void>) {
    checkSagaTimings(options.timings);
    const { pickupLeaseMs } = options;
    if (pickupLeaseMs !== undefined && !(Number.isSafeInteger(pickupLeaseMs) && pickupLeaseMs >= options.timings.leaseMs && pickupLeaseMs <= MAX_LEASE_MS)) {
      throw new TypeError(`SagaClient pickupLeaseMs: must be a whole number of milliseconds from timings.leaseMs (${options.timings.leaseMs}) to ${MAX_LEASE_MS} (got ${pickupLeaseMs})`);
    }
    checkOwner(options.owner ?? DEFAULT_OWNER, 'SagaClient owner');
    if (options.operator !== undefined && typeof options.operator !== 'boolean') throw new TypeError(`SagaClient operator: must be a boolean (got ${JSON.stringify(options.operator)})`);
    this.#core = new ClientCore(options);
    this.#close = close;
    this.#gate = new SagaGate(this.#core);
  }

  /**
   * Connects to Temporal, Redis and PostgreSQL with the config's settings, accepting the app's saga
   * types (`sagas`); {@link close} closes what it opened. With `temporal: 'on first use'`, Temporal
   * is connected by the first call that needs it.
   * @throws ConfigError for a bad or missing setting; SagaDeclarationError for a malformed saga type;
   * TypeError for timings (with `compensationAttempts`) a worker would refuse, before connecting.
   */
  static async connect<const S extends SagaList>(options: SagaClientConnectOptions<S>): Promise<SagaClient<S>> {
    const types = sagaTypesOf(options.sagas);
    const config = options.config ?? loadConfig(process.env);
    const compensationAttempts = options.compensationAttempts ?? DEFAULT_COMPENSATION_ATTEMPTS;
    checkSagaTimings({ ...config.saga, compensationAttempts });
    const intentSecret = requireIntentSecret(config);
    requireCodecKeys(config);
    const { namespace } = config.temporal;
    let connection: Promise<Connection> | undefined;
    const connectTemporal = async (): Promise<Client> => {
      // The saga's definitions too, so that no call pays for loading them after connecting.
      const [{ Client }, { connectClient, dataConverterOf }] = await Promise.all([temporalClientLibrary(), import('./temporal.js'), temporalDefinitions()]);
      const dataConverter = dataConverterOf(config);
      connection = connectClient(config.temporal);
      // With tracing on, the workflow start carries the trace on to the workflow and its activities.
      const interceptors = activeTracing() ? { workflow: [new (await loadTemporalTracing()).OpenTelemetryWorkflowClientInterceptor()] } : undefined;
      return new Client({ connection: await connection, namespace, dataConverter, interceptors });
    };
    const client = options.temporal === 'on first use' ? { namespace, connectOnFirstUse: connectTemporal } : await connectTemporal();
    const redis: Redis | Cluster = createRedis(config.redis);
    const pool = createPool(config.db);
    return new SagaClient(
      {
        client,
        rms: new Rms(redis, { keyPrefix: config.redis.keyPrefix }),
        pool,
        taskQueue: config.temporal.taskQueue,
        uiUrl: `${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}`,
        timings: { ...config.saga, compensationAttempts },
        types,
        intentSecret,
        existsTtlMs: config.entityExistsTtlMs,
        pickupLeaseMs: config.pickupLeaseMs,
        keyRetentionMs: config.idempotencyRetentionMs,
        metrics: options.metrics,
        ...(options.owner === undefined ? {} : { owner: options.owner }),
        ...(options.operator === undefined ? {} : { operator: options.operator }),
      },
      async () => {
        await Promise.allSettled([connection?.then((c) => c.close()), redis.quit().catch(() => redis.disconnect()), pool.end()]);
      },
    );
  }

  /** Closes the connections opened by {@link connect}. */
  async close(): Promise<void> {
    await this.#close?.();
  }

  /**
   * The Temporal client underneath.
   * @throws Error when it is made on first use (TemporalOnFirstUse) and no call has needed it yet.
   */
  get temporal(): Client {
    const temporal = this.#core.madeTemporal;
    if (!temporal) throw new Error('SagaClient: Temporal is connected on first use, and no call has used it yet');
    return temporal;
  }

  /** The answers this client's `start` gave so far, by status (retries of one key included). */
  get gateCounts(): Readonly<GateCounts> {
    return this.#gate.counts;
  }

  /** The saga's page in the Temporal UI. */
  url(workflowId: string): string {
    return this.#core.url(workflowId);
  }

  /** Validates a request without starting anything (SagaInputError when it is bad), for the client's owner or `owner`. */
  prepare(type: string, data: unknown, idempotencyKey?: string, owner?: string): SagaInput {
    return this.#gate.prepare(type, data, { idempotencyKey, owner });
  }

  /**
   * The gate. Validates the request, reserves its intent and answers:
   * - DUPLICATE (the entity of another request exists) or CONFLICT (another request holds the
   *   intent; retry after `retryAfterMs`): no workflow is started, nothing durable is written, and
   *   the same key may be retried later for a fresh answer;
   * - SUCCESS: the saga was started, with the reservation, in one start call;
   * - for a key whose saga exists: the same SUCCESS and token while it runs, its recorded answer
   *   and `outcome` once it ended (from the saga's memo and search attributes: no worker needed).
   * Bad input, or the same key with another payload, throws SagaInputError and starts nothing.
   * Redis, PostgreSQL or Temporal out of reach throws their error; nothing is started, and a lease
   * taken for a saga that may not exist ends with its lease. A client connected with declared saga
   * types takes only their names, each with its own input (checked again at run time, as always).
   */
  async start<K extends SagaNameOf<S>>(type: K, data: SagaInputOf<S, K>, options: StartOptions = {}): Promise<StartedSaga> {
    return this.#gate.start(type, data, options);
  }

  /**
   * Waits for the saga to end and returns its final state (read from its history: no worker needed
   * once it has ended), a REJECTED saga's included. A saga of another owner than the call's scope
   * ({@link OwnerScope}) is answered as a missing one.
   * @throws WorkflowFailedError when its workflow failed without a state (input the worker refused),
   * was terminated or timed out; WorkflowNotFoundError when there is no such saga (of the scope's owner).
   */
  async result(workflowId: string, options: OwnerScope = {}): Promise<SagaState> {
    return reads.result(this.#core, workflowId, options);
  }

  /**
   * The saga's state and its execution status: a running saga's from its `state` query (answered by
   * a worker), an ended one's from its history, with no worker. A saga stopped without a state
   * (terminated, timed out, or failed before its plan) is described by its memo and search
   * attributes: its outcome TERMINATED, TIMED_OUT or FAILED, its last phase, and an error saying so.
   * A saga of another owner than the call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws WorkflowNotFoundError when there is no such saga (of the scope's owner).
   */
  async status(workflowId: string, options: OwnerScope = {}): Promise<{ workflowId: string; status: string; state: SagaState; url: string }> {
    return reads.status(this.#core, workflowId, options);
  }

  /** Lists sagas by search attributes, newest first: those of the filter's owner scope ({@link OwnerScope}). */
  async list(filter: ListFilter = {}): Promise<SagaSummary[]> {
    return reads.list(this.#core, filter);
  }

  /**
   * Requests cancellation; a saga past its reservation then runs its compensations. A saga of
   * another owner than the call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws SagaEndedError when the saga has already ended (nothing to cancel); WorkflowNotFoundError
   * when there is no such saga (of the scope's owner).
   */
  async cancel(workflowId: string, options: OwnerScope = {}): Promise<void> {
    return operator.cancel(this.#core, workflowId, options);
  }

  /**
   * Retries the compensations that a saga waiting in NEEDS_ATTENTION could not finish, once an
   * operator fixed their cause (each in its order, `undoEntity` last; none that succeeded runs
   * again), and answers the saga's state after that round: ended (COMPENSATED, or EXPIRED when its
   * deadline made it compensate) or waiting again in NEEDS_ATTENTION, the new failures in its
   * `errors`. Redrives sent together are answered by one round. A saga of another owner than the
   * call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws RedriveError when the saga does not wait in NEEDS_ATTENTION (it runs its steps,
   * compensates, its wait has ended, or it has ended, also while the redrive was on its way):
   * nothing was run. WorkflowNotFoundError when
   * there is no such saga (of the scope's owner).
   */
  async redrive(workflowId: string, options: OwnerScope = {}): Promise<SagaState> {
    return operator.redrive(this.#core, workflowId, options);
  }

  /**
   * Sends the signal `signal` to the saga `workflowId`, for a wait of its plan (see
   * `SagaStepPlan.wait`): a payment confirmed, an item collected. It is recorded once: a repeat
   * answers `first: false` and changes nothing (the first payload stands), so a sender may retry
   * freely. It may come before the saga reaches its wait. The payload (at most MAX_PAYLOAD_BYTES of
   * JSON) is what the steps after the wait find; it travels through the codec like the saga's input.
   * A saga of another owner than the call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws SignalError when the saga does not take it (it has ended, also while the signal was on
   * its way, its plan waits for no such signal, or that wait timed out): nothing was recorded. SagaInputError for a malformed name or
   * payload. WorkflowNotFoundError when there is no such saga (of the scope's owner).
   */
  async signal(workflowId: string, signal: string, payload?: unknown, options: OwnerScope = {}): Promise<SagaSignalReceipt> {
    return operator.signal(this.#core, workflowId, signal, payload, options);
  }

  /**
   * An operator's way out for a saga that ended COMPENSATION_FAILED, once what it could not undo has
   * been settled by hand: its row stays REGISTERED (or PROCESSING) and its intent held, so the same
   * request is a DUPLICATE and every operation on its entity a CONFLICT, for good. `keep`: the entity
   * stands (its row becomes COMPLETED; operations find it); `undo`: it is undone as the saga's own
   * undoEntity would have done (its row COMPENSATED, its intent freed when the type's compensation
   * policy frees it, its lease given back). Both are fenced by the saga's token: a row a newer saga
   * owns is never touched. A saga of another owner than the client's is answered as a missing one,
   * as by {@link SagaClient.status} (an operator's client settles any).
   * @throws SettleError naming why nothing was changed: the saga did not end COMPENSATION_FAILED, is
   * no creation, or its row is not in a state this settles (a PROCESSING row is never kept).
   * WorkflowNotFoundError when there is no such saga (of the client's owner).
   */
  async settle(workflowId: string, how: 'keep' | 'undo'): Promise<{ workflowId: string; row: 'COMPLETED' | 'COMPENSATED'; intentFreed: boolean }> {
    return operator.settle(this.#core, workflowId, how);
  }
}
