/**
 * SagaClient's operator verbs: cancel a saga, redrive one that waits in NEEDS_ATTENTION, signal one
 * that waits, settle one that ended COMPENSATION_FAILED. Each reaches only the sagas of the call's
 * owner scope; a refusal is an error of its own (RedriveError, SignalError, SettleError).
 */
import type { WorkflowHandle } from '@temporalio/client';
import { undoEntity } from '../gate';
import { isEntityOperation, MAX_PAYLOAD_BYTES, STEP_NAME_PATTERN, SagaInputError, sagaDefinition, sagaSessionId } from '../sagas';
import { ErrorType, SagaOutcome, type SagaSignalReceipt, type SagaState } from '../shared/saga';
import { SagaEndedError, ownedDescription, temporalClientLibrary, temporalDefinitions, type ClientCore, type OwnerScope } from './core';
import { resultOf } from './reads';

/** See {@link SagaClient.cancel}. */
export async function cancel(core: ClientCore, workflowId: string, options: OwnerScope = {}): Promise<void> {
  const owner = core.scope(options);
  const handle = (await core.temporalClient()).workflow.getHandle(workflowId);
  const { status } = await ownedDescription(handle, owner);
  if (status.name !== 'RUNNING') throw new SagaEndedError(workflowId, status.name);
  await handle.cancel();
}

/** See {@link SagaClient.redrive}. */
export async function redrive(core: ClientCore, workflowId: string, options: OwnerScope = {}): Promise<SagaState> {
  const { redriveUpdate } = await temporalDefinitions();
  return updateRunning(core, workflowId, options, (handle) => handle.executeUpdate(redriveUpdate), {
    refusal: ErrorType.NOT_NEEDING_ATTENTION,
    refused: (message) => new RedriveError(workflowId, message),
    ended: (status) => `saga ${workflowId} has ended (${status}): there is nothing to redrive`,
  });
}

/**
 * Sends an update to the running saga `workflowId` of the call's owner scope: a saga that has ended
 * is refused with `how.refused(how.ended(status))` before anything is sent, and so is one that ends
 * while the update is on its way (Temporal then drops the update: nothing was recorded). The
 * update's own refusal (an ApplicationFailure of type `how.refusal`) becomes `how.refused(its message)`.
 */
export async function updateRunning<R>(
  core: ClientCore,
  workflowId: string,
  options: OwnerScope,
  update: (handle: WorkflowHandle) => Promise<R>,
  how: { refusal: string; refused: (message: string) => Error; ended: (status: string) => string },
): Promise<R> {
  const handle = (await core.temporalClient()).workflow.getHandle(workflowId);
  const { status } = await ownedDescription(handle, core.scope(options));
  if (status.name !== 'RUNNING') throw how.refused(how.ended(status.name));
  try {
    return await update(handle);
  } catch (err) {
    const { WorkflowUpdateFailedError, WorkflowNotFoundError, ApplicationFailure } = await temporalClientLibrary();
    const cause = err instanceof WorkflowUpdateFailedError ? err.cause : undefined;
    if (cause instanceof ApplicationFailure && cause.type === how.refusal) throw how.refused(cause.message);
    // The saga ended after the check above: Temporal refuses an update to a closed workflow, and
    // aborts one that was on its way when the workflow closed ("aborted by closing workflow").
    if (err instanceof WorkflowNotFoundError) {
      const now = await handle.describe().catch(() => undefined);
      if (now !== undefined && now.status.name !== 'RUNNING') throw how.refused(how.ended(now.status.name));
    }
    throw err;
  }
}

/** See {@link SagaClient.signal}. */
export async function signal(core: ClientCore, workflowId: string, signal: string, payload?: unknown, options: OwnerScope = {}): Promise<SagaSignalReceipt> {
  if (typeof signal !== 'string' || !STEP_NAME_PATTERN.test(signal)) {
    throw new SagaInputError(`signal ${JSON.stringify(signal)}: must be letters, digits, _ and - (at most 64)`, ErrorType.INVALID_INPUT);
  }
  const size = payload === undefined ? 0 : Buffer.byteLength(JSON.stringify(payload) ?? '');
  if (size > MAX_PAYLOAD_BYTES) throw new SagaInputError(`signal payload is ${size} bytes; at most ${MAX_PAYLOAD_BYTES} are accepted`, ErrorType.INVALID_INPUT);
  const { signalUpdate } = await temporalDefinitions();
  return updateRunning(core, workflowId, options, (handle) => handle.executeUpdate(signalUpdate, { args: [{ signal, ...(payload === undefined ? {} : { payload }) }] }), {
    refusal: ErrorType.NOT_WAITING,
    refused: (message) => new SignalError(workflowId, message),
    ended: (status) => `saga ${workflowId} has ended (${status}): it waits for no signal`,
  });
}

/** See {@link SagaClient.settle}. */
export async function settle(core: ClientCore, workflowId: string, how: 'keep' | 'undo'): Promise<{ workflowId: string; row: 'COMPLETED' | 'COMPENSATED'; intentFreed: boolean }> {
  const { status } = await ownedDescription((await core.temporalClient()).workflow.getHandle(workflowId), core.scope({}));
  // A saga waiting in NEEDS_ATTENTION still owns its row: settling under it would race its redrive.
  if (status.name === 'RUNNING') throw new SettleError(workflowId, `saga ${workflowId} is still running: redrive it (saga redrive) or let its wait end, then settle`);
  const state = await resultOf(core, workflowId);
  if (state.outcome !== SagaOutcome.COMPENSATION_FAILED) {
    throw new SettleError(workflowId, `saga ${workflowId} ended ${state.outcome ?? state.phase}, not COMPENSATION_FAILED: there is nothing to settle`);
  }
  const def = sagaDefinition(state.type, core.options.types);
  if (isEntityOperation(def)) throw new SettleError(workflowId, `saga ${workflowId} is an operation (${state.type}): it kept no row of its own to settle`);
  if (state.fencingToken === undefined) throw new SettleError(workflowId, `saga ${workflowId} recorded no fencing token: it wrote no row`);
  const owner = { intentKey: state.intentKey, sessionId: sagaSessionId(core.namespace, workflowId), fencingToken: state.fencingToken };
  const { freeIntent } = def.compensation;
  // A repeat of either (the row already so, under the saga's token) is OK: settling is idempotent.
  const marked = how === 'keep' ? await def.table.markCompleted(core.options.pool, owner) : await undoEntity(core.options, def.table, owner, freeIntent);
  if (marked.status === 'ILLEGAL_TRANSITION') {
    throw new SettleError(workflowId, `saga ${workflowId}'s row is ${marked.from}: it cannot be ${how === 'keep' ? 'kept (a row never finalised can only be undone)' : 'undone'}`);
  }
  if (marked.status !== 'OK') {
    throw new SettleError(workflowId, `saga ${workflowId}'s row is ${marked.status === 'NOT_FOUND' ? 'gone' : 'owned by a newer saga'}: nothing to settle`);
  }
  return how === 'keep' ? { workflowId, row: 'COMPLETED', intentFreed: false } : { workflowId, row: 'COMPENSATED', intentFreed: freeIntent };
}

/** Thrown by {@link SagaClient.redrive} when the saga does not wait in NEEDS_ATTENTION; the message says why. */
export class RedriveError extends Error {
  override readonly name = 'RedriveError';
  constructor(
    readonly workflowId: string,
    message: string,
  ) {
    super(message);
  }
}

/** Thrown by {@link SagaClient.signal} when the saga does not take the signal; nothing was recorded. */
export class SignalError extends Error {
  override readonly name = 'SignalError';
  constructor(
    readonly workflowId: string,
    message: string,
  ) {
    super(message);
  }
}

/** Thrown by {@link SagaClient.settle} when it changed nothing; the message says why. */
export class SettleError extends Error {
  override readonly name = 'SettleError';
  constructor(
    readonly workflowId: string,
    message: string,
  ) {
    super(message);
  }
}
