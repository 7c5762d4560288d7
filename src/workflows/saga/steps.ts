/**
 * The steps of a saga's plan as a creation runs them, after its row was finalised: one at a time, or
 * a group next to each other at once, each compensation registered before its step starts; a wait
 * where the plan has one. Each step sees what the steps before it returned.
 */
import { CancellationScope, workflowInfo } from '@temporalio/workflow';
import { ErrorType, SagaPhase, stepsUndoneBy, type SagaStepPlan, type SagaWaitEventKind } from '../../shared';
import { sagaEvents } from '../saga-events';
import type { Compensation } from './compensation';
import { deadlineExceeded, pastDeadline } from './deadline';
import { failureType } from './failures';
import { STEP_HEARTBEAT_PATCH, WRITE_REGISTERS_PATCH } from './patches';
import type { ReservedSaga } from './state';
import { waitFor } from './waits';

/**
 * Runs the plan's steps of `saga`, whose row `entityId` is finalised, in RUNNING_STEPS: registers
 * each step's compensation on `saga.compensations` before the step starts, and throws the first
 * failure (the saga then compensates). Steps heartbeat ({@link STEP_HEARTBEAT_PATCH}) but in sagas
 * started before that patch.
 */
export async function runSteps(saga: ReservedSaga, entityId: string): Promise<{ completed: boolean }> {
  const { input, state, has, act, deadline, compensations, enter } = saga;
  const { workflowId } = workflowInfo();
  const stepContext = { ...saga.owner, sagaKey: workflowId, payload: input.payload };
  enter(SagaPhase.RUNNING_STEPS);
  const heartbeating = input.steps.length > 0 && has(STEP_HEARTBEAT_PATCH);
  // What each step returned: the steps after it and the compensations see it (StepRequest.created).
  const results: Record<string, unknown> = {};
  const created = () => ({ entityId, results: { ...results } });
  const batches = stepBatches(input.steps);
  // The last step, run alone, completes the row with its effect when it is in our database (write-registers).
  const last = batches.at(-1);
  const completing = has(WRITE_REGISTERS_PATCH) && last?.length === 1 && last[0]!.wait === undefined ? last[0]!.step : undefined;
  let completed = false;
  for (const batch of batches) {
    if (pastDeadline(deadline)) throw deadlineExceeded(deadline, `step ${batch.map((s) => s.step).join(', ')}`);
    // Only plans with waits take this branch, and no plan of an earlier version has one.
    const { wait, step: waitStep } = batch[0]!;
    if (wait !== undefined) {
      const told = (event: SagaWaitEventKind) => sagaEvents.wait({ type: input.type, intentKey: input.intentKey, step: waitStep, event });
      results[waitStep] = await waitFor(waitStep, wait, deadline, state, saga.signals ?? { received: new Map(), timedOut: new Set() }, enter, told);
      state.stepsDone.push(waitStep);
      continue;
    }
    // A group's compensations are all registered before any of its steps starts. A step without
    // one (plans of earlier versions have none such) cannot be undone.
    for (const { compensation } of batch) {
      if (compensation === undefined) continue;
      const undo = heartbeating ? act.namedCompensation(compensation) : act.compensation;
      // The steps it undoes come from the recorded plan, never from the worker's type (see StepRequest.undoes).
      const undoes = stepsUndoneBy(input, compensation);
      const refusedAfter = input.timings.compensationAttempts;
      compensations.push({ name: compensation, run: () => undo.runCompensation({ ...stepContext, name: compensation, undoes, refusedAfter, created: created() }) });
    }
    // The steps of a group see what the steps before the group returned.
    const before = created();
    await allSettledOrFirstFailure(
      batch.map(async (plan) => {
        const { step, compensation } = plan;
        const undoable = compensation !== undefined;
        const completes = step === completing ? { completes: true } : {};
        const run = () => (heartbeating ? act.heartbeatingStep(step, undoable) : act.step).runStep({ ...stepContext, name: step, created: before, ...completes });
        // A step nothing could undo runs to its end, even when the saga is cancelled meanwhile.
        const done = await refusalUndone(plan, compensations, () => (undoable ? run() : CancellationScope.nonCancellable(run)));
        // Histories of earlier versions recorded no response.
        if (done.response !== undefined) results[step] = done.response;
        if (done.completed === true) completed = true;
        state.stepsDone.push(step);
      }),
    );
  }
  return { completed };
}

/**
 * Runs step `plan`; when it is refused (STEP_REJECTED) and its plan says a refusal leaves nothing to
 * undo (`undoRefused: false`), its own compensation is taken off `compensations` first. Plans of
 * earlier versions have no `undoRefused`: their refused steps are compensated, as they always were.
 */
export async function refusalUndone<T>(plan: SagaStepPlan, compensations: Compensation[], run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (plan.undoRefused === false && failureType(err) === ErrorType.STEP_REJECTED) {
      const at = compensations.findIndex((c) => c.name === plan.compensation);
      if (at >= 0) compensations.splice(at, 1);
    }
    throw err;
  }
}

/** The plan's steps as they run: one at a time, or a group of steps next to each other at once. */
export function stepBatches<S extends { group?: string }>(steps: readonly S[]): S[][] {
  const batches: S[][] = [];
  for (const step of steps) {
    const last = batches.at(-1);
    if (step.group !== undefined && last && last[0]!.group === step.group) last.push(step);
    else batches.push([step]);
  }
  return batches;
}

/**
 * Waits for every one of `runs` to end, then throws the first failure among them, in their order:
 * a step of a group that failed never cuts the others short (their compensations run after them).
 */
export async function allSettledOrFirstFailure(runs: Promise<void>[]): Promise<void> {
  const settled = await Promise.allSettled(runs);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
