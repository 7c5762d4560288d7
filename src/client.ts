/**
 * The library API for starting and inspecting sagas. `start` is one round trip: update-with-start
 * starts the saga (or joins the one with the same idempotency key) and returns its reservation answer.
 */
import {
  Client,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  isGrpcServiceError,
  type Connection,
  type WorkflowHandle,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Config } from './config';
import { prepareSaga, SagaInputError } from './sagas';
import {
  ErrorType,
  INTENT_KEY,
  SAGA_OUTCOME,
  SAGA_PHASE,
  SAGA_TYPE,
  SagaPhase,
  reservationUpdate,
  sagaWorkflowId,
  stateQuery,
  type ReservationAnswer,
  type SagaInput,
  type SagaState,
  type SagaTimings,
} from './shared';
import { connectClient } from './temporal';
import { reservationSaga } from './workflows/reservation-saga';

/** Options of {@link SagaClient}. */
export interface SagaClientOptions {
  /** A Temporal client on the sagas' namespace. */
  client: Client;
  /** Task queue the workers poll. */
  taskQueue: string;
  /** Base URL of the Temporal UI, for links. */
  uiUrl: string;
  /** Lease and heartbeat timings given to every saga started. */
  timings: SagaTimings;
}

/** The answer of {@link SagaClient.start}. */
export interface StartedSaga {
  workflowId: string;
  runId: string;
  intentKey: string;
  reservation: ReservationAnswer;
  /** The saga in the Temporal UI. */
  url: string;
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
export interface ListFilter {
  type?: string;
  outcome?: string;
  phase?: string;
  /** At most this many (newest first). @default 100 */
  limit?: number;
}

const VISIBILITY_VALUE = /^[A-Za-z0-9_.:-]{1,200}$/;

/** Starts, finds and inspects sagas. */
export class SagaClient {
  readonly #options: SagaClientOptions;
  readonly #connection?: Connection;

  constructor(options: SagaClientOptions, connection?: Connection) {
    this.#options = options;
    this.#connection = connection;
  }

  /** Connects with the config's Temporal settings; {@link close} closes that connection. */
  static async connect(config: Config, compensationAttempts = 5): Promise<SagaClient> {
    const connection = await connectClient(config.temporal);
    const client = new Client({ connection, namespace: config.temporal.namespace });
    return new SagaClient(
      { client, taskQueue: config.temporal.taskQueue, uiUrl: `${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}`, timings: { ...config.saga, compensationAttempts } },
      connection,
    );
  }

  /** Closes the connection opened by {@link connect}. */
  async close(): Promise<void> {
    await this.#connection?.close();
  }

  /** The Temporal client underneath. */
  get temporal(): Client {
    return this.#options.client;
  }

  /** The saga's page in the Temporal UI. */
  url(workflowId: string): string {
    return `${this.#options.uiUrl}/workflows/${encodeURIComponent(workflowId)}`;
  }

  /** Validates a request without starting anything (SagaInputError when it is bad). */
  prepare(type: string, data: unknown, idempotencyKey?: string): SagaInput {
    return prepareSaga(type, data, { idempotencyKey, timings: this.#options.timings });
  }

  /**
   * Starts a saga, or joins the one already started with the same idempotency key, and returns the
   * reservation answer. Bad input, or the same key with another payload, throws SagaInputError and
   * starts nothing.
   */
  async start(type: string, data: unknown, options: { idempotencyKey?: string } = {}): Promise<StartedSaga> {
    const input = this.prepare(type, data, options.idempotencyKey);
    const workflowId = sagaWorkflowId(type, input.idempotencyKey);
    // Concurrent identical requests from this client share one round trip.
    const flightKey = `${workflowId}\u0000${input.requestHash}`;
    let flight = this.#inFlight.get(flightKey);
    if (!flight) {
      flight = this.#startOnce(input, workflowId).finally(() => this.#inFlight.delete(flightKey));
      this.#inFlight.set(flightKey, flight);
    }
    const { runId, reservation } = await flight;
    return { workflowId, runId, intentKey: input.intentKey, reservation, url: this.url(workflowId) };
  }

  readonly #inFlight = new Map<string, Promise<{ runId: string; reservation: ReservationAnswer }>>();

  async #startOnce(input: SagaInput, workflowId: string): Promise<{ runId: string; reservation: ReservationAnswer }> {
    const { client } = this.#options;
    const startOperation = new WithStartWorkflowOperation(reservationSaga, {
      workflowId,
      taskQueue: this.#options.taskQueue,
      args: [input],
      // A retry with the same key joins the running saga; a finished one is never started again.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SAGA_TYPE, value: input.type },
        { key: SAGA_PHASE, value: SagaPhase.RESERVING },
        { key: INTENT_KEY, value: input.intentKey },
      ],
      staticSummary: `${input.type} saga, intent ${input.intentKey}`,
    });
    const request = { args: [{ requestHash: input.requestHash }] as [{ requestHash: string }] };
    try {
      // Bounded: under contention on one workflow id the server may keep answering a retried
      // update-with-start with a retryable error (e.g. "StartDeduped"); then we join by plain update.
      const reservation = await client.withDeadline(Date.now() + UPDATE_WITH_START_DEADLINE_MS, () =>
        client.workflow.executeUpdateWithStart(reservationUpdate, { ...request, startWorkflowOperation: startOperation }),
      );
      // The start response usually carries the run id (the handle's declared type does not say so);
      // a caller that joined an existing saga may get none back, and then asks.
      const handle = (await startOperation.workflowHandle()) as Partial<WorkflowHandleWithFirstExecutionRunId> & WorkflowHandle;
      return { reservation, runId: handle.firstExecutionRunId ?? (await handle.describe()).runId };
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) return this.#answerOfFinished(input, workflowId);
      if (isKeyReuse(err)) throw keyReused(input.idempotencyKey);
      if (!isGrpcServiceError(err) && !isGrpcServiceError((err as { cause?: unknown }).cause)) throw err;
      const handle = client.workflow.getHandle(workflowId);
      try {
        const reservation = await handle.executeUpdate(reservationUpdate, request);
        return { reservation, runId: (await handle.describe()).runId };
      } catch (joinErr) {
        if (isKeyReuse(joinErr)) throw keyReused(input.idempotencyKey);
        if (joinErr instanceof WorkflowNotFoundError || /completed|not found/i.test((joinErr as Error).message)) {
          return this.#answerOfFinished(input, workflowId);
        }
        throw joinErr;
      }
    }
  }

  /** The saga with this key has already finished: answer from its recorded state. */
  async #answerOfFinished(input: SagaInput, workflowId: string): Promise<{ runId: string; reservation: ReservationAnswer }> {
    const handle = this.#options.client.workflow.getHandle(workflowId);
    const state = await handle.query(stateQuery);
    if (state.requestHash !== input.requestHash) throw keyReused(input.idempotencyKey);
    if (!state.reservation) throw new Error(`saga ${workflowId} ended without a reservation answer (${state.reason ?? state.phase})`);
    return { reservation: state.reservation, runId: (await handle.describe()).runId };
  }

  /** Waits for the saga to end and returns its final state. */
  async result(workflowId: string): Promise<SagaState> {
    return (await this.#options.client.workflow.getHandle(workflowId).result()) as SagaState;
  }

  /** The saga's current state (the `state` query) and its execution status. */
  async status(workflowId: string): Promise<{ workflowId: string; status: string; state: SagaState; url: string }> {
    const handle = this.#options.client.workflow.getHandle(workflowId);
    const [description, state] = await Promise.all([handle.describe(), handle.query(stateQuery)]);
    return { workflowId, status: description.status.name, state, url: this.url(workflowId) };
  }

  /** Lists sagas by search attributes, newest first. */
  async list(filter: ListFilter = {}): Promise<SagaSummary[]> {
    const clauses = ['WorkflowType = "reservationSaga"', `TaskQueue = "${this.#options.taskQueue}"`];
    for (const [name, value] of [
      ['SagaType', filter.type],
      ['SagaOutcome', filter.outcome],
      ['SagaPhase', filter.phase],
    ] as const) {
      if (value === undefined) continue;
      if (!VISIBILITY_VALUE.test(value)) throw new SagaInputError(`invalid ${name} filter ${JSON.stringify(value)}`, ErrorType.INVALID_INPUT);
      clauses.push(`${name} = "${value}"`);
    }
    const limit = filter.limit ?? 100;
    const out: SagaSummary[] = [];
    for await (const wf of this.#options.client.workflow.list({ query: clauses.join(' AND ') })) {
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
   * Requests cancellation; a saga past its reservation then runs its compensations.
   * @throws SagaEndedError when the saga has already ended (nothing to cancel).
   */
  async cancel(workflowId: string): Promise<void> {
    const handle = this.#options.client.workflow.getHandle(workflowId);
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') throw new SagaEndedError(workflowId, status.name);
    await handle.cancel();
  }
}

/** Thrown when an operation needs a running saga and this one has ended. */
export class SagaEndedError extends Error {
  override readonly name = 'SagaEndedError';
  constructor(
    readonly workflowId: string,
    /** The workflow execution status, e.g. COMPLETED. */
    readonly status: string,
  ) {
    super(`saga ${workflowId} has already ended (${status}); there is nothing to cancel`);
  }
}

/** How long one update-with-start may take before the client joins the saga by a plain update. */
const UPDATE_WITH_START_DEADLINE_MS = 10_000;

function isKeyReuse(err: unknown): boolean {
  return err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === ErrorType.IDEMPOTENCY_KEY_REUSED;
}

function keyReused(key: string): SagaInputError {
  return new SagaInputError(`idempotency key ${key} was already used with another payload`, ErrorType.IDEMPOTENCY_KEY_REUSED);
}
