/**
 * What SagaClient's start is asked (StartOptions) and answers (StartedSaga), and the answer of a key
 * whose saga exists: a retry is answered from that saga (its memo and search attributes, with no
 * worker), and a call that waits for the saga's end gets its final state. The gate that takes the
 * reservation and starts the saga is gate.ts.
 */
import type { GateAnswer } from '../gate';
import { SagaInputError, unkeyedRequestHash, type SagaRequest } from '../sagas';
import { ErrorType, SagaPhase, type ReservationAnswer, type SagaEnd, type SagaLimitCounters, type SagaMemo, type SagaState } from '../shared/saga';
import { temporalClientLibrary, temporalDefinitions, type ClientCore } from './core';
import { endOf, finalState, recordedState, resultOf } from './reads';

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
  /**
   * On a DUPLICATE, look the existing entity up (one PostgreSQL point lookup, only then) and answer
   * its `entityId` when it is the caller's own: created for the same owner. Another owner's entity
   * is answered as before, DUPLICATE and nothing more. A type whose table no operation claims
   * records no owners, so its DUPLICATE never names one. @default false: the gate's one Redis round trip
   */
  findExisting?: boolean;
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
  /**
   * On a DUPLICATE asked with {@link StartOptions.findExisting}: the id of the entity that holds the
   * intent (what its operations take), when the caller's owner created it; absent otherwise.
   */
  entityId?: string;
  /** The saga in the Temporal UI; absent when no saga was started. */
  url?: string;
}

/** How many answers the gate gave, by status: rejected requests have no saga page to count them by. */
export type GateCounts = Record<ReservationAnswer['status'], number>;

/** A start's request as the gate takes it: its hash is computed only when an answer needs it. */
export type GateRequest = SagaRequest & { requestHash: () => string };

/** What one start call answers, before the fields every answer shares. */
export type GateReply = Omit<StartedSaga, 'workflowId' | 'intentKey' | 'idempotencyKey'>;

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
export async function answerOfExisting(core: ClientCore, input: GateRequest, workflowId: string, sessionId: string, gate: GateAnswer, counted?: SagaLimitCounters): Promise<GateReply> {
  const [client, { INTENT_KEY, SAGA_OUTCOME, SAGA_PHASE, reservationUpdate, stateQuery }] = await Promise.all([core.temporalClient(), temporalDefinitions()]);
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
    if (!sagas) await core.options.rms.release({ intent: input.intentKey, sessionId, fencingToken: gate.fencingToken }).catch(() => undefined);
  }
  // This call counted the session in its caller's limits for a saga it did not start: the key's saga
  // counts itself out when it ends, if it runs for this caller; otherwise nothing would.
  if (counted && !(running && memo.owner === input.owner)) {
    await core.options.rms.countOut({ tag: counted.tag, counters: counted.counters, sessionId }).catch(() => undefined);
  }
  // Another owner's saga under this key (a library key shaped like an HTTP client's): not ours to answer from.
  if (memo.owner !== undefined && memo.owner !== input.owner) throw keyReused(input.idempotencyKey);
  let recordedHash = memo.requestHash;
  let answer = memo.reservation;
  if (recordedHash === undefined || answer === undefined) {
    // Started by a plain Temporal client, and not yet (or never) reserved.
    const state = running ? await handle.query(stateQuery) : await finalState(core, workflowId);
    recordedHash = state.requestHash;
    answer = state.reservation;
  }
  // A saga started before request hashes were keyed recorded the plain SHA-256 of the same request.
  if (recordedHash !== input.requestHash() && recordedHash !== unkeyedRequestHash(input)) throw keyReused(input.idempotencyKey);
  answer ??= await handle.executeUpdate(reservationUpdate, { args: [{ requestHash: recordedHash }] });
  const outcome = running ? undefined : endOf(description.status.name, attributes.get(SAGA_OUTCOME));
  return { runId: description.runId, reservation: answer, started: true, url: core.url(workflowId), ...(outcome ? { outcome } : {}), replayed: true };
}

/**
 * The started saga with its outcome and final state when it ends within `waitMs`; as it was when it
 * does not (the long poll is cancelled then, so nothing outlives the call).
 */
export async function awaitEnd(core: ClientCore, started: StartedSaga, waitMs: number): Promise<StartedSaga> {
  const client = await core.temporalClient();
  const signal = AbortSignal.timeout(waitMs);
  let final: SagaState;
  try {
    final = await client.withAbortSignal(signal, () => resultOf(core, started.workflowId));
  } catch (err) {
    if (signal.aborted) return started;
    const { WorkflowFailedError } = await temporalClientLibrary();
    if (!(err instanceof WorkflowFailedError)) throw err;
    // Stopped without a state (terminated, timed out, refused input): what its execution records.
    final = await recordedState(await client.workflow.getHandle(started.workflowId).describe());
  }
  return { ...started, ...(final.outcome ? { outcome: final.outcome } : {}), final };
}

function keyReused(key: string): SagaInputError {
  return new SagaInputError(`idempotency key ${key} was already used with another payload`, ErrorType.IDEMPOTENCY_KEY_REUSED);
}
