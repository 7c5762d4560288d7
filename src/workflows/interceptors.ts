/**
 * A workflow interceptor that tells the worker how each saga ended, through a sink: the worker
 * counts it (`saga_sagas_ended_total`) and logs it. It reads the saga's returned state (a rejected
 * saga's, from the failure it ends with) and nothing else, and a sink call adds no command to the history: the saga's code and its histories are
 * untouched, and a replay reports nothing (sinks are not called during replay).
 */
import { ApplicationFailure, TemporalFailure, workflowInfo, type WorkflowInterceptorsFactory } from '@temporalio/workflow';
import { ErrorType, RESERVATION_SAGA_WORKFLOW, type SagaState } from '../shared';
import { sagaEvents } from './saga-events';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The interceptors the workflow bundle installs (`workflowInterceptorModules`). */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      async execute(input, next) {
        if (workflowInfo().workflowType !== RESERVATION_SAGA_WORKFLOW) return next(input);
        let state: SagaState;
        try {
          state = (await next(input)) as SagaState;
        } catch (err) {
          // A REJECTED saga fails its workflow with its state as the failure's details.
          const rejected = err instanceof ApplicationFailure && err.type === ErrorType.SAGA_REJECTED && isRecord(err.details?.[0]) ? (err.details[0] as unknown as SagaState) : undefined;
          if (rejected) {
            sagaEvents.ended({ type: rejected.type, intentKey: rejected.intentKey, outcome: 'REJECTED', ...(rejected.reason ? { reason: rejected.reason } : {}) });
          } else if (err instanceof TemporalFailure) {
            // A TemporalFailure fails the workflow (anything else fails only this task, which is retried).
            const start = isRecord(input.args[0]) ? input.args[0] : {};
            // Its type, not its message: a message about bad input may quote the input.
            const reason = (err instanceof ApplicationFailure ? err.type : undefined) ?? err.name;
            sagaEvents.ended({ type: typeof start.type === 'string' ? start.type : '', intentKey: '', outcome: 'FAILED', reason });
          }
          throw err;
        }
        sagaEvents.ended({ type: state.type, intentKey: state.intentKey, outcome: state.outcome ?? state.phase, ...(state.reason ? { reason: state.reason } : {}) });
        return state;
      },
    },
  ],
});
