/**
 * A saga started the way any Temporal client can start one, without SagaClient and without Redis
 * access: the workflow type `reservationSaga` with `{type, idempotencyKey, data}`, then the
 * reservation's answer read through the `reservation` update. The demo runs these arguments with the
 * Temporal CLI; docs/temporal-clients.md shows the same commands, and test/unit/readme.test.ts keeps them equal.
 */
import { RESERVATION_SAGA_WORKFLOW, reservationUpdate, sagaWorkflowId } from '../../src/shared';

/**
 * `temporal` arguments that start a saga of `type` by the workflow type alone. The worker derives
 * everything else (intent key, request hash, steps, timings) and reserves the intent itself.
 */
export function temporalStartArgs(taskQueue: string, type: string, idempotencyKey: string, data: unknown): string[] {
  return [
    'workflow',
    'start',
    '--type',
    RESERVATION_SAGA_WORKFLOW,
    '--task-queue',
    taskQueue,
    '--workflow-id',
    sagaWorkflowId(type, idempotencyKey),
    '--input',
    JSON.stringify({ type, idempotencyKey, data }),
  ];
}

/** `temporal` arguments that wait for the saga's reservation answer (the `reservation` update, no argument). */
export function temporalAnswerArgs(workflowId: string): string[] {
  return ['workflow', 'update', 'execute', '--name', reservationUpdate.name, '--workflow-id', workflowId];
}
