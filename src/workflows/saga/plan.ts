/**
 * Plan and reserve, two short local activities: the worker derives the saga's plan from its type
 * (nothing the caller computed is trusted), then the saga confirms the reservation the gate took
 * (the same session gets its token back), or reserves now when a plain Temporal client started it.
 * The `reservation` update answers with that reservation.
 */
import { ApplicationFailure, CancellationScope, condition, setHandler, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { ErrorType, INTENT_KEY, SAGA_PHASE, SAGA_TYPE, SagaPhase, reservationUpdate, stepNamesOf, type ReservationAnswer, type SagaInput, type SagaMemo, type SagaPlan, type SagaStart } from '../../shared';
import { localActivities } from './proxies';
import { failureMessage, failureType, hashOf, keyReused } from './failures';
import { MEMO_OWNER_PATCH, MEMO_STEPS_PATCH, PLAN_BEFORE_CANCEL_PATCH, WRITE_REGISTERS_PATCH, type Patched } from './patches';
import { handlersSettled, type SagaRun } from './state';

/** Runs planning or reserving: outside a cancellation, or inside it in a saga from before {@link PLAN_BEFORE_CANCEL_PATCH}. */
export type Uncancelled = <T>(fn: () => Promise<T>) => Promise<T>;

/**
 * Answers the `reservation` update with the saga's reservation once it has one, or with why it has
 * none; a request of the same key with another payload is refused.
 */
export function handleReservation(run: SagaRun): void {
  const { state, known } = run;
  setHandler(
    reservationUpdate,
    async (request) => {
      await condition(() => known.plan !== undefined || run.reservationFailed !== undefined);
      const { plan } = known;
      if (plan && hashOf(request) !== undefined && hashOf(request) !== plan.requestHash) throw keyReused(plan.idempotencyKey);
      await condition(() => state.reservation !== undefined || run.reservationFailed !== undefined);
      if (state.reservation) return state.reservation;
      throw ApplicationFailure.nonRetryable(`reservation failed: ${run.reservationFailed}`, 'RESERVATION_FAILED');
    },
    {
      // Same idempotency key, other payload: refused before anything is written to history (once
      // the plan is known; before that, by the handler).
      validator: (request) => {
        const { plan } = known;
        if (plan && hashOf(request) !== undefined && hashOf(request) !== plan.requestHash) throw keyReused(plan.idempotencyKey);
      },
    },
  );
}

/**
 * How the saga plans and reserves ({@link Uncancelled}): a cancellation that arrives before it knows
 * its plan and holds its reservation waits for both ({@link PLAN_BEFORE_CANCEL_PATCH}).
 */
export function planningScope(has: Patched): Uncancelled {
  const shielded = has(PLAN_BEFORE_CANCEL_PATCH);
  return <T>(fn: () => Promise<T>): Promise<T> => (shielded ? CancellationScope.nonCancellable(fn) : fn());
}

/**
 * 0. The plan, derived by the worker from the saga type: recorded in the run (`known.plan`, which the
 * update handlers wait for) and in its state. A start the worker refuses fails the workflow, once
 * a waiting `reservation` update has seen why.
 */
export async function planSaga(run: SagaRun, start: SagaStart | SagaInput, uncancelled: Uncancelled): Promise<SagaPlan> {
  const { workflowId, namespace } = workflowInfo();
  const { state, known } = run;
  let planned: SagaPlan;
  try {
    planned = await uncancelled(() => localActivities().planSaga({ workflowId, namespace, start }));
  } catch (err) {
    run.reservationFailed = failureMessage(err);
    // Let a waiting `reservation` update see the failure, then fail the workflow: never a task that
    // fails forever on input it cannot run.
    await handlersSettled();
    throw ApplicationFailure.nonRetryable(run.reservationFailed, failureType(err) ?? ErrorType.INVALID_INPUT);
  }
  known.plan = planned;
  Object.assign(state, { type: planned.type, idempotencyKey: planned.idempotencyKey, requestHash: planned.requestHash, intentKey: planned.intentKey });
  // SagaClient sets these at start; a saga started by a plain Temporal client sets them now.
  const searchable = workflowInfo().typedSearchAttributes;
  if (searchable.get(SAGA_TYPE) !== planned.type || searchable.get(INTENT_KEY) !== planned.intentKey) {
    upsertSearchAttributes([
      { key: SAGA_TYPE, value: planned.type },
      { key: INTENT_KEY, value: planned.intentKey },
      { key: SAGA_PHASE, value: SagaPhase.RESERVING },
    ]);
  }
  return planned;
}

/**
 * 1. Confirms the gate's reservation (the same session gets its token back), or reserves now; records
 * the answer in the saga's state and memo. Undefined when reserving failed (recorded in the saga's
 * errors, and seen by a waiting `reservation` update): the saga then ends REJECTED.
 */
export async function reservePlanned(run: SagaRun, planned: SagaPlan, uncancelled: Uncancelled): Promise<ReservationAnswer | undefined> {
  const { state } = run;
  let answer: ReservationAnswer;
  try {
    answer = await uncancelled(() =>
      localActivities().reserveIntent({
        type: planned.type,
        intentKey: planned.intentKey,
        sessionId: planned.sessionId,
        leaseMs: planned.timings.leaseMs,
        // An entity operation takes the entity's lock (its intent key is the lock's), its owner's only.
        ...(planned.operation ? { entityId: planned.operation.entityId, ...(planned.owner === undefined ? {} : { owner: planned.owner }) } : {}),
        // An intent whose text was not in NFC is checked under the key earlier versions gave it too.
        ...(planned.legacyIntentKey === undefined ? {} : { legacyIntentKey: planned.legacyIntentKey }),
        // The gate checked PostgreSQL for its token: while that lease holds, the check is not repeated (write-registers).
        ...(planned.reservation && !planned.operation && run.has(WRITE_REGISTERS_PATCH) ? { confirms: planned.reservation.fencingToken } : {}),
      }),
    );
  } catch (err) {
    run.reservationFailed = failureMessage(err);
    state.errors.push({ at: 'reserveIntent', type: failureType(err), message: run.reservationFailed });
    await handlersSettled();
    return undefined;
  }
  const gate = planned.reservation;
  if (gate && answer.status === 'SUCCESS' && answer.fencingToken === gate.fencingToken) {
    // Confirmed: the gate's answer stands, as the caller received it.
    answer = { status: 'SUCCESS', fencingToken: gate.fencingToken, expiresAt: gate.expiresAt };
  } else if (gate) {
    // The gate's lease ended before a worker ran this saga (every worker down longer than the lease).
    state.errors.push({ at: 'reserveIntent', type: 'LEASE_EXPIRED', message: `the gate's lease (token ${gate.fencingToken}) ended before the saga started; reserved again: ${answer.status}` });
  }
  state.reservation = answer;
  recordInMemo(planned, answer, run.has);
  return answer;
}

/**
 * A retry with the same key is answered from the memo by one describe call, without a worker: the
 * request hash and the answer, the owner ({@link MEMO_OWNER_PATCH}) and the handlers this saga will
 * need, where a worker about to start can read them ({@link MEMO_STEPS_PATCH}; see checkRunningSagas).
 */
function recordInMemo(planned: SagaPlan, answer: ReservationAnswer, has: Patched): void {
  const memo: SagaMemo = workflowInfo().memo ?? {};
  const owned = planned.owner !== undefined && memo.owner !== planned.owner && has(MEMO_OWNER_PATCH);
  const steps = has(MEMO_STEPS_PATCH) ? stepNamesOf(planned) : undefined;
  if (memo.requestHash !== planned.requestHash || !sameAnswer(memo.reservation, answer) || owned || steps !== undefined) {
    upsertMemo({ requestHash: planned.requestHash, reservation: answer, ...(owned ? { owner: planned.owner } : {}), ...(steps ? { steps } : {}) } satisfies SagaMemo);
  }
}

function sameAnswer(a: ReservationAnswer | undefined, b: ReservationAnswer): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}
