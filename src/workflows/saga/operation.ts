/**
 * An entity operation (order-cancel, order-amend): its steps run while the saga holds its entity's
 * lock, then, for an operation that releases its entity, the release. Taken only when the plan the
 * worker derived names an operation: no saga started before that branch existed has such a plan.
 */
import { CancellationScope, isCancellation, workflowInfo } from '@temporalio/workflow';
import { SagaOutcome, SagaPhase, stepsUndoneBy, type SagaPlan, type SagaState } from '../../shared';
import { operationActivities } from './proxies';
import { holdingLock, untilRedriven, waitsForRedrive } from './attention';
import { compensate, compensatedOutcome, type Compensation } from './compensation';
import { deadlineExceeded, deadlineOf, pastDeadline } from './deadline';
import { failureMessage, failureType } from './failures';
import type { Patched } from './patches';
import { handlersSettled, lifecycle, type Redrives } from './state';
import { refusalUndone } from './steps';

/**
 * An entity operation (order-cancel), holding the entity's lock: the steps in order, each database
 * step claiming the entity's row with the lock's token (see EntityOperation), each step given the
 * earlier steps' results; then, for an operation that releases its entity, the release (a newer
 * holder's claim refuses it, and the steps are compensated as for a refused step); on a failure or a cancellation the compensations of the steps begun, in
 * reverse; and on every path the lock given back. A step without a compensation cannot be undone:
 * it runs to its end even when the saga is cancelled meanwhile, and is retried until it succeeds or
 * is refused.
 */
export async function runOperation(input: SagaPlan, entityId: string, fencingToken: string, state: SagaState, redrives: Redrives, has: Patched): Promise<SagaState> {
  const { workflowId } = workflowInfo();
  const act = operationActivities(input);
  const { enter, finish } = lifecycle(state, has);
  state.fencingToken = fencingToken;
  // Callers see the id they name the entity by; plans of earlier versions have only the row id.
  state.entityId = input.operation?.publicId ?? entityId;
  const owner = { type: input.type, intentKey: input.intentKey, sessionId: input.sessionId, fencingToken };
  const results: Record<string, unknown> = {};
  const request = (name: string) => ({
    ...owner,
    sagaKey: workflowId,
    payload: input.payload,
    name,
    operation: { entityId, results: { ...results }, leaseMs: input.timings.leaseMs, heartbeatIntervalMs: input.timings.heartbeatIntervalMs },
  });
  const compensations: Compensation[] = [];
  const deadline = deadlineOf(input);
  let ended: { outcome: SagaOutcome; reason?: string };
  try {
    enter(SagaPhase.RUNNING_STEPS);
    for (const plan of input.steps) {
      const { step, compensation } = plan;
      if (pastDeadline(deadline)) throw deadlineExceeded(deadline, `step ${step}`);
      if (compensation !== undefined) {
        const undoes = stepsUndoneBy(input, compensation);
        const refusedAfter = input.timings.compensationAttempts;
        compensations.push({ name: compensation, run: () => act.compensation(compensation).runOperationCompensation({ ...request(compensation), undoes, refusedAfter }) });
      }
      const run = () => act.step(step, compensation !== undefined).runOperationStep(request(step));
      const done = await refusalUndone(plan, compensations, () => (compensation === undefined ? CancellationScope.nonCancellable(run) : run()));
      results[step] = done.response;
      state.stepsDone.push(step);
    }
    // Only plans of operations that release carry `releases`: no earlier saga takes this branch.
    if (input.operation?.releases) await CancellationScope.nonCancellable(() => act.releaseEntity.releaseEntity({ ...owner, entityId }));
    ended = { outcome: SagaOutcome.COMPLETED };
  } catch (err) {
    const cancelled = isCancellation(err);
    state.errors.push({ at: state.phase, type: cancelled ? 'CANCELLED' : failureType(err), message: failureMessage(err) });
    enter(SagaPhase.COMPENSATING);
    let left = await CancellationScope.nonCancellable(() => compensate(compensations.reverse(), input.compensation, state));
    if (waitsForRedrive(left, input, redrives, has)) {
      // The entity stays locked while its operation is half undone: no other operation may run on it.
      left = await CancellationScope.nonCancellable(() =>
        holdingLock(act.hold, { ...owner, leaseMs: input.timings.leaseMs, heartbeatIntervalMs: input.timings.heartbeatIntervalMs }, state, () =>
          untilRedriven(left, input, state, redrives, has, (l) => compensate(l, input.compensation, state)),
        ),
      );
    }
    const reason = cancelled ? 'CANCELLED' : (failureType(err) ?? 'FAILED');
    ended = { outcome: compensatedOutcome(left.length > 0, reason), reason };
  }
  try {
    await CancellationScope.nonCancellable(() => act.release.releaseLock(owner));
  } catch (err) {
    // The lease ends by itself; the saga's outcome stands.
    state.errors.push({ at: 'releaseLock', type: failureType(err), message: failureMessage(err) });
  }
  finish(ended.outcome, ended.reason);
  // A redrive that ended the saga answers with its outcome before the workflow completes.
  if (state.attention !== undefined) await handlersSettled();
  return state;
}
