/**
 * What one saga's phases share as it runs: its state (what the `state` query answers), the patches
 * it takes, and what its update handlers and its phases tell each other ({@link SagaRun}); and how
 * it moves from phase to phase ({@link lifecycle}). A workflow makes one of each per saga: nothing
 * here lives in a module's globals, which every saga in a worker's isolate would share.
 */
import { ApplicationFailure, CancellationScope, allHandlersFinished, condition, upsertSearchAttributes } from '@temporalio/workflow';
import { ErrorType, SAGA_OUTCOME, SAGA_PHASE, SagaOutcome, SagaPhase, type SagaInput, type SagaPlan, type SagaStart, type SagaState } from '../../shared';
import type { Compensation } from './compensation';
import { isRecord } from './failures';
import { REJECTED_FAILS_PATCH, type Patched } from './patches';
import type { activities } from './proxies';

/**
 * The redrives an operator sent (`redrive` updates accepted) and those the saga has run a round
 * for: updates accepted together are answered by one round, so none runs a compensation twice.
 * `waitEnded`: a wait ran out without a redrive; the saga ends COMPENSATION_FAILED, whatever its
 * phase still says meanwhile.
 */
export interface Redrives {
  asked: number;
  answered: number;
  waitEnded: boolean;
}

/** The signals a saga received, by name (the first payload of each), and the waits that timed out. */
export interface Signals {
  received: Map<string, unknown>;
  timedOut: Set<string>;
}

/**
 * One saga started through the gate (or by type), as its update handlers and its phases share it:
 * one object, made at its start ({@link newSagaRun}) and handed to each of them.
 */
export interface SagaRun {
  /** The saga's state: what the `state` query answers, and what it ends with. */
  readonly state: SagaState;
  /** Whether the saga runs the code of a patch (see patchesOf). */
  readonly has: Patched;
  /** Set once the worker has derived the plan; the update handlers wait for it. */
  readonly known: { plan?: SagaPlan };
  /** The redrives asked and answered (see the `redrive` update). */
  readonly redrives: Redrives;
  /** The signals received (see the `signal` update) and the waits that timed out. */
  readonly signals: Signals;
  /** Why planning or reserving failed, once it did: a waiting `reservation` update answers with it. */
  reservationFailed?: string;
}

/**
 * A creation that holds its reservation, as its write, its steps and its compensation share it (see
 * runReserved): one object, made once the saga has its fencing token.
 */
export interface ReservedSaga {
  readonly input: SagaInput;
  /** The saga's state (see {@link SagaRun.state}). */
  readonly state: SagaState;
  readonly has: Patched;
  readonly act: ReturnType<typeof activities>;
  /** Whose reservation the saga holds: every fenced activity names it. */
  readonly owner: { type: string; intentKey: string; sessionId: string; fencingToken: string };
  /** When the saga's deadline passes (see deadlineOf); undefined: it has none. */
  readonly deadline: number | undefined;
  /** Compensations are registered before the effect they undo, and run in reverse. */
  readonly compensations: Compensation[];
  /** The signals received; none for a saga from before the gate (it takes no signal). */
  readonly signals?: Signals;
  readonly enter: (phase: SagaPhase) => void;
}

/**
 * The run of a saga just started, in RESERVING: its type and key as the start names them (the plan
 * replaces them once derived), nothing received, nothing redriven.
 */
export function newSagaRun(start: SagaStart | SagaInput, known: { plan?: SagaPlan }, has: Patched): SagaRun {
  const given: Record<string, unknown> = isRecord(start) ? start : {};
  const state: SagaState = {
    type: typeof given.type === 'string' ? given.type : '',
    idempotencyKey: typeof given.idempotencyKey === 'string' ? given.idempotencyKey : '',
    requestHash: '',
    intentKey: '',
    phase: SagaPhase.RESERVING,
    stepsDone: [],
    compensationsRun: [],
    errors: [],
  };
  return { state, has, known, redrives: { asked: 0, answered: 0, waitEnded: false }, signals: { received: new Map(), timedOut: new Set() } };
}

/** Setting the phase and the search attributes together, and ending the saga with its outcome. */
export function lifecycle(state: SagaState, has: Patched) {
  const finish = (outcome: SagaOutcome, reason?: string): SagaState => {
    state.outcome = outcome;
    if (reason !== undefined) state.reason = reason;
    state.phase = outcome;
    upsertSearchAttributes([
      { key: SAGA_PHASE, value: outcome },
      { key: SAGA_OUTCOME, value: outcome },
    ]);
    return state;
  };
  return {
    enter: (phase: SagaPhase) => {
      state.phase = phase;
      upsertSearchAttributes([{ key: SAGA_PHASE, value: phase }]);
    },
    finish,
    /** Ends the saga REJECTED: a failed workflow carrying its state ({@link REJECTED_FAILS_PATCH}), or a completed one before it. */
    reject: (reason: string): SagaState => {
      finish(SagaOutcome.REJECTED, reason);
      if (!has(REJECTED_FAILS_PATCH)) return state;
      throw ApplicationFailure.create({ message: `saga rejected: ${reason}`, type: ErrorType.SAGA_REJECTED, nonRetryable: true, details: [state] });
    },
  };
}

/** Lets running update handlers finish (they answer the caller), even in a cancelled saga. */
export function handlersSettled(): Promise<void> {
  return CancellationScope.nonCancellable(() => condition(allHandlersFinished));
}
