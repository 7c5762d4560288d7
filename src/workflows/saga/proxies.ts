/**
 * The saga's activities as it proxies them: their timeouts, retries, cancellation and summaries in
 * the UI. Options are no command of their own: a recorded history replays whatever they are.
 */
import { ActivityCancellationType, proxyActivities, proxyLocalActivities, type ActivityOptions } from '@temporalio/workflow';
import type { SagaActivities } from '../../activities/saga';
import { retryOptionsOf, type SagaInput, type SagaPlan } from '../../shared';

/** Activity options. Infrastructure errors retry; business outcomes are non-retryable failures. */
export const RETRY_INFRA = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 8 } as const;

/** A step that nothing could undo (it has no compensation): retried until it succeeds or is refused. */
export const RETRY_UNTIL_DONE = { initialInterval: RETRY_INFRA.initialInterval, backoffCoefficient: RETRY_INFRA.backoffCoefficient, maximumInterval: RETRY_INFRA.maximumInterval };

/** The activities of a saga that creates its entity (and of one started before the gate). */
export function activities(input: SagaInput) {
  const quick: ActivityOptions = { startToCloseTimeout: '10s', retry: RETRY_INFRA };
  // On cancellation the saga waits for a running activity to settle: a step's compensation must
  // never run before (and so miss) the effect of the step it undoes.
  const settle = { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } as const;
  // A long, monolithic write: its liveness is the heartbeat, not the start-to-close timeout.
  const writing: ActivityOptions = {
    startToCloseTimeout: '30m',
    heartbeatTimeout: input.timings.heartbeatTimeoutMs,
    retry: { ...RETRY_INFRA, maximumAttempts: 5 },
    ...settle,
  };
  return {
    reserve: proxyActivities<SagaActivities>({ ...quick, summary: 'reserve the intent in the RMS', retry: { ...RETRY_INFRA, maximumAttempts: 4 } }),
    write: proxyActivities<SagaActivities>({ ...writing, summary: 'write the fenced row (heartbeats extend the lease)' }),
    // The write that also registers its row and promotes the reservation (write-registers).
    writeRegistered: proxyActivities<SagaActivities>({
      ...writing,
      summary: 'write the fenced row and register it (heartbeats extend the lease), promote the reservation',
    }),
    finalize: proxyActivities<SagaActivities>({ ...quick, summary: 'mark the row REGISTERED, promote the reservation', ...settle }),
    release: proxyActivities<SagaActivities>({ ...quick, summary: 'release the reservation (the deadline passed before the write)' }),
    complete: proxyActivities<SagaActivities>({ ...quick, summary: 'mark the row COMPLETED', ...settle }),
    forward: proxyActivities<SagaActivities>({
      ...quick,
      summary: 'mark the row COMPLETED (every step done: retried until it succeeds)',
      // No maximumAttempts: unlimited.
      retry: { initialInterval: RETRY_INFRA.initialInterval, backoffCoefficient: RETRY_INFRA.backoffCoefficient, maximumInterval: RETRY_INFRA.maximumInterval },
    }),
    step: proxyActivities<SagaActivities>({ startToCloseTimeout: '60s', retry: RETRY_INFRA, ...settle }),
    // Each named in the UI by its step or compensation (`summary`), not as one more runStep.
    heartbeatingStep: (name: string, undoable = true) =>
      proxyActivities<SagaActivities>({
        startToCloseTimeout: '60s',
        heartbeatTimeout: input.timings.heartbeatTimeoutMs,
        ...stepRetry(input, name, { retry: undoable ? RETRY_INFRA : RETRY_UNTIL_DONE }),
        summary: `step ${name}`,
        ...settle,
      }),
    namedCompensation: (name: string) =>
      proxyActivities<SagaActivities>({
        startToCloseTimeout: '60s',
        ...compensationRetry(input, name),
        summary: `compensation ${name}`,
      }),
    compensation: proxyActivities<SagaActivities>({
      startToCloseTimeout: '60s',
      retry: { ...RETRY_INFRA, maximumAttempts: input.timings.compensationAttempts },
    }),
  };
}

/**
 * The retry options of step `name`: its plan's `retry` (the type declared one), else `otherwise`.
 * Retry options are no command of their own: a history replays whatever they are.
 */
function stepRetry(input: SagaInput, name: string, otherwise: Pick<ActivityOptions, 'retry'>): Pick<ActivityOptions, 'retry' | 'scheduleToCloseTimeout'> {
  const policy = input.steps.find((s) => s.step === name)?.retry;
  return policy === undefined ? otherwise : retryOptionsOf(policy);
}

/**
 * The retry options of compensation `name`: the policy its plan recorded (the type's, or
 * DEFAULT_COMPENSATION_RETRY). Plans from before policies were recorded have none:
 * `timings.compensationAttempts`, 200 ms doubling up to 5 s.
 */
function compensationRetry(input: SagaInput, name: string): Pick<ActivityOptions, 'retry' | 'scheduleToCloseTimeout'> {
  const policy = input.steps.find((s) => s.compensation === name)?.compensationRetry;
  return policy === undefined ? { retry: { ...RETRY_INFRA, maximumAttempts: input.timings.compensationAttempts } } : retryOptionsOf(policy);
}

/** The activities of an entity operation. */
export function operationActivities(input: SagaPlan) {
  const settle = { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } as const;
  const timeouts = { startToCloseTimeout: '60s', heartbeatTimeout: input.timings.heartbeatTimeoutMs } as const;
  return {
    step: (name: string, undoable: boolean) =>
      proxyActivities<SagaActivities>({ ...timeouts, ...stepRetry(input, name, { retry: undoable ? RETRY_INFRA : RETRY_UNTIL_DONE }), summary: `step ${name}`, ...settle }),
    compensation: (name: string) => proxyActivities<SagaActivities>({ ...timeouts, ...compensationRetry(input, name), summary: `compensation ${name}` }),
    release: proxyActivities<SagaActivities>({ startToCloseTimeout: '10s', retry: RETRY_INFRA, summary: "release the entity's lock" }),
    // Every step has succeeded: the saga goes forward, through any outage, unless a newer holder claimed the entity.
    releaseEntity: proxyActivities<SagaActivities>({ startToCloseTimeout: '30s', retry: RETRY_UNTIL_DONE, summary: 'release the entity: its intent is free again' }),
    // Kept until the saga cancels it: each redrive's wait may be as long as the type's attentionMs,
    // and a heartbeat that stops (a dead worker) starts another attempt, which finds the lease held or lost.
    hold: proxyActivities<SagaActivities>({
      startToCloseTimeout: '366d',
      heartbeatTimeout: input.timings.heartbeatTimeoutMs,
      retry: { initialInterval: RETRY_INFRA.initialInterval, backoffCoefficient: RETRY_INFRA.backoffCoefficient, maximumInterval: RETRY_INFRA.maximumInterval },
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      summary: "hold the entity's lock while the saga needs attention",
    }),
  };
}

/** The local activities a saga plans and reserves with: short, and retried a few times. */
export function localActivities() {
  return proxyLocalActivities<SagaActivities>({ startToCloseTimeout: '10s', retry: { ...RETRY_INFRA, maximumAttempts: 4 } });
}
