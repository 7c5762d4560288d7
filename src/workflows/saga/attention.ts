/**
 * Attention and redrive: a saga whose compensations could not all finish waits in NEEDS_ATTENTION
 * (its type's `attentionMs`) for an operator's `redrive`, which retries what is left; an entity
 * operation holds its entity's lock all the while. A wait that runs out ends the saga
 * COMPENSATION_FAILED.
 */
import { ApplicationFailure, CancellationScope, condition, isCancellation, setCurrentDetails, setHandler, workflowInfo } from '@temporalio/workflow';
import type { SagaActivities } from '../../activities/saga';
import { ErrorType, SagaOutcome, SagaPhase, redriveUpdate, type SagaInput, type SagaState } from '../../shared';
import { sagaEvents } from '../saga-events';
import type { Compensation } from './compensation';
import { failureMessage, failureType } from './failures';
import { NEEDS_ATTENTION_PATCH, REDRIVE_CANCELLED_PATCH, type Patched } from './patches';
import { lifecycle, type Redrives, type SagaRun } from './state';

/**
 * Answers the `redrive` update: each one accepted asks for a round of the compensations left, and is
 * answered once that round has run. Refused, before anything is recorded, unless the saga waits.
 */
export function handleRedrives(run: SagaRun): void {
  const { workflowId } = workflowInfo();
  const { state, redrives, has } = run;
  setHandler(
    redriveUpdate,
    async () => {
      const ticket = ++redrives.asked;
      // Answered once the round this redrive asked for has run: the saga waits again, or has ended.
      const roundRun = () => condition(() => redrives.answered >= ticket && state.phase !== SagaPhase.COMPENSATING);
      // A cancellation, before or during this wait, never stops the round (the saga waits and
      // compensates where none reaches), so it does not fail the redrive either. The patch is asked
      // as the redrive is accepted, not when a cancellation comes: the answer is then always given
      // once the saga has moved on, never in a workflow task beside commands of the saga's own.
      await (has(REDRIVE_CANCELLED_PATCH) ? CancellationScope.nonCancellable(roundRun) : roundRun());
      return state;
    },
    {
      // Refused before anything is recorded unless the saga waits: a redrive never runs a
      // compensation a second time, nor one of a saga still compensating by itself.
      validator: () => {
        if (state.phase !== SagaPhase.NEEDS_ATTENTION) {
          throw ApplicationFailure.nonRetryable(`saga ${workflowId} is ${state.phase}, not NEEDS_ATTENTION: there is nothing to redrive`, ErrorType.NOT_NEEDING_ATTENTION);
        }
        // Its wait ran out, and it is on its way to COMPENSATION_FAILED (an operation gives its lock
        // back first): no round will run, and a redrive accepted now would wait for one for good,
        // and the saga with it. A refusal writes nothing to history: sagas replay as they ran.
        if (redrives.waitEnded) {
          throw ApplicationFailure.nonRetryable(
            `saga ${workflowId} no longer waits for a redrive: its wait ended at ${state.attention?.until}, and it ends ${SagaOutcome.COMPENSATION_FAILED}`,
            ErrorType.NOT_NEEDING_ATTENTION,
          );
        }
      },
    },
  );
}

/**
 * Whether a saga whose compensations `left` could not all finish waits in NEEDS_ATTENTION for a
 * redrive: its plan gives it time to ({@link NEEDS_ATTENTION_PATCH}; plans of earlier versions
 * have no `attentionMs`), and it runs the code that answers redrives (not the legacy saga).
 */
export function waitsForRedrive(left: Compensation[], input: SagaInput, redrives: Redrives | undefined, has: Patched): redrives is Redrives {
  return left.length > 0 && (input.compensation.attentionMs ?? 0) > 0 && redrives !== undefined && has(NEEDS_ATTENTION_PATCH);
}

/**
 * Waits in NEEDS_ATTENTION, its type's `attentionMs` at a time, for a redrive, and on each one retries the
 * compensations `left` with `retry` (in their order; a creation's `undoEntity` last and only once
 * the others succeeded); returns what is still left when a round finished them all ([]) or a wait
 * ended without a redrive. The saga holds its row and intent (an operation, its entity's lock) all
 * along: nothing is undone until its turn.
 */
export async function untilRedriven(
  left: Compensation[],
  input: SagaInput,
  state: SagaState,
  redrives: Redrives,
  has: Patched,
  retry: (left: Compensation[]) => Promise<Compensation[]>,
): Promise<Compensation[]> {
  const attentionMs = input.compensation.attentionMs ?? 0;
  const { enter } = lifecycle(state, has);
  const { workflowId } = workflowInfo();
  for (let round = 0; left.length > 0; round++) {
    const since = Date.now();
    const pending = left.map((c) => c.name);
    state.attention = { pending, since: new Date(since).toISOString(), until: new Date(since + attentionMs).toISOString(), redrives: round };
    enter(SagaPhase.NEEDS_ATTENTION);
    // Shown on the saga's page in the Temporal UI, above its history.
    setCurrentDetails(
      `**Needs attention**: ${pending.join(', ')} could not be undone (see the saga's errors). Fix the cause, then ` +
        `\`saga redrive ${workflowId}\`; at ${state.attention.until} the saga ends COMPENSATION_FAILED (then \`saga settle\`).`,
    );
    sagaEvents.attention({ type: state.type, intentKey: state.intentKey, pending, redrives: round });
    const redriven = await condition(() => redrives.asked > redrives.answered, attentionMs, { summary: `needs attention: waiting for a redrive of ${pending.join(', ')}` });
    if (!redriven) {
      redrives.waitEnded = true;
      break;
    }
    enter(SagaPhase.COMPENSATING);
    state.attention.redrives = round + 1;
    const asked = redrives.asked;
    left = await retry(left);
    redrives.answered = asked;
  }
  // A redrive accepted in the very task in which the wait ran out is answered with how the saga ends.
  redrives.answered = redrives.asked;
  setCurrentDetails('');
  return left;
}

/**
 * Runs `fn` while an activity keeps the entity's lock (extending its lease), then stops it. A hold
 * that ends by itself (the lease found lost, or Redis away past it) is recorded: the compensations
 * left may then be refused, fenced out by a newer holder.
 */
export async function holdingLock<T>(
  hold: SagaActivities,
  lock: { type: string; intentKey: string; sessionId: string; fencingToken: string; leaseMs: number; heartbeatIntervalMs: number },
  state: SagaState,
  fn: () => Promise<T>,
): Promise<T> {
  const scope = new CancellationScope();
  const held = scope.run(() => hold.holdLock(lock)).catch((err: unknown) => {
    if (!isCancellation(err)) state.errors.push({ at: 'holdLock', type: failureType(err), message: failureMessage(err) });
  });
  try {
    return await fn();
  } finally {
    scope.cancel();
    await held;
  }
}
