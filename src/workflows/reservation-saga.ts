/**
 * The reservation saga: confirm the reservation the gate took (or reserve, when a plain Temporal
 * client started it), write the fenced row while heartbeats keep the lease, finalise, run the
 * remaining steps, and on any failure or cancellation run the compensations and end in a terminal
 * state. Deterministic: activities do all I/O.
 *
 * This file is the workflow and its wiring; each phase has a module of its own under saga/: the
 * patches (patches), plan and reserve (plan), a creation's write and finalisation (creation), its
 * steps (steps), waits and signals (waits), compensation (compensation), NEEDS_ATTENTION and
 * redrive (attention), entity operations (operation), the saga from before the gate (legacy), and
 * what they share (state).
 */
import { CancellationScope, proxyActivities, setHandler } from '@temporalio/workflow';
import type { SagaActivities } from '../activities/saga';
import { stateQuery, type SagaInput, type SagaPlan, type SagaStart, type SagaState } from '../shared';
import { RETRY_INFRA } from './saga/proxies';
import { handleRedrives } from './saga/attention';
import { runReserved } from './saga/creation';
import { legacySaga } from './saga/legacy';
import { runOperation } from './saga/operation';
import { GATE_PATCH, LIMITS_PATCH, patchesOf, type Patched } from './saga/patches';
import { handleReservation, planSaga, planningScope, reservePlanned } from './saga/plan';
import { lifecycle, newSagaRun } from './saga/state';
import { handleSignals } from './saga/waits';

export {
  GATE_PATCH,
  FORWARD_PATCH,
  KEEP_ENTITY_PATCH,
  STEP_HEARTBEAT_PATCH,
  PLAN_BEFORE_CANCEL_PATCH,
  REJECTED_FAILS_PATCH,
  MEMO_OWNER_PATCH,
  MEMO_STEPS_PATCH,
  NEEDS_ATTENTION_PATCH,
  LIMITS_PATCH,
  FOLDED_PATCHES_PATCH,
  REDRIVE_CANCELLED_PATCH,
  REJECTED_AT_WRITE_PATCH,
  WRITE_REGISTERS_PATCH,
  FOLDED_AGAIN_PATCH,
} from './saga/patches';

/**
 * Orchestrates one saga of any type. Started by `SagaClient` with `{type, idempotencyKey, data,
 * timings, reservation}`, or by any Temporal client with `{type, idempotencyKey, data}`: the worker
 * derives the plan (intent key, request hash, steps, compensation policy, bounded timings) from the
 * registered saga type, and a malformed or inconsistent input fails the workflow at once.
 */
export async function reservationSaga(start: SagaStart | SagaInput): Promise<SagaState> {
  const has = patchesOf();
  if (!has(GATE_PATCH)) return legacySaga(start as SagaInput);
  // Set once the worker has derived the plan; the update handlers wait for it.
  const known: { plan?: SagaPlan } = {};
  try {
    return await gatedSaga(start, known, has);
  } finally {
    await countOut(known.plan, has);
  }
}

/** Counts the saga out of its caller's limits of sagas in flight ({@link LIMITS_PATCH}); nothing for a plan without limits. */
async function countOut(plan: SagaPlan | undefined, has: Patched): Promise<void> {
  if (plan?.limits === undefined || !has(LIMITS_PATCH)) return;
  const { limits, sessionId } = plan;
  const act = proxyActivities<SagaActivities>({ startToCloseTimeout: '10s', retry: RETRY_INFRA, summary: "count the saga out of its caller's limits" });
  try {
    await CancellationScope.nonCancellable(() => act.countOut({ limits, sessionId }));
  } catch {
    // Redis out of reach for every attempt: the count ends by itself after its hold; the outcome stands.
  }
}

/** The saga after the gate patch; `known` gets its plan once the worker has derived it. */
async function gatedSaga(start: SagaStart | SagaInput, known: { plan?: SagaPlan }, has: Patched): Promise<SagaState> {
  const run = newSagaRun(start, known, has);
  const { state } = run;
  const { reject } = lifecycle(state, has);

  setHandler(stateQuery, () => state);
  handleSignals(run);
  handleRedrives(run);
  handleReservation(run);

  // 0. The plan, derived by the worker from the saga type: nothing the caller computed is trusted.
  const uncancelled = planningScope(has);
  const planned = await planSaga(run, start, uncancelled);
  // 1. Confirm the gate's reservation (the same session gets its token back), or reserve now.
  const answer = await reservePlanned(run, planned, uncancelled);
  if (answer === undefined) return reject('RESERVATION_FAILED');
  if (answer.status !== 'SUCCESS') return reject(answer.status);
  // Only plans of entity operation types carry `operation`: no earlier saga takes this branch.
  if (planned.operation) return runOperation(planned, planned.operation.entityId, answer.fencingToken, state, run.redrives, has);
  return runReserved(planned, planned.sessionId, answer.fencingToken, state, { searchableRegistered: false, redrives: run.redrives, has, signals: run.signals });
}
