/**
 * The reservation saga: reserve the intent (answered early to the caller), write the fenced row while
 * heartbeats keep the lease, finalise, run the remaining steps, and on any failure or cancellation run
 * the compensations and end in a terminal state. Deterministic: activities do all I/O.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { SagaActivities } from '../activities/saga';
import {
  ErrorType,
  INTENT_KEY,
  SAGA_OUTCOME,
  SAGA_PHASE,
  SAGA_TYPE,
  SagaOutcome,
  SagaPhase,
  reservationUpdate,
  stateQuery,
  type SagaInput,
  type SagaState,
} from '../shared';

/** Activity options. Infrastructure errors retry; business outcomes are non-retryable failures. */
const RETRY_INFRA = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 8 } as const;

function activities(input: SagaInput) {
  const quick: ActivityOptions = { startToCloseTimeout: '10s', retry: RETRY_INFRA };
  // On cancellation the saga waits for a running activity to settle: a step's compensation must
  // never run before (and so miss) the effect of the step it undoes.
  const settle = { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } as const;
  return {
    reserve: proxyActivities<SagaActivities>({ ...quick, summary: 'reserve the intent in the RMS', retry: { ...RETRY_INFRA, maximumAttempts: 4 } }),
    write: proxyActivities<SagaActivities>({
      // A long, monolithic write: its liveness is the heartbeat, not the start-to-close timeout.
      startToCloseTimeout: '30m',
      heartbeatTimeout: input.timings.heartbeatTimeoutMs,
      summary: 'write the fenced row (heartbeats extend the lease)',
      retry: { ...RETRY_INFRA, maximumAttempts: 5 },
      ...settle,
    }),
    finalize: proxyActivities<SagaActivities>({ ...quick, summary: 'mark the row REGISTERED, promote the reservation', ...settle }),
    complete: proxyActivities<SagaActivities>({ ...quick, summary: 'mark the row COMPLETED', ...settle }),
    step: proxyActivities<SagaActivities>({ startToCloseTimeout: '60s', retry: RETRY_INFRA, ...settle }),
    compensation: proxyActivities<SagaActivities>({
      startToCloseTimeout: '60s',
      retry: { ...RETRY_INFRA, maximumAttempts: input.timings.compensationAttempts },
    }),
  };
}

/** The business `type` of a failure, looking through the ActivityFailure wrapper. */
function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

function failureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

/** Orchestrates one saga of any type; the type's plan (steps, compensation policy) comes in `input`. */
export async function reservationSaga(input: SagaInput): Promise<SagaState> {
  const { runId, workflowId } = workflowInfo();
  const sessionId = runId;
  const act = activities(input);
  const state: SagaState = {
    type: input.type,
    idempotencyKey: input.idempotencyKey,
    requestHash: input.requestHash,
    intentKey: input.intentKey,
    phase: SagaPhase.RESERVING,
    stepsDone: [],
    compensationsRun: [],
    errors: [],
  };
  let reservationFailed: string | undefined;

  setHandler(stateQuery, () => state);
  setHandler(
    reservationUpdate,
    async () => {
      await condition(() => state.reservation !== undefined || reservationFailed !== undefined);
      if (state.reservation) return state.reservation;
      throw ApplicationFailure.nonRetryable(`reservation failed: ${reservationFailed}`, 'RESERVATION_FAILED');
    },
    {
      // Same idempotency key, other payload: refused before anything is written to history.
      validator: ({ requestHash }) => {
        if (requestHash !== input.requestHash) {
          throw ApplicationFailure.nonRetryable(
            `idempotency key ${input.idempotencyKey} was already used with another payload`,
            ErrorType.IDEMPOTENCY_KEY_REUSED,
          );
        }
      },
    },
  );

  const enter = (phase: SagaPhase) => {
    state.phase = phase;
    upsertSearchAttributes([{ key: SAGA_PHASE, value: phase }]);
  };
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
  upsertSearchAttributes([
    { key: SAGA_TYPE, value: input.type },
    { key: INTENT_KEY, value: input.intentKey },
    { key: SAGA_PHASE, value: SagaPhase.RESERVING },
  ]);

  // 1. Reserve: the only synchronous step; its answer goes back to the caller through the update.
  try {
    state.reservation = await act.reserve.reserveIntent({ type: input.type, intentKey: input.intentKey, sessionId, leaseMs: input.timings.leaseMs });
  } catch (err) {
    reservationFailed = failureMessage(err);
    state.errors.push({ at: 'reserveIntent', type: failureType(err), message: reservationFailed });
    return finish(SagaOutcome.REJECTED, 'RESERVATION_FAILED');
  }
  if (state.reservation.status !== 'SUCCESS') return finish(SagaOutcome.REJECTED, state.reservation.status);
  const fencingToken = state.reservation.fencingToken;
  state.fencingToken = fencingToken;

  const owner = { type: input.type, intentKey: input.intentKey, sessionId, fencingToken };
  const stepContext = { ...owner, sagaKey: workflowId, payload: input.payload };
  // Compensations are registered before the effect they undo, and run in reverse.
  const compensations: { name: string; run: () => Promise<unknown> }[] = [
    {
      name: 'undoEntity',
      run: () => act.compensation.undoEntity({ ...owner, freeIntent: input.compensation.freeIntent }),
    },
  ];

  try {
    // 2. Fenced write, kept alive by heartbeats that extend the lease.
    enter(SagaPhase.WRITING);
    const written = await act.write.writeEntity({ ...owner, payload: input.payload, timings: input.timings });
    if (written.status === 'DUPLICATE') {
      // PostgreSQL knew an entity that Redis had forgotten; the activity repaired the RMS.
      return finish(SagaOutcome.REJECTED, 'DUPLICATE');
    }
    state.entityId = written.entityId;

    // 3. Finalise: the row becomes REGISTERED (fenced) before the reservation is promoted.
    await act.finalize.finalizeEntity(owner);
    enter(SagaPhase.REGISTERED);

    // 4. The remaining steps.
    enter(SagaPhase.RUNNING_STEPS);
    for (const { step, compensation } of input.steps) {
      compensations.push({ name: compensation, run: () => act.compensation.runCompensation({ ...stepContext, name: compensation }) });
      await act.step.runStep({ ...stepContext, name: step });
      state.stepsDone.push(step);
    }
    await act.complete.completeEntity(owner);
    return finish(SagaOutcome.COMPLETED);
  } catch (err) {
    const cancelled = isCancellation(err);
    state.errors.push({ at: state.phase, type: cancelled ? 'CANCELLED' : failureType(err), message: failureMessage(err) });
    enter(SagaPhase.COMPENSATING);
    const failed = await CancellationScope.nonCancellable(() => compensate(compensations.reverse(), input.compensation, state));
    const reason = cancelled ? 'CANCELLED' : (failureType(err) ?? 'FAILED');
    return finish(failed ? SagaOutcome.COMPENSATION_FAILED : SagaOutcome.COMPENSATED, reason);
  }
}

/** Runs the compensations by the type's policy; records every failure; true if any failed. */
async function compensate(
  ordered: { name: string; run: () => Promise<unknown> }[],
  policy: SagaInput['compensation'],
  state: SagaState,
): Promise<boolean> {
  let failed = false;
  const runOne = async (c: (typeof ordered)[number]) => {
    try {
      await c.run();
      state.compensationsRun.push(c.name);
      return true;
    } catch (err) {
      failed = true;
      state.errors.push({ at: c.name, type: failureType(err), message: failureMessage(err) });
      return false;
    }
  };
  if (policy.parallel) {
    await Promise.all(ordered.map(runOne));
  } else {
    for (const c of ordered) {
      if (!(await runOne(c)) && !policy.continueOnError) break;
    }
  }
  return failed;
}
