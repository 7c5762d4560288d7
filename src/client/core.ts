/**
 * What the parts of SagaClient share ({@link ClientCore}): its options, its Temporal client (made on
 * first use, when asked to be), whose sagas a call reaches, and the checks every read and operator
 * verb makes of a saga's owner. The gate (gate.ts, with start.ts), the reads (reads.ts) and the
 * operator verbs (operator.ts) each take it.
 */
import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import type { Pool } from 'pg';
import type { SagaMetrics } from '../metrics';
import type { Rms } from '../rms';
import type { SagaTypes } from '../sagas';
import { DEFAULT_OWNER, OWNER_PATTERN, type SagaMemo, type SagaTimings } from '../shared/saga';

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

/**
 * Whose sagas a read, a cancellation or a redrive reaches: those of `owner`, and those whose memo
 * records no owner yet (started before owners were recorded, or by a plain Temporal client and not
 * yet planned). Another owner's saga is answered as a missing one.
 */
export interface OwnerScope {
  /** @default the client's `owner`; every owner for an operator's client (its `operator` option) */
  owner?: string;
}

/** The Temporal client library, loaded with the first connection (so free by the time one of its errors is checked). */
export const temporalClientLibrary = () => import('@temporalio/client');

/**
 * The saga's search attributes, update and query: they load Temporal's libraries, so they are loaded
 * by the calls that reach Temporal (already loaded by then, but for the first of them).
 */
export const temporalDefinitions = async () => {
  const [attributes, handlers] = await Promise.all([import('../shared/search-attributes.js'), import('../shared/handlers.js')]);
  return { ...attributes, ...handlers };
};

/** The options of one SagaClient and its Temporal client, as its parts share them. */
export class ClientCore {
  readonly options: SagaClientOptions;
  /** The Temporal client once made, and its making while under way (TemporalOnFirstUse). */
  #temporal?: Client;
  #connecting?: Promise<Client>;

  constructor(options: SagaClientOptions) {
    this.options = options;
    if (!('connectOnFirstUse' in options.client)) this.#temporal = options.client;
  }

  /** The Temporal client if it is made (given, or made by a call that needed it); undefined before. */
  get madeTemporal(): Client | undefined {
    return this.#temporal;
  }

  /** The Temporal client, made now if it is made on first use. */
  async temporalClient(): Promise<Client> {
    if (this.#temporal) return this.#temporal;
    const lazy = this.options.client as TemporalOnFirstUse;
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
  get namespace(): string {
    const { client } = this.options;
    return 'connectOnFirstUse' in client ? client.namespace : client.options.namespace;
  }

  /** The saga's page in the Temporal UI. */
  url(workflowId: string): string {
    return `${this.options.uiUrl}/workflows/${encodeURIComponent(workflowId)}`;
  }

  /** Whose sagas a call reaches: the owner it names, else the client's; none (every owner's) for an operator's client. */
  scope(options: OwnerScope): string | undefined {
    if (options.owner !== undefined) {
      checkOwner(options.owner, 'SagaClient owner scope');
      return options.owner;
    }
    return this.options.operator === true ? undefined : (this.options.owner ?? DEFAULT_OWNER);
  }
}

/**
 * The saga's description, when it runs for `owner` or records none yet (it started before owners were
 * recorded, or a plain Temporal client started it and it is not planned yet); with no `owner` (an
 * operator's call), any saga's.
 * @throws WorkflowNotFoundError when there is no such saga, or it runs for another owner: the same
 * error, so a caller cannot tell another owner's saga from a missing one.
 */
export async function ownedDescription(handle: WorkflowHandle, owner: string | undefined): Promise<WorkflowExecutionDescription> {
  const description = await handle.describe();
  const recorded = ((description.memo ?? {}) as SagaMemo).owner;
  if (owner === undefined || recorded === undefined || recorded === owner) return description;
  const { WorkflowNotFoundError } = await temporalClientLibrary();
  throw new WorkflowNotFoundError(`workflow not found for ID: ${handle.workflowId}`, handle.workflowId, undefined);
}

/** @throws TypeError unless `owner` is 1-64 letters, digits and `. _ : -`, starting with a letter or digit. */
export function checkOwner(owner: unknown, what: string): void {
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
