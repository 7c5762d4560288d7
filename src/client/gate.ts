/**
 * SagaClient's gate: the request is validated and reduced to its intent, the intent is reserved in
 * Redis (SUCCESS adds one PostgreSQL point lookup), the caller's limits are counted, and only a
 * SUCCESS starts a workflow, with one start call. DUPLICATE and CONFLICT are answered without
 * Temporal and leave nothing behind. A retry of a key whose saga exists is answered from that saga
 * (start.ts).
 */
import type { Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { DEFAULT_PICKUP_LEASE_MS } from '../config';
import { lockEntity, reserveIntent, type GateAnswer } from '../gate';
import { encodeEntityId } from '../sagas/entity-id';
import { sessionTag, type AdmitResult } from '../rms';
import { inGateSpan, runHere, tracingOff, type UnderSpan } from '../tracing';
import { entityNotFound, isEntityOperation, limitsOf, prepareSaga, prepareSagaRequest, reservationMac, sagaLimitCounters, sagaDefinition, sagaRequestHash, sagaSessionId, SagaInputError, type EntityOperation, type PrepareOptions, type SagaType } from '../sagas';
import { DEFAULT_OWNER, ErrorType, RESERVATION_SAGA_WORKFLOW, SagaPhase, sagaWorkflowId, type ReservationAnswer, type SagaInput, type SagaLimitCounters, type SagaMemo, type SagaStart } from '../shared/saga';
import type { reservationSaga } from '../workflows/reservation-saga';
import { checkOwner, temporalClientLibrary, temporalDefinitions, type ClientCore } from './core';
import { answerOfExisting, awaitEnd, MAX_WAIT_MS, type GateCounts, type GateReply, type GateRequest, type StartedSaga, type StartOptions } from './start';

/** The request of an entity operation (one whose gate is its entity's lock). */
type OperationRequest = GateRequest & { operation: NonNullable<GateRequest['operation']> };

/**
 * The gate of one SagaClient: its start, and the answers it gave. Concurrent identical requests of
 * the client share one answer.
 */
export class SagaGate {
  readonly #core: ClientCore;
  readonly #counts: GateCounts = { SUCCESS: 0, DUPLICATE: 0, CONFLICT: 0 };

  constructor(core: ClientCore) {
    this.#core = core;
  }

  /** See {@link SagaClient.gateCounts}. */
  get counts(): Readonly<GateCounts> {
    return { ...this.#counts };
  }

  /** Validates a request without starting anything (see SagaClient.prepare). */
  prepare(type: string, data: unknown, options: Pick<StartOptions, 'idempotencyKey' | 'owner' | 'deadlineMs'>): SagaInput {
    return prepareSaga(type, data, this.#prepareOptions(options));
  }

  #prepareOptions(options: Pick<StartOptions, 'idempotencyKey' | 'owner' | 'deadlineMs'>): PrepareOptions {
    return {
      idempotencyKey: options.idempotencyKey,
      timings: this.#core.options.timings,
      types: this.#core.options.types,
      intentSecret: this.#core.options.intentSecret,
      owner: options.owner ?? this.#core.options.owner ?? DEFAULT_OWNER,
      deadlineMs: options.deadlineMs,
    };
  }

  /** See {@link SagaClient.start}. */
  start(type: string, data: unknown, options: StartOptions): Promise<StartedSaga> {
    // No tracer provider: no span would record anything or carry anything on, so none is made.
    if (tracingOff()) return this.#start(type, data, options, runHere);
    // One span for the answer: the gate's Redis and PostgreSQL calls and the workflow start are its
    // children when it is sampled; when it is not, only the workflow start carries it (see inGateSpan).
    return inGateSpan('saga.start', { 'saga.type': type }, async (span, underSpan) => {
      const started = await this.#start(type, data, options, underSpan);
      if (span.isRecording()) span.setAttributes({ 'saga.answer': started.reservation.status, 'saga.started': started.started, 'temporal.workflow_id': started.workflowId });
      return started;
    });
  }

  async #start(type: string, data: unknown, options: StartOptions, underSpan: UnderSpan): Promise<StartedSaga> {
    const { metrics } = this.#core.options;
    const began = metrics ? performance.now() : 0;
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
    const findExisting = options.findExisting === true;
    let answer: GateReply;
    if (current && current.findExisting === findExisting && current.input.requestHash() === input.requestHash()) {
      answer = await current.reply;
    } else if (current) {
      answer = await this.#startOnce(input, workflowId, underSpan, findExisting);
    } else {
      const reply = this.#startOnce(input, workflowId, underSpan, findExisting);
      this.#inFlight.set(workflowId, { input, reply, findExisting });
      // Forgotten as soon as it is answered (this is the first code its settling runs).
      try {
        answer = await reply;
      } finally {
        this.#inFlight.delete(workflowId);
      }
    }
    this.#counts[answer.reservation.status]++;
    metrics?.gateAnswered(type, answer.reservation.status, (performance.now() - began) / 1000);
    // Object.assign, not a spread with more fields: on Node 20's V8 that form costs about 2 µs per call.
    const started: StartedSaga = Object.assign({}, answer, { workflowId, intentKey: input.intentKey, idempotencyKey: input.idempotencyKey });
    // A saga that ended already is read too: every waiter of a key gets the same final state.
    return waitMs && started.started ? underSpan(() => awaitEnd(this.#core, started, waitMs)) : started;
  }

  /** The start under way for each workflow id, with the request it was asked with. */
  readonly #inFlight = new Map<string, { input: GateRequest; reply: Promise<GateReply>; findExisting: boolean }>();

  /** A start's request, its hash computed on first use (see SagaRequest). */
  #prepareRequest(type: string, data: unknown, options: StartOptions): GateRequest {
    const request = prepareSagaRequest(type, data, this.#prepareOptions(options)) as GateRequest;
    const { intentSecret } = this.#core.options;
    let hash: string | undefined;
    request.requestHash = () => (hash ??= sagaRequestHash(request, intentSecret));
    return request;
  }

  /**
   * The gate, then what its answer leads to. Everything after a SUCCESS, or a DUPLICATE of the key's
   * own saga, runs `underSpan`: the saga's start carries the answer's trace on.
   */
  async #startOnce(input: GateRequest, workflowId: string, underSpan: UnderSpan, findExisting: boolean): Promise<GateReply> {
    const sessionId = sagaSessionId(this.#core.namespace, workflowId);
    const def = sagaDefinition(input.type, this.#core.options.types);
    const gate = await this.#gate(input, sessionId, def, true);
    // A DUPLICATE of another request: answered here, with no more promises than the Redis call's.
    if (gate.status === 'DUPLICATE' && gate.owner.sessionTag !== sessionTag(sessionId) && !findExisting) return this.#rejected({ status: 'DUPLICATE' });
    if (gate.status === 'CONFLICT') {
      // A saga that waits for a worker holds the pickup lease; its write soon holds the lease alone.
      return this.#rejected({ status: 'CONFLICT', retryAfterMs: Math.min(gate.retryAfterMs, input.timings.leaseMs) });
    }
    if (gate.status === 'DUPLICATE' && gate.owner.sessionTag !== sessionTag(sessionId)) return this.#duplicate(input, def, findExisting);
    return underSpan(async () => {
      if (gate.status !== 'ENDED') return this.#startSaga(input, workflowId, sessionId, def, gate);
      // The key's saga ended here: answered from it, whoever holds the intent now.
      try {
        return await answerOfExisting(this.#core, input, workflowId, sessionId, gate);
      } catch (err) {
        const { WorkflowNotFoundError } = await temporalClientLibrary();
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      // Temporal no longer keeps it (its retention is shorter than the key's record): a new request.
      const again = await this.#gate(input, sessionId, def, false);
      if (again.status === 'CONFLICT') return this.#rejected({ status: 'CONFLICT', retryAfterMs: Math.min(again.retryAfterMs, input.timings.leaseMs) });
      if (again.status === 'DUPLICATE' && again.owner.sessionTag !== sessionTag(sessionId)) return this.#duplicate(input, def, findExisting);
      if (again.status === 'ENDED') throw new Error(`SagaClient.start: the gate answered ENDED unasked for ${workflowId}`);
      return this.#startSaga(input, workflowId, sessionId, def, again);
    });
  }

  /**
   * The gate of one start: the intent's reservation, or an operation's entity lock (its owner's
   * only), taken for the pickup lease; with `answerEnded`, ENDED first when the key's saga ended here.
   */
  #gate(input: GateRequest, sessionId: string, def: SagaType<unknown>, answerEnded: boolean): Promise<GateAnswer> {
    const deps = this.#deps();
    const { table } = def;
    const leaseMs = this.#core.options.pickupLeaseMs ?? Math.max(DEFAULT_PICKUP_LEASE_MS, input.timings.leaseMs);
    if (input.operation && isEntityOperation(def)) return this.#lock(deps, input as OperationRequest, def, { table, intentKey: input.intentKey, sessionId, leaseMs, answerEnded });
    const request: Parameters<typeof reserveIntent>[1] = { table, intentKey: input.intentKey, sessionId, leaseMs, answerEnded };
    if (input.legacyIntentKey !== undefined) request.legacyIntentKey = input.legacyIntentKey;
    return reserveIntent(deps, request);
  }

  /** What the gate works with (see GateDeps), from the client's options, made once. */
  #gateDeps?: Parameters<typeof reserveIntent>[0];

  #deps(): Parameters<typeof reserveIntent>[0] {
    if (this.#gateDeps) return this.#gateDeps;
    const { rms, pool, existsTtlMs, keyRetentionMs, metrics } = this.#core.options;
    return (this.#gateDeps = { rms, pool, existsTtlMs, keyRetentionMs, metrics });
  }

  /** The gate of an entity operation: its entity's lock (see {@link lockEntity}). */
  async #lock(
    deps: Parameters<typeof reserveIntent>[0],
    input: OperationRequest,
    def: EntityOperation<unknown>,
    request: { table: SagaType<unknown>['table']; intentKey: string; sessionId: string; leaseMs: number; answerEnded: boolean },
  ): Promise<GateAnswer> {
    const { scope } = def;
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
    if (gate.status === 'DUPLICATE') return answerOfExisting(this.#core, input, workflowId, sessionId, gate);
    // Limits are counted only for what would start a saga: a DUPLICATE or a CONFLICT never pays for them.
    const limited = await this.#admit(input, def, sessionId, gate);
    if (limited?.admitted.status === 'LIMITED') return { ...this.#rejected({ status: 'CONFLICT', retryAfterMs: limited.admitted.retryAfterMs }), limited: limited.admitted.limit };
    const counted = limited && !limited.admitted.alreadyCounted ? limited.limits : undefined;
    const taken = { sessionId, fencingToken: gate.fencingToken, expiresAt: gate.expiresAt };
    const answer: ReservationAnswer = { status: 'SUCCESS', fencingToken: gate.fencingToken, expiresAt: gate.expiresAt };
    try {
      const [client, { INTENT_KEY, SAGA_PHASE, SAGA_TYPE }] = await Promise.all([this.#core.temporalClient(), temporalDefinitions()]);
      // Sealed only by a client that encrypts: the worker then knows, without reading its history,
      // that the start reached Temporal encrypted. Any other start's history is read.
      const reservation = (await this.#encrypts(client)) ? { ...taken, mac: reservationMac(taken, { workflowId, requestHash: input.requestHash() }, this.#core.options.intentSecret) } : taken;
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
        taskQueue: this.#core.options.taskQueue,
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
        url: this.#core.url(workflowId),
      };
    } catch (err) {
      const { WorkflowExecutionAlreadyStartedError } = await temporalClientLibrary();
      if (err instanceof WorkflowExecutionAlreadyStartedError) return answerOfExisting(this.#core, input, workflowId, sessionId, gate, counted);
      // The start may have landed with its reply lost: the lease and the count are left to the saga,
      // or to expire (the count after its hold: see SagaDefinition.limits). The caller was told no
      // SUCCESS, so a lease this call took keeps only the saga's own length, not the pickup lease.
      if (!gate.alreadyHeld) {
        await this.#core.options.rms.extend({ intent: input.intentKey, sessionId, fencingToken: gate.fencingToken, leaseMs: input.timings.leaseMs }).catch(() => undefined);
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
        const { isEncrypted } = await import('../codec/encryption-codec.js');
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
   * A DUPLICATE; with `findExisting`, naming the live entity of the intent when the request's owner
   * created it (two point lookups by index: the intent's live row, then its owner). Nothing of
   * another owner's entity is said, not even that it was looked up.
   */
  async #duplicate(input: GateRequest, def: SagaType<unknown>, findExisting: boolean): Promise<GateReply> {
    const answer = this.#rejected({ status: 'DUPLICATE' });
    if (!findExisting || isEntityOperation(def)) return answer;
    const { types, pool, intentSecret } = this.#core.options;
    // Only a table that operations claim records whose each row is.
    const owned = Object.values(types).some((t) => isEntityOperation(t) && t.table.table === def.table.table);
    if (!owned) return answer;
    const row = await def.table.find(pool, input.intentKey);
    if (!row || (row.status !== 'REGISTERED' && row.status !== 'COMPLETED')) return answer;
    const claimable = await def.table.findById(pool, row.id);
    if (claimable?.createdBy !== input.owner) return answer;
    return { ...answer, entityId: encodeEntityId(intentSecret, def.table.table, row.id) };
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
    const { rms, types, intentSecret } = this.#core.options;
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
}
