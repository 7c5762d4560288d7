/**
 * What the worker observes of each saga, outside the saga's own code: an activity interceptor that
 * counts the steps, compensations and fenced-out writes and logs one line per saga event, and the
 * sink that hears of a saga's end from the workflow interceptor (src/workflows/interceptors.ts).
 * A log line carries the workflow id, the saga type and the intent key, never an activity's input
 * (which holds the request's data) nor a failure's message (which may quote it): a failure is
 * named by its type.
 */
import type { Cluster, Redis } from 'ioredis';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { Runtime, type ActivityInterceptorsFactory, type InjectedSinks } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import type { CompensationOutcome, SagaMetrics, StepOutcome } from '../metrics';
import type { SagaTypes } from '../sagas';
import { ErrorType, type SagaEventSinks } from '../shared';

/** What an activity's input says about its saga (never its payload). */
interface SagaRef {
  type: string;
  intentKey: string;
  name?: string;
}

/** The saga activities observed, and the event each one is. */
const SAGA_EVENTS: Readonly<Record<string, string>> = {
  reserveIntent: 'reservation',
  writeEntity: 'write',
  finalizeEntity: 'finalize',
  completeEntity: 'complete',
  runStep: 'step',
  runCompensation: 'compensation',
  undoEntity: 'compensation',
};

function sagaRef(arg: unknown): SagaRef | undefined {
  if (typeof arg !== 'object' || arg === null) return undefined;
  const { type, intentKey, name } = arg as Record<string, unknown>;
  if (typeof type !== 'string' || typeof intentKey !== 'string') return undefined;
  return { type, intentKey, ...(typeof name === 'string' ? { name } : {}) };
}

/** The ApplicationFailure type of `err`, or its class name. */
function failureType(err: unknown): string {
  if (err instanceof ApplicationFailure && err.type) return err.type;
  return err instanceof Error ? err.name : typeof err;
}

function stepOutcome(err: unknown): StepOutcome {
  if ((err instanceof CancelledFailure)) return 'cancelled';
  const type = failureType(err);
  if (type === ErrorType.STEP_REJECTED) return 'rejected';
  if (type === ErrorType.STEP_COMPENSATED) return 'superseded';
  return 'failed';
}

function compensationOutcome(err: unknown): CompensationOutcome {
  if ((err instanceof CancelledFailure)) return 'cancelled';
  return failureType(err) === ErrorType.COMPENSATION_REFUSED ? 'refused' : 'failed';
}

function replayed(result: unknown): boolean {
  return typeof result === 'object' && result !== null && (result as { replayed?: unknown }).replayed === true;
}

/** What a successful saga activity's result says, for its log line (never an entity id or a token). */
function resultFields(activity: string, result: unknown): Record<string, unknown> {
  if (typeof result !== 'object' || result === null) return {};
  const r = result as Record<string, unknown>;
  if (activity === 'reserveIntent' || activity === 'writeEntity') return { status: r.status };
  if (activity === 'undoEntity') return { row: r.row };
  return {};
}

/**
 * The activity interceptor: for each saga activity, counts its outcome in `metrics` (steps,
 * compensations, FENCED_OUT refusals) and logs one INFO line through the activity's logger (which
 * adds the workflow id, run id and activity type).
 */
export function sagaActivityInterceptor(metrics?: SagaMetrics): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const activity = ctx.info.activityType;
        const event = SAGA_EVENTS[activity];
        const ref = event ? sagaRef(input.args[0]) : undefined;
        if (!event || !ref) return next(input);
        const fields = { sagaEvent: event, sagaType: ref.type, intentKey: ref.intentKey, ...(ref.name ? { [event]: ref.name } : {}) };
        const name = activity === 'undoEntity' ? 'undoEntity' : ref.name;
        if (activity === 'undoEntity') Object.assign(fields, { compensation: 'undoEntity' });
        try {
          const result = await next(input);
          const outcome = replayed(result) ? 'replayed' : 'succeeded';
          if (event === 'step') metrics?.stepAttempted(ref.type, name ?? '', outcome);
          if (event === 'compensation') metrics?.compensationAttempted(ref.type, name ?? '', outcome);
          ctx.log.info(`saga ${event} ${outcome}`, { ...fields, outcome, ...resultFields(activity, result) });
          return result;
        } catch (err) {
          const errorType = failureType(err);
          if (errorType === ErrorType.FENCED_OUT) metrics?.fencedOut(ref.type, activity);
          let outcome: string = err instanceof CancelledFailure ? 'cancelled' : 'failed';
          if (event === 'step') {
            outcome = stepOutcome(err);
            metrics?.stepAttempted(ref.type, name ?? '', stepOutcome(err));
          }
          if (event === 'compensation') {
            outcome = compensationOutcome(err);
            metrics?.compensationAttempted(ref.type, name ?? '', compensationOutcome(err));
          }
          ctx.log.info(`saga ${event} ${outcome}`, { ...fields, outcome, errorType, attempt: ctx.info.attempt });
          throw err;
        }
      },
    },
  });
}

/** How long a saga's end stays marked as reported: far longer than a workflow task takes to be retried. */
export const END_REPORTED_TTL_MS = 10 * 60_000;

/**
 * Whether this is the first report of the end of run `runId` (or of another event of it, named
 * `<run id>:<event>`), across every worker sharing `redis`:
 * one SET NX of a key that expires after {@link END_REPORTED_TTL_MS}. A worker killed after it ran a
 * saga's last workflow task, but before the server recorded its completion, has reported the end;
 * the worker that runs that task again reports it too. With Redis out of reach the end is reported
 * (twice, at worst), never lost.
 */
export function firstEndReport(redis: Pick<Redis | Cluster, 'set'>, keyPrefix: string): (runId: string) => Promise<boolean> {
  return async (runId) => {
    try {
      return (await redis.set(`${keyPrefix}saga-ended:{${runId}}`, '1', 'PX', END_REPORTED_TTL_MS, 'NX')) === 'OK';
    } catch {
      return true;
    }
  };
}

/**
 * The sinks of {@link SagaEventSinks}: a saga's end, and each of its waits in NEEDS_ATTENTION,
 * counted in `metrics` and logged (at INFO; a wait at WARN), once per run (per wait) when `first`
 * says whether it was reported already ({@link firstEndReport}). A saga that failed before its plan
 * reports the type its starter sent: it is logged only if `types` has it.
 */
export function sagaEventSinks(types: SagaTypes, metrics?: SagaMetrics, first?: (runId: string) => Promise<boolean>): InjectedSinks<SagaEventSinks> {
  /** What every line of a saga event names: its workflow, its type (a registered one, else `unknown`) and its intent key. */
  const sagaFields = (info: WorkflowInfo, event: { type: string; intentKey: string }) => ({
    workflowId: info.workflowId,
    workflowRunId: info.runId,
    workflowType: info.workflowType,
    taskQueue: info.taskQueue,
    namespace: info.namespace,
    sagaType: Object.hasOwn(types, event.type) ? event.type : 'unknown',
    intentKey: event.intentKey,
  });
  return {
    sagaEvents: {
      ended: {
        fn: async (info, event) => {
          if (first && !(await first(info.runId))) return;
          metrics?.sagaEnded(event.type, event.outcome);
          Runtime.instance().logger.info(`saga ended ${event.outcome}`, {
            sagaEvent: 'ended',
            ...sagaFields(info, event),
            outcome: event.outcome,
            ...(event.reason ? { reason: event.reason } : {}),
          });
        },
        // A replayed history was counted and logged when it ran.
        callDuringReplay: false,
      },
      attention: {
        fn: async (info, event) => {
          if (first && !(await first(`${info.runId}:attention:${event.redrives}`))) return;
          metrics?.sagaNeedsAttention(event.type);
          Runtime.instance().logger.warn('saga needs attention', {
            sagaEvent: 'attention',
            ...sagaFields(info, event),
            pending: event.pending.join(','),
            redrives: event.redrives,
          });
        },
        callDuringReplay: false,
      },
      wait: {
        fn: async (info, event) => {
          if (first && !(await first(`${info.runId}:wait:${event.step}:${event.event}`))) return;
          metrics?.sagaWait(event.type, event.event);
        },
        callDuringReplay: false,
      },
    },
  };
}
