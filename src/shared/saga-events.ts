/**
 * The sink through which the workflow interceptor (src/workflows/interceptors.ts) reports a saga's
 * end to its worker, outside the sandbox, and the saga its waits in NEEDS_ATTENTION: the worker
 * counts them and logs them. Sinks are not called
 * while a history replays, so a saga that a worker replays is not counted again.
 */
import type { Sinks } from '@temporalio/workflow';

/** A saga's end, as its worker is told of it: never its data. */
export interface SagaEndEvent {
  /** The saga type the worker planned ('' when the saga failed before it had a plan). */
  type: string;
  /** The intent key ('' before the plan). */
  intentKey: string;
  /** Its SagaOutcome, or FAILED: the workflow failed without one (input the worker could not run). */
  outcome: string;
  /** Why it ended so (a failure type, a reservation answer), when it says. */
  reason?: string;
}

/** A saga that entered NEEDS_ATTENTION: its compensations could not all finish. */
export interface SagaAttentionEvent {
  type: string;
  intentKey: string;
  /** The compensations it still has to run. */
  pending: string[];
  /** Redrives it took before this wait (0: its first). */
  redrives: number;
}

/** How a wait of a saga's plan began or ended (see `SagaStepPlan.wait`). */
export type SagaWaitEventKind = 'started' | 'signalled' | 'timed_out' | 'elapsed' | 'cancelled';

/** A wait of a saga's plan that began or ended (the sagas waiting now: the SagaPhase search attribute, WAITING). */
export interface SagaWaitEvent {
  type: string;
  intentKey: string;
  /** The wait's name in the plan. */
  step: string;
  event: SagaWaitEventKind;
}

/** The sinks the worker registers for the saga interceptor and the saga. */
export interface SagaEventSinks extends Sinks {
  sagaEvents: {
    ended(event: SagaEndEvent): void;
    /** Told by the saga itself each time it begins to wait in NEEDS_ATTENTION. */
    attention(event: SagaAttentionEvent): void;
    /** Told by the saga itself as each wait of its plan begins and ends. */
    wait(event: SagaWaitEvent): void;
  };
}
