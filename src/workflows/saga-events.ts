/**
 * The saga's sinks as workflow code calls them (see SagaEventSinks): the workflow interceptor tells
 * its worker of a saga's end, the saga itself of each wait in NEEDS_ATTENTION. A sink call adds no
 * command to the history.
 */
import { proxySinks, workflowInfo } from '@temporalio/workflow';
import type { SagaEventSinks } from '../shared';

const { sagaEvents: sinks } = proxySinks<SagaEventSinks>();

/**
 * Tells the worker, unless this is a replay: a replayed event was told when it ran, and a replayer
 * (Worker.runReplayHistory) registers no sinks and would report each call as unregistered.
 */
export const sagaEvents: SagaEventSinks['sagaEvents'] = {
  ended: (event) => {
    if (!workflowInfo().unsafe.isReplaying) sinks.ended(event);
  },
  attention: (event) => {
    if (!workflowInfo().unsafe.isReplaying) sinks.attention(event);
  },
  wait: (event) => {
    if (!workflowInfo().unsafe.isReplaying) sinks.wait(event);
  },
};
