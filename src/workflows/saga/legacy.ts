/** The saga as started before the gate ({@link legacySaga}): what sagas of that time replay. */
import { ApplicationFailure, condition, patched, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { INTENT_KEY, SAGA_PHASE, SAGA_TYPE, SagaOutcome, SagaPhase, reservationUpdate, stateQuery, type SagaInput, type SagaState } from '../../shared';
import { activities } from './proxies';
import { runReserved } from './creation';
import { failureMessage, failureType, hashOf, keyReused } from './failures';
import { lifecycle } from './state';

/**
 * The saga as started before the gate: the client computed the plan, the workflow reserved with
 * its run id as the session. Kept unchanged so that running sagas and recorded histories replay.
 */
export async function legacySaga(input: SagaInput): Promise<SagaState> {
  const { runId } = workflowInfo();
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
  // Before the gate: each patch is asked on its own (folded-patches came later).
  const { finish } = lifecycle(state, patched);

  setHandler(stateQuery, () => state);
  setHandler(
    reservationUpdate,
    async () => {
      await condition(() => state.reservation !== undefined || reservationFailed !== undefined);
      if (state.reservation) return state.reservation;
      throw ApplicationFailure.nonRetryable(`reservation failed: ${reservationFailed}`, 'RESERVATION_FAILED');
    },
    {
      validator: (request) => {
        if (hashOf(request) !== input.requestHash) throw keyReused(input.idempotencyKey);
      },
    },
  );
  upsertSearchAttributes([
    { key: SAGA_TYPE, value: input.type },
    { key: INTENT_KEY, value: input.intentKey },
    { key: SAGA_PHASE, value: SagaPhase.RESERVING },
  ]);

  try {
    state.reservation = await act.reserve.reserveIntent({ type: input.type, intentKey: input.intentKey, sessionId, leaseMs: input.timings.leaseMs });
  } catch (err) {
    reservationFailed = failureMessage(err);
    state.errors.push({ at: 'reserveIntent', type: failureType(err), message: reservationFailed });
    return finish(SagaOutcome.REJECTED, 'RESERVATION_FAILED');
  }
  if (state.reservation.status !== 'SUCCESS') return finish(SagaOutcome.REJECTED, state.reservation.status);
  return runReserved(input, sessionId, state.reservation.fencingToken, state, { searchableRegistered: true, has: patched });
}
