/**
 * The saga's deadline (its type's `deadlineMs`, or a shorter one its caller asked for): when it
 * passes, and what a saga past it records and throws. Past it the saga takes no further step.
 */
import { ApplicationFailure, workflowInfo } from '@temporalio/workflow';
import { ErrorType, type SagaInput } from '../../shared';

/** When the saga's deadline passes (epoch ms, workflow time), counted from its start; undefined: it has none. */
export function deadlineOf(input: SagaInput): number | undefined {
  return input.deadlineMs === undefined ? undefined : workflowInfo().startTime.getTime() + input.deadlineMs;
}

export function pastDeadline(deadline: number | undefined): deadline is number {
  return deadline !== undefined && Date.now() >= deadline;
}

export function deadlinePassed(deadline: number, next: string): string {
  return `the saga's deadline (${new Date(deadline).toISOString()}) passed before ${next}`;
}

/** What a saga past its deadline throws before it takes `next`: it takes no step after its deadline. */
export function deadlineExceeded(deadline: number, next: string): ApplicationFailure {
  return ApplicationFailure.create({ type: ErrorType.DEADLINE_EXCEEDED, message: deadlinePassed(deadline, next), nonRetryable: true });
}
