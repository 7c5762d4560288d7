/**
 * The library API for starting and inspecting sagas. `start` is the gate: the request is validated
 * and reduced to its intent, the intent is reserved in Redis (SUCCESS adds one PostgreSQL point
 * lookup), and only a SUCCESS starts a workflow, with one start call. DUPLICATE and CONFLICT are
 * answered without Temporal and leave nothing behind.
 */
import type { Client, Connection, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import type { Cluster, Redis } from 'ioredis';
import type { Pool } from 'pg';
import { DEFAULT_PICKUP_LEASE_MS, loadConfig, requireCodecKeys, requireIntentSecret, type Config } from './config';
import { createPool } from './db/pool';
import { lockEntity, reserveIntent, undoEntity, type GateAnswer } from './gate';
import type { SagaMetrics } from './metrics';
import { MAX_LEASE_MS, Rms, sessionTag, type AdmitResult } from './rms';
import { createRedis } from './rms/connection';
import { activeTracing, inGateSpan, type UnderSpan } from './tracing';
import { checkSagaTimings, entityNotFound, isEntityOperation, limitsOf, MAX_PAYLOAD_BYTES, STEP_NAME_PATTERN, unkeyedRequestHash, prepareSaga, prepareSagaRequest, reservationMac, sagaLimitCounters, sagaDefinition, sagaRequestHash, sagaSessionId, sagaTypesOf, SagaInputError, type PrepareOptions, type SagaInputOf, type SagaList, type SagaNameOf, type SagaRequest, type SagaType, type SagaTypes } from './sagas';
import {
  DEFAULT_COMPENSATION_ATTEMPTS,
  DEFAULT_OWNER,
  ErrorType,
  RESERVATION_SAGA_WORKFLOW,
  SagaAbort,
  SagaOutcome,
  OWNER_PATTERN,
  SagaPhase,
  sagaWorkflowId,
  type ReservationAnswer,
  type SagaSignalReceipt,
  type SagaInput,
  type SagaLimitCounters,
  type SagaMemo,
  type SagaEnd,
  type SagaStart,
  type SagaState,
  type SagaTimings,
} from './shared/saga';
import type { reservationSaga } from './workflows/reservation-saga';

/**
 * A Temporal client made on first use: until a call needs Temporal (the gate answers DUPLICATE and
 * CONFLICT without it), neither the Temporal client library is loaded nor the server reached.
 */
export interface TemporalOnFirstUse {
  /** The sagas' namespace (the reservation's session is derived from it before Temporal is reached). */
  namespace: string;
  /** Connects a Temporal client on `namespace`; called once (again only after a failure). */
  connectOnFirstUse: () => Promise<Client>;
}

/** Options of {@link SagaClient}. */
export interface SagaClientOptions {
  /** A Temporal client on the sagas' namespace, or how to make one on first use. */
  client: Client | TemporalOnFirstUse;
  /** The RMS the gate reserves in (the workers' Redis and key prefix). */
  rms: Rms;
  /** PostgreSQL, for the truth check of a SUCCESS (the workers' database). */
  pool: Pool;
  /** Task queue the workers poll. */
  taskQueue: string;
  /** Base URL of the Temporal UI, for links. */
  uiUrl: string;
  /** Lease and heartbeat timings given to every saga started. */
  timings: SagaTimings;
  /** The saga types accepted (the workers' own). */
  types: SagaTypes;
  /** The intent-key secret, the workers' own (INTENT_KEY_SECRET). */
  intentSecret: Uint8Array;
  /** How long a marker the gate's read-repair writes lives (ENTITY_EXISTS_TTL_MS); none when undefined. */
  existsTtlMs?: number;
  /**
   * The lease the gate takes for a saga it answers SUCCESS, held until a worker runs the saga's write
   * (PICKUP_LEASE_MS): no other request for the intent is told SUCCESS while the saga waits for a
   * worker. At least `timings.leaseMs`. @default the larger of {@link DEFAULT_PICKUP_LEASE_MS} and `timings.leaseMs`
   */
  pickupLeaseMs?: number;
  /**
   * How long an ended saga's record, which answers its key's retries, is kept when the gate restores
   * it in Redis (IDEMPOTENCY_RETENTION_MS, the workers' own). @default DEFAULT_KEY_RETENTION_MS
   */
  keyRetentionMs?: number;
  /** Counts the gate's answers, their latency, the leases it takes and its read-repairs. @default none */
  metrics?: SagaMetrics;
  /**
   * Who the client acts for, unless a call names another ({@link StartOptions.owner},
   * {@link OwnerScope.owner}): the sagas it starts run for this owner (the entities they create are
   * this owner's, and only this owner's operations find them), and `status`, `result`, `cancel`,
   * `redrive`, `settle` and `list` reach only this owner's sagas. @default {@link DEFAULT_OWNER}
   */
  owner?: string;
  /**
   * An operator's client (the `saga` CLI's): `status`, `result`, `cancel`, `redrive`, `settle` and
   * `list` reach every owner's sagas, unless a call names an owner. Its starts still run for `owner`.
   * @default false
   */
  operator?: boolean;
}

export { DEFAULT_OWNER };

/** Longest wait {@link SagaClient.start} takes: an hour, far past any request's deadline. */
export const MAX_WAIT_MS = 3_600_000;

/** Options of {@link SagaClient.start}. */
export interface StartOptions {
  /** The caller's idempotency key: a retry with it is answered from its saga. @default a new UUID */
  idempotencyKey?: string;
  /**
   * How long to wait for the saga to end, in milliseconds: when it ends in time the answer carries
   * its `outcome` and `final` state, the same ones every caller of the key gets (the first, and a
   * retry while it runs); when it does not, the answer is the one without a wait. A DUPLICATE or
   * CONFLICT is answered at once: there is no saga to wait for. @default 0, answer at once
   */
  waitMs?: number;
  /**
   * Who this saga runs for, when not the client's owner (`saga serve` starts each HTTP client's
   * sagas as `http:<client id>`): 1-64 letters, digits and `. _ : -`. An operation on an entity
   * created for another owner is answered as one on a missing entity (ENTITY_NOT_FOUND).
   * @default the client's {@link SagaClientOptions.owner}
   */
  owner?: string;
  /**
   * How long the saga may take from its start, in ms: at most its type's `deadlineMs`, which it
   * defaults to. Past it the saga takes no further step, compensates and ends EXPIRED. A deadline
   * the type does not allow throws SagaInputError (INVALID_INPUT) before the gate.
   * @default the type's `deadlineMs` (none, if it declares none)
   */
  deadlineMs?: number;
}

/** The answer of {@link SagaClient.start}. */
export interface StartedSaga {
  /** The workflow id this idempotency key names (`<type>-<key>`), whether or not a saga exists. */
  workflowId: string;
  /** The saga's run; absent when the gate rejected the request and no saga was started. */
  runId?: string;
  intentKey: string;
  idempotencyKey: string;
  /** SUCCESS (a saga runs, or ran, for this key), DUPLICATE or CONFLICT (answered at the gate). */
  reservation: ReservationAnswer;
  /** Whether a saga exists for this key. False for DUPLICATE and CONFLICT answered at the gate. */
  started: boolean;
  /**
   * When this key's saga has already ended (a retry after the end), or ended while the call waited
   * (`waitMs`): how it ended, its outcome or, for a saga stopped without one, TERMINATED, TIMED_OUT
   * or FAILED. A saga that ended REJECTED, or FAILED before it had a plan, does not hold its key: a
   * later retry is a new attempt.
   */
  outcome?: SagaEnd;
  /** The saga's final state, when it ended while the call waited (`waitMs`): its entity id, steps and errors. */
  final?: SagaState;
  /**
   * Set on a CONFLICT answered because the caller is at a limit of its saga type (see
   * `SagaDefinition.limits`): of sagas in flight, or of starts per second. Nothing was started and
   * no lease is held; retry after `retryAfterMs`.
   */
  limited?: 'IN_FLIGHT' | 'RATE';
  /** Present when this key's saga existed before this call (a retry): the answer is that saga's, not a new one. */
  replayed?: true;
  /** The saga in the Temporal UI; absent when no saga was started. */
  url?: string;
}

/** One saga in a listing. */
export interface SagaSummary {
  workflowId: string;
  runId: string;
  status: string;
  type?: string;
  phase?: string;
  outcome?: string;
  intentKey?: string;
  startTime: string;
}

/** Filters of {@link SagaClient.list}. */
export interface ListFilter extends OwnerScope {
  type?: string;
  outcome?: string;
  phase?: string;
  /** At most this many (newest first). @default 100 */
  limit?: number;
  /** Only sagas whose workflow id starts with one of these (e.g. one HTTP client's `order-<client>.`). */
  workflowIdPrefixes?: readonly string[];
}

/**
 * Whose sagas a read, a cancellation or a redrive reaches: those of `owner`, and those whose memo
 * records no owner yet (started before owners were recorded, or by a plain Temporal client and not
 * yet planned). Another owner's saga is answered as a missing one.
 */
export interface OwnerScope {
  /** @default the client's `owner`; every owner for an operator's client (its `operator` option) */
  owner?: string;
}

/** How many answers the gate gave, by status: rejected requests have no saga page to count them by. */
export type GateCounts = Record<ReservationAnswer['status'], number>;

/** A start's request as the gate takes it: its hash is computed only when an answer needs it. */
type GateRequest = SagaRequest & { requestHash: () => string };

/** What one start call answers, before the fields every answer shares. */
type GateReply = Omit<StartedSaga, 'workflowId' | 'intentKey' | 'idempotencyKey'>;

const VISIBILITY_VALUE = /^[A-Za-z0-9_.:-]{1,200}$/;

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

/** The Temporal client library, loaded with the first connection (so free by the time one of its errors is checked). */
const temporalClientLibrary = () => import('@temporalio/client');

/**
 * The saga's search attributes, update and query: they load Temporal's libraries, so they are loaded
 * by the calls that reach Temporal (already loaded by then, but for the first of them).
 */
const temporalDefinitions = async () => {
  const [attributes, handlers] = await Promise.all([import('./shared/search-attributes.js'), import('./shared/handlers.js')]);
  return { ...attributes, ...handlers };
};

/**
 * Starts, finds and inspects sagas. `S`: the app's saga types, as {@link SagaClient.connect} was
 * given them; they type {@link start}. A client made without them takes any name and input.
 */
export class SagaClient<S extends SagaList = SagaList> {
  readonly #options: SagaClientOptions;
  readonly #close?: () => Promise<void>;
  readonly #counts: GateCounts = { SUCCESS: 0, DUPLICATE: 0, CONFLICT: 0 };
  /** The Temporal client once made, and its making while under way (TemporalOnFirstUse). */
  #temporal?: Client;
  #connecting?: Promise<Client>;

  /** @throws TypeError for timings a worker would refuse (see TIMING_BOUNDS). */
  constructor(options: SagaClientOptions, close?: () => Promise<void>) {
    checkSagaTimings(options.timings);
    const { pickupLeaseMs } = options;
    if (pickupLeaseMs !== undefined && !(Number.isSafeInteger(pickupLeaseMs) && pickupLeaseMs >= options.timings.leaseMs && pickupLeaseMs <= MAX_LEASE_MS)) {
      throw new TypeError(`SagaClient pickupLeaseMs: must be a whole number of milliseconds from timings.leaseMs (${options.timings.leaseMs}) to ${MAX_LEASE_MS} (got ${pickupLeaseMs})`);
    }
    checkOwner(options.owner ?? DEFAULT_OWNER, 'SagaClient owner');
    if (options.operator !== undefined && typeof options.operator !== 'boolean') throw new TypeError(`SagaClient operator: must be a boolean (got ${JSON.stringify(options.operator)})`);
    this.#options = options;
    this.#close = close;
    if (!('connectOnFirstUse' in options.client)) this.#temporal = options.client;
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
      const interceptors = activeTracing() ? { workflow: [new (await import('@temporalio/interceptors-opentelemetry')).OpenTelemetryWorkflowClientInterceptor()] } : undefined;
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
    if (!this.#temporal) throw new Error('SagaClient: Temporal is connected on first use, and no call has used it yet');
    return this.#temporal;
  }

  /** The Temporal client, made now if it is made on first use. */
  async #temporalClient(): Promise<Client> {
    if (this.#temporal) return this.#temporal;
    const lazy = this.#options.client as TemporalOnFirstUse;
    this.#connecting ??= lazy.connectOnFirstUse().then(
      (client) => (this.#temporal = client),
      (err: unknown) => {
        this.#connecting = undefined;
        throw err;
      },
    );
    return this.#connecting;
  }

  /** The sagas' namespace. */
  get #namespace(): string {
    const { client } = this.#options;
    return 'connectOnFirstUse' in client ? client.namespace : client.options.namespace;
  }

  /** The answers this client's `start` gave so far, by status (retries of one key included). */
  get gateCounts(): Readonly<GateCounts> {
    return { ...this.#counts };
  }

  /** The saga's page in the Temporal UI. */
  url(workflowId: string): string {
    return `${this.#options.uiUrl}/workflows/${encodeURIComponent(workflowId)}`;
  }

  /** Whose sagas a call reaches: the owner it names, else the client's; none (every owner's) for an operator's client. */
  #scope(options: OwnerScope): string | undefined {
    if (options.owner !== undefined) {
      checkOwner(options.owner, 'SagaClient owner scope');
      return options.owner;
    }
    return this.#options.operator === true ? undefined : (this.#options.owner ?? DEFAULT_OWNER);
  }

  /** Validates a request without starting anything (SagaInputError when it is bad), for the client's owner or `owner`. */
  prepare(type: string, data: unknown, idempotencyKey?: string, owner?: string): SagaInput {
    return this.#prepare(type, data, { idempotencyKey, owner });
  }

  #prepare(type: string, data: unknown, options: Pick<StartOptions, 'idempotencyKey' | 'owner' | 'deadlineMs'>): SagaInput {
    return prepareSaga(type, data, this.#prepareOptions(options));
  }

  #prepareOptions(options: Pick<StartOptions, 'idempotencyKey' | 'owner' | 'deadlineMs'>): PrepareOptions {
    return {
      idempotencyKey: options.idempotencyKey,
      timings: this.#options.timings,
      types: this.#options.types,
      intentSecret: this.#options.intentSecret,
      owner: options.owner ?? this.#options.owner ?? DEFAULT_OWNER,
      deadlineMs: options.deadlineMs,
    };
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
    // One span for the answer: the gate's Redis and PostgreSQL calls and the workflow start are its
    // children when it is sampled; when it is not, only the workflow start carries it (see inGateSpan).
    return inGateSpan('saga.start', { 'saga.type': type }, async (span, underSpan) => {
      const started = await this.#start(type, data, options, underSpan);
      if (span.isRecording()) span.setAttributes({ 'saga.answer': started.reservation.status, 'saga.started': started.started, 'temporal.workflow_id': started.workflowId });
      return started;
    });
  }

  async #start(type: string, data: unknown, options: StartOptions, underSpan: UnderSpan): Promise<StartedSaga> {
    const began = performance.now();
    const { waitMs } = options;
    if (waitMs !== undefined && !(Number.isSafeInteger(waitMs) && waitMs >= 0 && waitMs <= MAX_WAIT_MS)) {
      throw new TypeError(`SagaClient.start: waitMs must be a whole number of milliseconds from 0 to ${MAX_WAIT_MS} (got ${waitMs})`);
    }
    if (options.owner !== undefined) checkOwner(options.owner, 'SagaClient.start: owner');
    // The request hash and the limits are derived after the gate, for an answer that starts a saga or
    // answers from one (see #startOnce): a DUPLICATE or a CONFLICT pays for neither.
    const input = this.#prepareRequest(type, data, options);
    const workflowId = sagaWorkflowId(type, input.idempotencyKey);
    // Concurrent identical requests from this client share one answer. Their hashes are compared only
    // when a request of the same key is in flight; one of another payload goes its own way.
    const current = this.#inFlight.get(workflowId);
    let answer: GateReply;
    if (current && current.input.requestHash() === input.requestHash()) {
      answer = await current.reply;
    } else {
      const reply = this.#startOnce(input, workflowId, underSpan);
      if (!current) {
        this.#inFlight.set(workflowId, { input, reply });
        void reply.finally(() => this.#inFlight.delete(workflowId)).catch(() => undefined);
      }
      answer = await reply;
    }
    this.#counts[answer.reservation.status]++;
    this.#options.metrics?.gateAnswered(type, answer.reservation.status, (performance.now() - began) / 1000);
    const started = { ...answer, workflowId, intentKey: input.intentKey, idempotencyKey: input.idempotencyKey };
    // A saga that ended already is read too: every waiter of a key gets the same final state.
    return waitMs && started.started ? underSpan(() => this.#awaitEnd(started, waitMs)) : started;
  }

  /**
   * The started saga with its outcome and final state when it ends within `waitMs`; as it was when it
   * does not (the long poll is cancelled then, so nothing outlives the call).
   */
  async #awaitEnd(started: StartedSaga, waitMs: number): Promise<StartedSaga> {
    const client = await this.#temporalClient();
    const signal = AbortSignal.timeout(waitMs);
    let final: SagaState;
    try {
      final = await client.withAbortSignal(signal, () => this.#result(started.workflowId));
    } catch (err) {
      if (signal.aborted) return started;
      const { WorkflowFailedError } = await temporalClientLibrary();
      if (!(err instanceof WorkflowFailedError)) throw err;
      // Stopped without a state (terminated, timed out, refused input): what its execution records.
      final = await recordedState(await client.workflow.getHandle(started.workflowId).describe());
    }
    return { ...started, ...(final.outcome ? { outcome: final.outcome } : {}), final };
  }

  /** The start under way for each workflow id, with the request it was asked with. */
  readonly #inFlight = new Map<string, { input: GateRequest; reply: Promise<GateReply> }>();

  /** A start's request, its hash computed on first use (see SagaRequest). */
  #prepareRequest(type: string, data: unknown, options: StartOptions): GateRequest {
    const request = prepareSagaRequest(type, data, this.#prepareOptions(options));
    let hash: string | undefined;
    return { ...request, requestHash: () => (hash ??= sagaRequestHash(request, this.#options.intentSecret)) };
  }

  /**
   * The gate, then what its answer leads to. Everything after a SUCCESS, or a DUPLICATE of the key's
   * own saga, runs `underSpan`: the saga's start carries the answer's trace on.
   */
  async #startOnce(input: GateRequest, workflowId: string, underSpan: UnderSpan): Promise<GateReply> {
    const sessionId = sagaSessionId(this.#namespace, workflowId);
    const def = sagaDefinition(input.type, this.#options.types);
    const gate = await this.#gate(input, sessionId, def, true);
    if (gate.status === 'CONFLICT') {
      // A saga that waits for a worker holds the pickup lease; its write soon holds the lease alone.
      return this.#rejected({ status: 'CONFLICT', retryAfterMs: Math.min(gate.retryAfterMs, input.timings.leaseMs) });
    }
    if (gate.status === 'DUPLICATE' && gate.owner.sessionTag !== sessionTag(sessionId)) return this.#rejected({ status: 'DUPLICATE' });
    return underSpan(async () => {
      if (gate.status !== 'ENDED') return this.#startSaga(input, workflowId, sessionId, def, gate);
      // The key's saga ended here: answered from it, whoever holds the intent now.
      try {
        return await this.#answerOfExisting(input, workflowId, sessionId, gate);
      } catch (err) {
        const { WorkflowNotFoundError } = await temporalClientLibrary();
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      // Temporal no longer keeps it (its retention is shorter than the key's record): a new request.
      const again = await this.#gate(input, sessionId, def, false);
      if (again.status === 'CONFLICT') return this.#rejected({ status: 'CONFLICT', retryAfterMs: Math.min(again.retryAfterMs, input.timings.leaseMs) });
      if (again.status === 'DUPLICATE' && again.owner.sessionTag !== sessionTag(sessionId)) return this.#rejected({ status: 'DUPLICATE' });
      if (again.status === 'ENDED') throw new Error(`SagaClient.start: the gate answered ENDED unasked for ${workflowId}`);
      return this.#startSaga(input, workflowId, sessionId, def, again);
    });
  }

  /**
   * The gate of one start: the intent's reservation, or an operation's entity lock (its owner's
   * only), taken for the pickup lease; with `answerEnded`, ENDED first when the key's saga ended here.
   */
  async #gate(input: GateRequest, sessionId: string, def: SagaType<unknown>, answerEnded: boolean): Promise<GateAnswer> {
    const { rms, pool, existsTtlMs, keyRetentionMs, metrics } = this.#options;
    const deps = { rms, pool, existsTtlMs, keyRetentionMs, metrics };
    const { table, scope } = def;
    const leaseMs = this.#options.pickupLeaseMs ?? Math.max(DEFAULT_PICKUP_LEASE_MS, input.timings.leaseMs);
    const request = { table, intentKey: input.intentKey, sessionId, leaseMs, answerEnded };
    if (!(input.operation && isEntityOperation(def))) {
      return reserveIntent(deps, { ...request, ...(input.legacyIntentKey === undefined ? {} : { legacyIntentKey: input.legacyIntentKey }) });
    }
    const locked = await lockEntity(deps, { ...request, entityId: input.operation.entityId, owner: input.owner ?? DEFAULT_OWNER });
    if (locked.status === 'NOT_FOUND') {
      // Named as the caller named it (an id of an earlier version is not answered with its new one).
      throw new SagaInputError(entityNotFound(scope, def.entity(input.payload), input.type), ErrorType.ENTITY_NOT_FOUND);
    }
    return locked;
  }

  /** After the gate: the saga started (its SUCCESS), or the answer of the key's own saga (a DUPLICATE of it, or one already started). */
  async #startSaga(input: GateRequest, workflowId: string, sessionId: string, def: SagaType<unknown>, gate: Extract<GateAnswer, { status: 'SUCCESS' | 'DUPLICATE' }>): Promise<GateReply> {
    // The entity is this key's own saga's: a retry of a request that already succeeded.
    if (gate.status === 'DUPLICATE') return this.#answerOfExisting(input, workflowId, sessionId, gate);
    // Limits are counted only for what would start a saga: a DUPLICATE or a CONFLICT never pays for them.
    const limited = await this.#admit(input, def, sessionId, gate);
    if (limited?.admitted.status === 'LIMITED') return { ...this.#rejected({ status: 'CONFLICT', retryAfterMs: limited.admitted.retryAfterMs }), limited: limited.admitted.limit };
    const counted = limited && !limited.admitted.alreadyCounted ? limited.limits : undefined;
    const taken = { sessionId, fencingToken: gate.fencingToken, expiresAt: gate.expiresAt };
    const answer: ReservationAnswer = { status: 'SUCCESS', fencingToken: gate.fencingToken, expiresAt: gate.expiresAt };
    try {
      const [client, { INTENT_KEY, SAGA_PHASE, SAGA_TYPE }] = await Promise.all([this.#temporalClient(), temporalDefinitions()]);
      // Sealed only by a client that encrypts: the worker then knows, without reading its history,
      // that the start reached Temporal encrypted. Any other start's history is read.
      const reservation = (await this.#encrypts(client)) ? { ...taken, mac: reservationMac(taken, { workflowId, requestHash: input.requestHash() }, this.#options.intentSecret) } : taken;
      const start: SagaStart = {
        type: input.type,
        idempotencyKey: input.idempotencyKey,
        data: input.payload,
        timings: input.timings,
        reservation,
        owner: input.owner,
        ...(input.deadlineMs === undefined ? {} : { deadlineMs: input.deadlineMs }),
      };
      const handle = await client.workflow.start<typeof reservationSaga>(RESERVATION_SAGA_WORKFLOW, {
        workflowId,
        taskQueue: this.#options.taskQueue,
        args: [start],
        // A running saga is joined below. A run that ended is never started again, unless it failed:
        // a REJECTED saga (it wrote nothing) ends failed, as one whose input the worker refused, and a
        // terminated one whose entity the gate did not find (the gate answered SUCCESS) holds nothing.
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
        memo: { requestHash: input.requestHash(), reservation: answer, owner: input.owner } satisfies SagaMemo,
        typedSearchAttributes: [
          { key: SAGA_TYPE, value: input.type },
          { key: SAGA_PHASE, value: SagaPhase.RESERVING },
          { key: INTENT_KEY, value: input.intentKey },
        ],
        staticSummary: `${input.type} saga, intent ${input.intentKey}`,
      });
      return {
        runId: handle.firstExecutionRunId,
        reservation: answer,
        started: true,
        url: this.url(workflowId),
      };
    } catch (err) {
      const { WorkflowExecutionAlreadyStartedError } = await temporalClientLibrary();
      if (err instanceof WorkflowExecutionAlreadyStartedError) return this.#answerOfExisting(input, workflowId, sessionId, gate, counted);
      // The start may have landed with its reply lost: the lease and the count are left to the saga,
      // or to expire (the count after its hold: see SagaDefinition.limits). The caller was told no
      // SUCCESS, so a lease this call took keeps only the saga's own length, not the pickup lease.
      if (!gate.alreadyHeld) {
        await this.#options.rms.extend({ intent: input.intentKey, sessionId, fencingToken: gate.fencingToken, leaseMs: input.timings.leaseMs }).catch(() => undefined);
      }
      throw err;
    }
  }

  /** Whether each Temporal client in use encrypts what it sends, probed once. */
  readonly #encrypting = new WeakMap<Client, Promise<boolean>>();

  /**
   * Whether `client` encrypts what it sends: a payload run through its data converter's codecs comes
   * out encrypted (SAGA_CODEC_KEYS' codec, as `connect` sets it; a client given to the constructor
   * may have none).
   */
  #encrypts(client: Client): Promise<boolean> {
    let answer = this.#encrypting.get(client);
    if (answer === undefined) {
      answer = (async () => {
        const { isEncrypted } = await import('./codec/encryption-codec.js');
        let probe: Payload[] = [{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('null') }];
        for (const codec of client.options.loadedDataConverter.payloadCodecs) probe = await codec.encode(probe);
        return probe.length === 1 && isEncrypted(probe[0]!);
      })();
      this.#encrypting.set(client, answer);
      // A codec that failed is asked again by the next start (which its failure fails too, meanwhile).
      answer.catch(() => this.#encrypting.delete(client));
    }
    return answer;
  }

  #rejected(reservation: Extract<ReservationAnswer, { status: 'DUPLICATE' | 'CONFLICT' }>): GateReply {
    return { reservation, started: false };
  }

  /**
   * Counts the saga in against its caller's limits, if its type declares any (undefined otherwise):
   * one script on the caller's slot (another than the intent's, hence a round trip of its own, after
   * the gate's). A refusal gives back at once the lease the gate just took (one already held is a
   * running saga's, or a concurrent call's for the same key); so does an error, which is then thrown.
   */
  async #admit(
    input: GateRequest,
    def: SagaType<unknown>,
    sessionId: string,
    gate: Extract<GateAnswer, { status: 'SUCCESS' }>,
  ): Promise<{ limits: SagaLimitCounters; admitted: AdmitResult } | undefined> {
    const { rms, types, intentSecret } = this.#options;
    const giveBack = async () => {
      if (!gate.alreadyHeld) await rms.release({ intent: input.intentKey, sessionId, fencingToken: gate.fencingToken }).catch(() => undefined);
    };
    try {
      const limits = sagaLimitCounters(input, types, intentSecret);
      if (limits === undefined) return undefined;
      const declared = limitsOf(def);
      const counters = limits.counters.map((id, i) => ({ id, inFlight: declared[i]?.inFlight, perSecond: declared[i]?.perSecond }));
      const admitted = await rms.admit({ tag: limits.tag, counters, sessionId, holdMs: limits.holdMs });
      if (admitted.status === 'LIMITED') await giveBack();
      return { limits, admitted };
    } catch (err) {
      await giveBack();
      throw err;
    }
  }

  /**
   * The key's saga exists: check that it was started with this payload, then answer from it. Its
   * memo holds the request hash and its current answer, and its search attributes its outcome, so
   * one describe call answers for a running or an ended saga, with no worker. (A saga that a plain
   * Temporal client started and that has not reserved yet answers through its update.) A lease the
   * gate took just now for this key is given back unless the running saga may still adopt it (it
   * has not reserved yet, and confirms by reserving with the same session). `counted`: the limit
   * counters this call counted the session in, which only the key's saga, running for this caller,
   * would count it out of.
   */
  async #answerOfExisting(input: GateRequest, workflowId: string, sessionId: string, gate: GateAnswer, counted?: SagaLimitCounters): Promise<GateReply> {
    const [client, { INTENT_KEY, SAGA_OUTCOME, SAGA_PHASE, reservationUpdate, stateQuery }] = await Promise.all([this.#temporalClient(), temporalDefinitions()]);
    const handle = client.workflow.getHandle(workflowId);
    const description = await handle.describe();
    const running = description.status.name === 'RUNNING';
    const attributes = description.typedSearchAttributes;
    const memo = (description.memo ?? {}) as SagaMemo;
    // The lease this call took is the running saga's when its token is the saga's own (another caller
    // of the key started the saga with it, and the saga adopted it: releasing it would cut the saga's
    // write off), or may become its own while the saga has yet to reserve. A lease of another token
    // after the saga reserved (taken once it freed the intent, while it compensates) never would,
    // and would block the intent until it ended.
    if (gate.status === 'SUCCESS' && !gate.alreadyHeld) {
      const phase = attributes.get(SAGA_PHASE) ?? SagaPhase.RESERVING;
      const sagaToken = memo.reservation?.status === 'SUCCESS' ? memo.reservation.fencingToken : undefined;
      const sagas = running && attributes.get(INTENT_KEY) === input.intentKey && (phase === SagaPhase.RESERVING || gate.fencingToken === sagaToken);
      if (!sagas) await this.#options.rms.release({ intent: input.intentKey, sessionId, fencingToken: gate.fencingToken }).catch(() => undefined);
    }
    // This call counted the session in its caller's limits for a saga it did not start: the key's saga
    // counts itself out when it ends, if it runs for this caller; otherwise nothing would.
    if (counted && !(running && memo.owner === input.owner)) {
      await this.#options.rms.countOut({ tag: counted.tag, counters: counted.counters, sessionId }).catch(() => undefined);
    }
    // Another owner's saga under this key (a library key shaped like an HTTP client's): not ours to answer from.
    if (memo.owner !== undefined && memo.owner !== input.owner) throw keyReused(input.idempotencyKey);
    let recordedHash = memo.requestHash;
    let answer = memo.reservation;
    if (recordedHash === undefined || answer === undefined) {
      // Started by a plain Temporal client, and not yet (or never) reserved.
      const state = running ? await handle.query(stateQuery) : await this.#finalState(workflowId);
      recordedHash = state.requestHash;
      answer = state.reservation;
    }
    // A saga started before request hashes were keyed recorded the plain SHA-256 of the same request.
    if (recordedHash !== input.requestHash() && recordedHash !== unkeyedRequestHash(input)) throw keyReused(input.idempotencyKey);
    answer ??= await handle.executeUpdate(reservationUpdate, { args: [{ requestHash: recordedHash }] });
    const outcome = running ? undefined : endOf(description.status.name, attributes.get(SAGA_OUTCOME));
    return { runId: description.runId, reservation: answer, started: true, url: this.url(workflowId), ...(outcome ? { outcome } : {}), replayed: true };
  }

  /** The final state of an ended saga, from its history (no worker needed). */
  async #finalState(workflowId: string): Promise<SagaState> {
    try {
      return await this.#result(workflowId);
    } catch (err) {
      const { WorkflowFailedError } = await temporalClientLibrary();
      if (err instanceof WorkflowFailedError) {
        throw new SagaEndedError(workflowId, 'FAILED', `saga ${workflowId} failed without an answer: ${err.cause?.message ?? err.message}`);
      }
      throw err;
    }
  }

  /**
   * Waits for the saga to end and returns its final state (read from its history: no worker needed
   * once it has ended), a REJECTED saga's included. A saga of another owner than the call's scope
   * ({@link OwnerScope}) is answered as a missing one.
   * @throws WorkflowFailedError when its workflow failed without a state (input the worker refused),
   * was terminated or timed out; WorkflowNotFoundError when there is no such saga (of the scope's owner).
   */
  async result(workflowId: string, options: OwnerScope = {}): Promise<SagaState> {
    const owner = this.#scope(options);
    if (owner !== undefined) await ownedDescription((await this.#temporalClient()).workflow.getHandle(workflowId), owner);
    return this.#result(workflowId);
  }

  /** {@link result} of a saga this client already knows it may read. */
  async #result(workflowId: string): Promise<SagaState> {
    try {
      return (await (await this.#temporalClient()).workflow.getHandle(workflowId).result()) as SagaState;
    } catch (err) {
      const rejected = await rejectedState(err);
      if (rejected) return rejected;
      throw err;
    }
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
    const owner = this.#scope(options);
    const [client, { stateQuery }] = await Promise.all([this.#temporalClient(), temporalDefinitions()]);
    const handle = client.workflow.getHandle(workflowId);
    const description = await ownedDescription(handle, owner);
    const status = description.status.name;
    const state = status === 'RUNNING' ? await handle.query(stateQuery) : await this.#endedState(workflowId, description);
    return { workflowId, status, state, url: this.url(workflowId) };
  }

  /** An ended saga's final state, from its result, or from what its execution records when it has none. */
  async #endedState(workflowId: string, description: WorkflowExecutionDescription): Promise<SagaState> {
    if (description.status.name === 'COMPLETED' || description.status.name === 'FAILED') {
      try {
        return await this.#result(workflowId);
      } catch (err) {
        const { WorkflowFailedError } = await temporalClientLibrary();
        if (!(err instanceof WorkflowFailedError)) throw err;
      }
    }
    return recordedState(description);
  }

  /** Lists sagas by search attributes, newest first: those of the filter's owner scope ({@link OwnerScope}). */
  async list(filter: ListFilter = {}): Promise<SagaSummary[]> {
    const scope = this.#scope(filter);
    const clauses = [`WorkflowType = "${RESERVATION_SAGA_WORKFLOW}"`, `TaskQueue = "${this.#options.taskQueue}"`];
    for (const [name, value] of [
      ['SagaType', filter.type],
      ['SagaOutcome', filter.outcome],
      ['SagaPhase', filter.phase],
    ] as const) {
      if (value === undefined) continue;
      if (!VISIBILITY_VALUE.test(value)) throw new SagaInputError(`invalid ${name} filter ${JSON.stringify(value)}`, ErrorType.INVALID_INPUT);
      clauses.push(`${name} = "${value}"`);
    }
    if (filter.workflowIdPrefixes !== undefined) {
      const prefixes = filter.workflowIdPrefixes.map((prefix) => {
        if (!VISIBILITY_VALUE.test(prefix)) throw new SagaInputError(`invalid workflow id prefix ${JSON.stringify(prefix)}`, ErrorType.INVALID_INPUT);
        return `WorkflowId STARTS_WITH "${prefix}"`;
      });
      // No prefix: nothing can match (an empty OR would match everything).
      if (prefixes.length === 0) return [];
      clauses.push(`(${prefixes.join(' OR ')})`);
    }
    const limit = filter.limit ?? 100;
    const out: SagaSummary[] = [];
    const [client, { INTENT_KEY, SAGA_OUTCOME, SAGA_PHASE, SAGA_TYPE }] = await Promise.all([this.#temporalClient(), temporalDefinitions()]);
    for await (const wf of client.workflow.list({ query: clauses.join(' AND '), pageSize: Math.min(limit, 1000) })) {
      const owner = ((wf.memo ?? {}) as SagaMemo).owner;
      if (scope !== undefined && owner !== undefined && owner !== scope) continue;
      const attrs = wf.typedSearchAttributes;
      out.push({
        workflowId: wf.workflowId,
        runId: wf.runId,
        status: wf.status.name,
        type: attrs.get(SAGA_TYPE),
        phase: attrs.get(SAGA_PHASE),
        outcome: attrs.get(SAGA_OUTCOME),
        intentKey: attrs.get(INTENT_KEY),
        startTime: wf.startTime.toISOString(),
      });
      if (out.length >= limit) break;
    }
    return out;
  }

  /**
   * Requests cancellation; a saga past its reservation then runs its compensations. A saga of
   * another owner than the call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws SagaEndedError when the saga has already ended (nothing to cancel); WorkflowNotFoundError
   * when there is no such saga (of the scope's owner).
   */
  async cancel(workflowId: string, options: OwnerScope = {}): Promise<void> {
    const owner = this.#scope(options);
    const handle = (await this.#temporalClient()).workflow.getHandle(workflowId);
    const { status } = await ownedDescription(handle, owner);
    if (status.name !== 'RUNNING') throw new SagaEndedError(workflowId, status.name);
    await handle.cancel();
  }

  /**
   * Retries the compensations that a saga waiting in NEEDS_ATTENTION could not finish, once an
   * operator fixed their cause (each in its order, `undoEntity` last; none that succeeded runs
   * again), and answers the saga's state after that round: ended (COMPENSATED, or EXPIRED when its
   * deadline made it compensate) or waiting again in NEEDS_ATTENTION, the new failures in its
   * `errors`. Redrives sent together are answered by one round. A saga of another owner than the
   * call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws RedriveError when the saga does not wait in NEEDS_ATTENTION (it runs its steps,
   * compensates, its wait has ended, or it has ended): nothing was run. WorkflowNotFoundError when
   * there is no such saga (of the scope's owner).
   */
  async redrive(workflowId: string, options: OwnerScope = {}): Promise<SagaState> {
    const { redriveUpdate } = await temporalDefinitions();
    return this.#updateRunning(workflowId, options, (handle) => handle.executeUpdate(redriveUpdate), {
      refusal: ErrorType.NOT_NEEDING_ATTENTION,
      refused: (message) => new RedriveError(workflowId, message),
      ended: (status) => `saga ${workflowId} has ended (${status}): there is nothing to redrive`,
    });
  }

  /**
   * Sends an update to the running saga `workflowId` of the call's owner scope: a saga that has ended
   * is refused with `how.refused(how.ended(status))` before anything is sent, and the update's own
   * refusal (an ApplicationFailure of type `how.refusal`) becomes `how.refused(its message)`.
   */
  async #updateRunning<R>(
    workflowId: string,
    options: OwnerScope,
    update: (handle: WorkflowHandle) => Promise<R>,
    how: { refusal: string; refused: (message: string) => Error; ended: (status: string) => string },
  ): Promise<R> {
    const handle = (await this.#temporalClient()).workflow.getHandle(workflowId);
    const { status } = await ownedDescription(handle, this.#scope(options));
    if (status.name !== 'RUNNING') throw how.refused(how.ended(status.name));
    try {
      return await update(handle);
    } catch (err) {
      const { WorkflowUpdateFailedError, ApplicationFailure } = await temporalClientLibrary();
      const cause = err instanceof WorkflowUpdateFailedError ? err.cause : undefined;
      if (cause instanceof ApplicationFailure && cause.type === how.refusal) throw how.refused(cause.message);
      throw err;
    }
  }

  /**
   * Sends the signal `signal` to the saga `workflowId`, for a wait of its plan (see
   * `SagaStepPlan.wait`): a payment confirmed, an item collected. It is recorded once: a repeat
   * answers `first: false` and changes nothing (the first payload stands), so a sender may retry
   * freely. It may come before the saga reaches its wait. The payload (at most MAX_PAYLOAD_BYTES of
   * JSON) is what the steps after the wait find; it travels through the codec like the saga's input.
   * A saga of another owner than the call's scope ({@link OwnerScope}) is answered as a missing one.
   * @throws SignalError when the saga does not take it (it has ended, its plan waits for no such
   * signal, or that wait timed out): nothing was recorded. SagaInputError for a malformed name or
   * payload. WorkflowNotFoundError when there is no such saga (of the scope's owner).
   */
  async signal(workflowId: string, signal: string, payload?: unknown, options: OwnerScope = {}): Promise<SagaSignalReceipt> {
    if (typeof signal !== 'string' || !STEP_NAME_PATTERN.test(signal)) {
      throw new SagaInputError(`signal ${JSON.stringify(signal)}: must be letters, digits, _ and - (at most 64)`, ErrorType.INVALID_INPUT);
    }
    const size = payload === undefined ? 0 : Buffer.byteLength(JSON.stringify(payload) ?? '');
    if (size > MAX_PAYLOAD_BYTES) throw new SagaInputError(`signal payload is ${size} bytes; at most ${MAX_PAYLOAD_BYTES} are accepted`, ErrorType.INVALID_INPUT);
    const { signalUpdate } = await temporalDefinitions();
    return this.#updateRunning(workflowId, options, (handle) => handle.executeUpdate(signalUpdate, { args: [{ signal, ...(payload === undefined ? {} : { payload }) }] }), {
      refusal: ErrorType.NOT_WAITING,
      refused: (message) => new SignalError(workflowId, message),
      ended: (status) => `saga ${workflowId} has ended (${status}): it waits for no signal`,
    });
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
    const { status } = await ownedDescription((await this.#temporalClient()).workflow.getHandle(workflowId), this.#scope({}));
    // A saga waiting in NEEDS_ATTENTION still owns its row: settling under it would race its redrive.
    if (status.name === 'RUNNING') throw new SettleError(workflowId, `saga ${workflowId} is still running: redrive it (saga redrive) or let its wait end, then settle`);
    const state = await this.#result(workflowId);
    if (state.outcome !== SagaOutcome.COMPENSATION_FAILED) {
      throw new SettleError(workflowId, `saga ${workflowId} ended ${state.outcome ?? state.phase}, not COMPENSATION_FAILED: there is nothing to settle`);
    }
    const def = sagaDefinition(state.type, this.#options.types);
    if (isEntityOperation(def)) throw new SettleError(workflowId, `saga ${workflowId} is an operation (${state.type}): it kept no row of its own to settle`);
    if (state.fencingToken === undefined) throw new SettleError(workflowId, `saga ${workflowId} recorded no fencing token: it wrote no row`);
    const owner = { intentKey: state.intentKey, sessionId: sagaSessionId(this.#namespace, workflowId), fencingToken: state.fencingToken };
    const { freeIntent } = def.compensation;
    // A repeat of either (the row already so, under the saga's token) is OK: settling is idempotent.
    const marked = how === 'keep' ? await def.table.markCompleted(this.#options.pool, owner) : await undoEntity(this.#options, def.table, owner, freeIntent);
    if (marked.status === 'ILLEGAL_TRANSITION') {
      throw new SettleError(workflowId, `saga ${workflowId}'s row is ${marked.from}: it cannot be ${how === 'keep' ? 'kept (a row never finalised can only be undone)' : 'undone'}`);
    }
    if (marked.status !== 'OK') {
      throw new SettleError(workflowId, `saga ${workflowId}'s row is ${marked.status === 'NOT_FOUND' ? 'gone' : 'owned by a newer saga'}: nothing to settle`);
    }
    return how === 'keep' ? { workflowId, row: 'COMPLETED', intentFreed: false } : { workflowId, row: 'COMPENSATED', intentFreed: freeIntent };
  }
}

/** Thrown by {@link SagaClient.redrive} when the saga does not wait in NEEDS_ATTENTION; the message says why. */
export class RedriveError extends Error {
  override readonly name = 'RedriveError';
  constructor(
    readonly workflowId: string,
    message: string,
  ) {
    super(message);
  }
}

/** Thrown by {@link SagaClient.signal} when the saga does not take the signal; nothing was recorded. */
export class SignalError extends Error {
  override readonly name = 'SignalError';
  constructor(
    readonly workflowId: string,
    message: string,
  ) {
    super(message);
  }
}

/** Thrown by {@link SagaClient.settle} when it changed nothing; the message says why. */
export class SettleError extends Error {
  override readonly name = 'SettleError';
  constructor(
    readonly workflowId: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * How a saga ended, from its workflow's status and its `SagaOutcome` search attribute; undefined
 * while it runs. A REJECTED saga fails its workflow (see REJECTED_FAILS_PATCH).
 */
function endOf(status: string, outcome: string | undefined): SagaEnd | undefined {
  switch (status) {
    case 'RUNNING':
      return undefined;
    case 'COMPLETED':
      return outcome as SagaOutcome | undefined;
    case 'FAILED':
      return outcome === SagaOutcome.REJECTED ? SagaOutcome.REJECTED : SagaAbort.FAILED;
    case 'TERMINATED':
      return SagaAbort.TERMINATED;
    case 'TIMED_OUT':
      return SagaAbort.TIMED_OUT;
    default:
      return SagaAbort.CANCELED;
  }
}

/**
 * What an ended saga's execution records when the saga recorded no state of its own (terminated,
 * timed out, or failed before its plan): its memo and search attributes, its end, and an error
 * saying so.
 */
async function recordedState(description: WorkflowExecutionDescription): Promise<SagaState> {
  const { INTENT_KEY, SAGA_PHASE, SAGA_TYPE } = await temporalDefinitions();
  const attributes = description.typedSearchAttributes;
  const memo = (description.memo ?? {}) as SagaMemo;
  const end = endOf(description.status.name, undefined) ?? SagaAbort.FAILED;
  const phase = attributes.get(SAGA_PHASE) as SagaPhase | undefined;
  return {
    type: attributes.get(SAGA_TYPE) ?? '',
    idempotencyKey: '',
    requestHash: memo.requestHash ?? '',
    intentKey: attributes.get(INTENT_KEY) ?? '',
    phase: phase ?? SagaPhase.RESERVING,
    outcome: end,
    ...(memo.reservation ? { reservation: memo.reservation } : {}),
    stepsDone: [],
    compensationsRun: [],
    errors: [{ at: phase ?? SagaPhase.RESERVING, type: end, message: `the saga's workflow ended ${end} before the saga recorded its state; its history shows the steps it ran` }],
  };
}

/** The final state a REJECTED saga failed its workflow with, when `err` is that failure. */
async function rejectedState(err: unknown): Promise<SagaState | undefined> {
  const { WorkflowFailedError, ApplicationFailure } = await temporalClientLibrary();
  if (!(err instanceof WorkflowFailedError)) return undefined;
  const cause = err.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== ErrorType.SAGA_REJECTED) return undefined;
  const [state] = cause.details ?? [];
  return typeof state === 'object' && state !== null ? (state as SagaState) : undefined;
}

/**
 * The saga's description, when it runs for `owner` or records none yet (it started before owners were
 * recorded, or a plain Temporal client started it and it is not planned yet); with no `owner` (an
 * operator's call), any saga's.
 * @throws WorkflowNotFoundError when there is no such saga, or it runs for another owner: the same
 * error, so a caller cannot tell another owner's saga from a missing one.
 */
async function ownedDescription(handle: WorkflowHandle, owner: string | undefined): Promise<WorkflowExecutionDescription> {
  const description = await handle.describe();
  const recorded = ((description.memo ?? {}) as SagaMemo).owner;
  if (owner === undefined || recorded === undefined || recorded === owner) return description;
  const { WorkflowNotFoundError } = await temporalClientLibrary();
  throw new WorkflowNotFoundError(`workflow not found for ID: ${handle.workflowId}`, handle.workflowId, undefined);
}

/** @throws TypeError unless `owner` is 1-64 letters, digits and `. _ : -`, starting with a letter or digit. */
function checkOwner(owner: unknown, what: string): void {
  if (typeof owner !== 'string' || !OWNER_PATTERN.test(owner)) throw new TypeError(`${what}: must be 1-64 letters, digits and . _ : - starting with a letter or digit (got ${JSON.stringify(owner)})`);
}

/** Thrown when an operation needs a running saga and this one has ended, or when a saga ended without an answer. */
export class SagaEndedError extends Error {
  override readonly name = 'SagaEndedError';
  constructor(
    readonly workflowId: string,
    /** The workflow execution status, e.g. COMPLETED. */
    readonly status: string,
    message = `saga ${workflowId} has already ended (${status}); there is nothing to cancel`,
  ) {
    super(message);
  }
}

function keyReused(key: string): SagaInputError {
  return new SagaInputError(`idempotency key ${key} was already used with another payload`, ErrorType.IDEMPOTENCY_KEY_REUSED);
}
