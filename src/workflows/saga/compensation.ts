/**
 * Compensation: the undo of each step begun, in reverse, by the type's policy (in order or in
 * parallel, stopping at a failure or going on). Every failure is recorded, never swallowed; what
 * could not be undone is returned, for a redrive (see attention) or a COMPENSATION_FAILED end.
 */
import { ErrorType, SagaOutcome, type SagaInput, type SagaState } from '../../shared';
import { failureMessage, failureType } from './failures';

/** One compensation of a saga, as it runs it. */
export interface Compensation {
  name: string;
  run: () => Promise<unknown>;
}

/**
 * How a saga that compensated after `reason` ends: EXPIRED when its deadline made it compensate and
 * every compensation succeeded, COMPENSATED when something else did, COMPENSATION_FAILED when one failed.
 */
export function compensatedOutcome(failed: boolean, reason: string): SagaOutcome {
  if (failed) return SagaOutcome.COMPENSATION_FAILED;
  return reason === ErrorType.DEADLINE_EXCEEDED ? SagaOutcome.EXPIRED : SagaOutcome.COMPENSATED;
}

/**
 * Runs the steps' compensations by the type's policy, then undoes the entity only if every one of
 * them succeeded: a saga that ends COMPENSATION_FAILED keeps its row and its intent (the customer,
 * the items and the amount an operator needs to settle it; no new saga may take the row over).
 * Records every failure; returns the compensations not done (failed, or never run), in their order:
 * none when every one succeeded. `ordered` ends with `undoEntity`.
 */
export async function compensateKeepingEntity(ordered: Compensation[], policy: SagaInput['compensation'], state: SagaState): Promise<Compensation[]> {
  const undo = ordered[ordered.length - 1]!;
  const left = await compensate(ordered.slice(0, -1), policy, state);
  if (left.length > 0) return [...left, undo];
  return compensate([undo], policy, state);
}

/**
 * Runs the compensations by the type's policy; records every failure; returns those not done
 * (failed, or not run after a failure without `continueOnError`), in their order.
 */
export async function compensate(ordered: Compensation[], policy: SagaInput['compensation'], state: SagaState): Promise<Compensation[]> {
  const done = new Set<Compensation>();
  const runOne = async (c: Compensation) => {
    try {
      await c.run();
      state.compensationsRun.push(c.name);
      done.add(c);
      return true;
    } catch (err) {
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
  return ordered.filter((c) => !done.has(c));
}
