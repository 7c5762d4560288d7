/**
 * The saga's patches: each `patched()` guard that changed the commands a saga records, and the one
 * marker ({@link FOLDED_PATCHES_PATCH}) that takes the first ten at once. A saga decides once, at
 * its start, which code it runs ({@link patchesOf}); sagas started before a patch replay without it.
 */
import { patched } from '@temporalio/workflow';

/**
 * The patch that moved the reservation in front of the workflow (the gate in SagaClient) and the
 * plan into the worker. Histories recorded before it replay the earlier code, {@link legacySaga}.
 */
export const GATE_PATCH = 'gate-before-workflow';

/** Once every step has succeeded, completing is retried until it succeeds, never compensated. */
export const FORWARD_PATCH = 'forward-only-after-steps';

/** A compensation that failed keeps the entity: no undo of the row, no freeing of the intent. */
export const KEEP_ENTITY_PATCH = 'failed-compensation-keeps-entity';

/**
 * Steps heartbeat: a cancellation or a timeout reaches a running step (its AbortSignal), and a
 * stalled attempt is given up after the heartbeat timeout instead of the 60 s start-to-close. Each
 * step and step compensation carries its name as its summary in the UI.
 */
export const STEP_HEARTBEAT_PATCH = 'steps-heartbeat';

/**
 * A cancellation that arrives before the saga knows its plan and holds its reservation (while every
 * worker was down, or at once after the start) waits for both, two short local activities: the saga
 * then compensates as any cancelled one does and gives its lease back, instead of failing with no
 * intent known and its lease left to run out.
 */
export const PLAN_BEFORE_CANCEL_PATCH = 'plan-before-cancellation';

/**
 * A REJECTED saga (it wrote nothing) ends as a failed workflow, with its final state as the
 * failure's details, instead of completing: a failed run does not hold its workflow id, so a later
 * request with the same key is a new attempt (SagaClient starts with ALLOW_DUPLICATE_FAILED_ONLY),
 * where a completed REJECTED run answered its key CONFLICT or DUPLICATE forever.
 */
export const REJECTED_FAILS_PATCH = 'rejected-saga-fails';

/**
 * A saga whose start names an owner the memo does not (a plain Temporal client's start: SagaClient
 * sets the memo itself) records it in the memo, where status, cancel and list read it: the saga is
 * its owner's only, as one SagaClient started.
 */
export const MEMO_OWNER_PATCH = 'memo-owner';

/**
 * A saga records in its memo, once planned, the names of the steps and compensations its plan runs:
 * a worker whose saga types no longer have one of them refuses to start while the saga runs.
 */
export const MEMO_STEPS_PATCH = 'memo-plan-steps';

/**
 * A saga whose compensations could not all finish waits in NEEDS_ATTENTION (its type's
 * `attentionMs`) for an operator's redrive, instead of ending COMPENSATION_FAILED at once. Plans of
 * earlier versions have no `attentionMs`: they never reach it.
 */
export const NEEDS_ATTENTION_PATCH = 'needs-attention';

/**
 * A saga of a type with limits counts itself out of its caller's counters when it ends, however it
 * ends: completed, compensated, expired, rejected, cancelled, failed. Only plans that carry limits
 * take it (none of earlier versions do), so recorded histories replay unchanged.
 */
export const LIMITS_PATCH = 'gate-limits';

/**
 * Every patch above, taken at once: a saga started after it records this one marker (and one
 * TemporalChangeVersion upsert) where it recorded one of each per patch, five in an order saga, ten
 * history events and five visibility updates of the server's. Sagas started before it replay each
 * patch as they recorded it. A patch added later is asked on its own, as before.
 */
export const FOLDED_PATCHES_PATCH = 'folded-patches';

/** The patches {@link FOLDED_PATCHES_PATCH} takes at once. */
const FOLDED = new Set([
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
]);

/**
 * A redrive of a cancelled saga (cancelled while it waited in NEEDS_ATTENTION, or compensating
 * because it was cancelled) waits for its round outside the cancellation and is answered with it,
 * as any redrive is; before, its update failed at once with the cancellation while the round ran
 * all the same. Asked by each redrive as it is accepted. Not folded: asked on its own, as every
 * patch added after the fold is.
 */
export const REDRIVE_CANCELLED_PATCH = 'redrive-of-cancelled-saga';

/**
 * A saga whose fenced write finds another saga's entity in PostgreSQL (REGISTERED or COMPLETED
 * under an older token: a late finalise, or Redis that forgot it) ends REJECTED, as one refused at
 * its reservation does: it wrote nothing, and its key is a new attempt. Before, the rejection was
 * thrown inside the steps' try and compensated: the saga ended COMPENSATED (SAGA_REJECTED). Asked
 * only there, on its own.
 */
export const REJECTED_AT_WRITE_PATCH = 'rejected-at-write';

/**
 * The fenced write registers its row in its own transaction and then promotes the reservation: one
 * activity where there were two (writeEntity, then finalizeEntity), and the row is never left
 * PROCESSING between them for a worker to pick up. The plan's last step, when it runs alone and
 * in our database, marks the row COMPLETED in the step's own transaction (its activity answers
 * `completed`): no completeEntity after it. The confirmation of the gate's reservation names the
 * gate's token (`confirms`): while that lease holds, PostgreSQL is not asked again. Twelve history
 * events and three PostgreSQL transactions fewer per order saga. Folded ({@link FOLDED_AGAIN_PATCH}).
 */
export const WRITE_REGISTERS_PATCH = 'write-registers';

/**
 * Every patch above, taken at once, as {@link FOLDED_PATCHES_PATCH} took the first ten: a saga
 * started after it records this one marker. Sagas started before it replay as they recorded.
 */
export const FOLDED_AGAIN_PATCH = 'folded-patches-2';

/** The patches {@link FOLDED_AGAIN_PATCH} takes at once. */
const FOLDED_AGAIN = new Set([...FOLDED, REDRIVE_CANCELLED_PATCH, REJECTED_AT_WRITE_PATCH, WRITE_REGISTERS_PATCH]);

/** Whether the saga runs the code of a patch: `patched`, or true for a folded one in a saga that took them all. */
export type Patched = (patchId: string) => boolean;

/**
 * The saga's {@link Patched}, decided once at its start: a saga that starts now takes
 * {@link FOLDED_AGAIN_PATCH}; one that started before replays without its marker and takes
 * {@link FOLDED_PATCHES_PATCH} and asks each later patch on its own, or, started before that too,
 * asks each patch on its own.
 */
export function patchesOf(): Patched {
  if (patched(FOLDED_AGAIN_PATCH)) return (id) => FOLDED_AGAIN.has(id) || patched(id);
  return patched(FOLDED_PATCHES_PATCH) ? (id) => FOLDED.has(id) || patched(id) : patched;
}

