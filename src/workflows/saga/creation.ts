/**
 * A creation once it holds its reservation: the fenced write while heartbeats keep the lease,
 * finalisation, the plan's steps (see steps), and on any failure or cancellation the compensations
 * in reverse, with a wait for a redrive where they could not all finish (see attention).
 */
import { CancellationScope, isCancellation } from '@temporalio/workflow';
import { ErrorType, SagaOutcome, SagaPhase, type SagaInput, type SagaState } from '../../shared';
import { activities } from './proxies';
import { waitsForRedrive, untilRedriven } from './attention';
import { compensate, compensateKeepingEntity, compensatedOutcome } from './compensation';
import { deadlineOf, deadlinePassed, pastDeadline } from './deadline';
import { failureMessage, failureType } from './failures';
import { FORWARD_PATCH, KEEP_ENTITY_PATCH, REJECTED_AT_WRITE_PATCH, WRITE_REGISTERS_PATCH, type Patched } from './patches';
import { handlersSettled, lifecycle, type Redrives, type ReservedSaga, type Signals } from './state';
import { runSteps } from './steps';

/**
 * Everything after a successful reservation: the fenced write, finalisation, steps, compensation.
 * `searchableRegistered`: also upsert the REGISTERED phase, as sagas from before the gate did (it is
 * followed by RUNNING_STEPS in the same workflow task, so nobody outside could ever see it).
 */
export async function runReserved(
  input: SagaInput,
  sessionId: string,
  fencingToken: string,
  state: SagaState,
  options: { searchableRegistered: boolean; redrives?: Redrives; has: Patched; signals?: Signals },
): Promise<SagaState> {
  const act = activities(input);
  const { has } = options;
  const { enter, finish, reject } = lifecycle(state, has);
  state.fencingToken = fencingToken;

  const owner = { type: input.type, intentKey: input.intentKey, sessionId, fencingToken };
  const saga: ReservedSaga = {
    input,
    state,
    has,
    act,
    owner,
    deadline: deadlineOf(input),
    compensations: [
      {
        name: 'undoEntity',
        run: () => act.compensation.undoEntity({ ...owner, freeIntent: input.compensation.freeIntent }),
      },
    ],
    ...(options.signals === undefined ? {} : { signals: options.signals }),
    enter,
  };
  const { deadline, compensations } = saga;

  if (pastDeadline(deadline)) {
    // Nothing is written past the deadline: the reservation is given back, the intent left free.
    state.errors.push({ at: state.phase, type: ErrorType.DEADLINE_EXCEEDED, message: deadlinePassed(deadline, 'the fenced write: nothing was written') });
    try {
      await CancellationScope.nonCancellable(() => act.release.releaseLock(owner));
    } catch (err) {
      // The lease ends by itself; the saga's outcome stands.
      state.errors.push({ at: 'releaseLock', type: failureType(err), message: failureMessage(err) });
    }
    return finish(SagaOutcome.EXPIRED, ErrorType.DEADLINE_EXCEEDED);
  }

  // Set when the write found another saga's entity and the saga ends REJECTED (REJECTED_AT_WRITE_PATCH).
  let rejectedAtWrite = false;
  // Set when the last step marked the row COMPLETED with its own effect (WRITE_REGISTERS_PATCH).
  let completed = false;
  try {
    // 2. Fenced write, kept alive by heartbeats that extend the lease; since write-registers it also
    // finalises (3): the row is REGISTERED in the write's transaction, then the reservation promoted.
    enter(SagaPhase.WRITING);
    const registers = has(WRITE_REGISTERS_PATCH);
    // A plan without an owner (earlier histories, plain starts) writes none: its arguments are as they were.
    const request = { ...owner, payload: input.payload, timings: input.timings, ...(input.owner === undefined ? {} : { createdBy: input.owner }) };
    const written = registers ? await act.writeRegistered.writeEntity({ ...request, register: true }) : await act.write.writeEntity(request);
    if (written.status === 'DUPLICATE') {
      // PostgreSQL knew an entity that Redis had forgotten; the activity repaired the RMS.
      rejectedAtWrite = has(REJECTED_AT_WRITE_PATCH);
      return reject('DUPLICATE');
    }
    state.entityId = written.entityId;

    // 3. Finalise: the row becomes REGISTERED (fenced) before the reservation is promoted.
    if (!registers) await act.finalize.finalizeEntity(owner);
    if (options.searchableRegistered) enter(SagaPhase.REGISTERED);
    else state.phase = SagaPhase.REGISTERED;

    // 4. The remaining steps; the last one may have completed the row in its own transaction.
    completed = (await runSteps(saga, written.entityId)).completed;
    if (!has(FORWARD_PATCH)) {
      await act.complete.completeEntity(owner);
      return finish(SagaOutcome.COMPLETED);
    }
  } catch (err) {
    // Nothing of its own to undo: the rejection ends the saga, as at its reservation.
    if (rejectedAtWrite) throw err;
    const cancelled = isCancellation(err);
    state.errors.push({ at: state.phase, type: cancelled ? 'CANCELLED' : failureType(err), message: failureMessage(err) });
    enter(SagaPhase.COMPENSATING);
    const reversed = compensations.reverse();
    let left = await CancellationScope.nonCancellable(() =>
      has(KEEP_ENTITY_PATCH) ? compensateKeepingEntity(reversed, input.compensation, state) : compensate(reversed, input.compensation, state),
    );
    const { redrives } = options;
    if (waitsForRedrive(left, input, redrives, has)) {
      left = await CancellationScope.nonCancellable(() => untilRedriven(left, input, state, redrives, has, (l) => compensateKeepingEntity(l, input.compensation, state)));
    }
    const reason = cancelled ? 'CANCELLED' : (failureType(err) ?? 'FAILED');
    finish(compensatedOutcome(left.length > 0, reason), reason);
    // A redrive that ended the saga answers with its outcome before the workflow completes.
    if (state.attention !== undefined) await handlersSettled();
    return state;
  }
  // 5. Every step has succeeded: the saga only goes forward. Marking the row COMPLETED is retried
  // until it succeeds (a PostgreSQL failover must not undo a paid order), and a cancellation can no
  // longer stop it.
  if (!completed) await CancellationScope.nonCancellable(() => act.forward.completeEntity(owner));
  return finish(SagaOutcome.COMPLETED);
}
