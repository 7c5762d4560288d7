/**
 * Waits: a step of a plan that waits for a signal (or only for time to pass), no activity running
 * meanwhile; and the `signal` update that brings a signal, which may come before the saga reaches
 * its wait. A signal is recorded once: a repeat changes nothing.
 */
import { ApplicationFailure, condition, isCancellation, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import { ErrorType, SagaPhase, isTerminal, signalUpdate, type SagaPlan, type SagaState, type SagaWait, type SagaWaitEventKind } from '../../shared';
import { deadlineExceeded } from './deadline';
import type { SagaRun, Signals } from './state';

/**
 * Answers the `signal` update: a signal the saga waits for (or will wait for) is recorded, its first
 * payload kept; one it does not take is refused before anything is recorded.
 */
export function handleSignals(run: SagaRun): void {
  const { state, known, signals } = run;
  setHandler(
    signalUpdate,
    async ({ signal, payload }) => {
      // Sent before the plan was known: judged by it once it is.
      await condition(() => known.plan !== undefined || isTerminal(state.phase));
      refuseSignal(signal, known.plan, state, signals);
      const first = !signals.received.has(signal);
      if (first) signals.received.set(signal, payload ?? null);
      return { signal, first };
    },
    // Refused before anything is recorded: a repeat is accepted (and changes nothing).
    { validator: (request: { signal: string; payload?: unknown }) => refuseSignal(request?.signal, known.plan, state, signals) },
  );
}

/**
 * Throws NOT_WAITING for a signal the saga does not take: once it has ended, or its plan (when
 * known) has no wait for it, or that wait timed out. A repeat of one received is taken.
 */
export function refuseSignal(signal: unknown, plan: SagaPlan | undefined, state: SagaState, signals: Signals): asserts signal is string {
  const { workflowId } = workflowInfo();
  const notWaiting = (why: string) => ApplicationFailure.nonRetryable(`saga ${workflowId} ${why}`, ErrorType.NOT_WAITING);
  // From a plain Temporal client, the update's argument is whatever it sent.
  if (typeof signal !== 'string') throw notWaiting('takes a signal as { signal: <name>, payload? }');
  if (isTerminal(state.phase)) throw notWaiting(`has ended (${state.phase}): it waits for no signal`);
  if (plan && !plan.steps.some((s) => s.wait?.signal === signal)) throw notWaiting(`waits for no signal ${JSON.stringify(signal)}`);
  if (signals.timedOut.has(signal)) throw notWaiting(`no longer waits for ${JSON.stringify(signal)}: its wait timed out`);
}

/**
 * The wait `step` of a plan: until its signal comes (or came already) or its timeout passes, never
 * past the saga's deadline. No activity runs meanwhile. Answers what the steps after it find under
 * its name; a signal's timeout throws WAIT_TIMED_OUT (the saga compensates) unless it continues.
 */
export async function waitFor(
  step: string,
  wait: SagaWait,
  deadline: number | undefined,
  state: SagaState,
  signals: Signals,
  enter: (phase: SagaPhase) => void,
  told: (event: SagaWaitEventKind) => void,
): Promise<unknown> {
  const now = Date.now();
  const ends = now + wait.timeoutMs;
  const cut = deadline !== undefined && deadline < ends;
  const until = cut ? deadline : ends;
  state.waiting = { step, ...(wait.signal === undefined ? {} : { signal: wait.signal }), until: new Date(until).toISOString() };
  enter(SagaPhase.WAITING);
  told('started');
  const { signal } = wait;
  let came: boolean;
  try {
    came = signal === undefined ? (await sleep(until - now), false) : await condition(() => signals.received.has(signal), until - now);
  } catch (err) {
    if (isCancellation(err)) told('cancelled');
    throw err;
  }
  delete state.waiting;
  told(signal === undefined ? 'elapsed' : came ? 'signalled' : 'timed_out');
  if (signal !== undefined && came) {
    enter(SagaPhase.RUNNING_STEPS);
    return { signal, payload: signals.received.get(signal) };
  }
  if (signal !== undefined) signals.timedOut.add(signal);
  if (cut) throw deadlineExceeded(deadline, `the end of wait ${step}`);
  enter(SagaPhase.RUNNING_STEPS);
  if (signal === undefined) return { elapsed: true };
  if (wait.onTimeout === 'continue') return { timedOut: true };
  throw ApplicationFailure.create({ type: ErrorType.WAIT_TIMED_OUT, message: `wait ${step}: no ${signal} within ${wait.timeoutMs} ms`, nonRetryable: true });
}
