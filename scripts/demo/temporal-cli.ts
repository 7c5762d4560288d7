/**
 * A saga started the way any Temporal client can start one, without SagaClient and without Redis
 * access: the workflow type `reservationSaga` with `{type, idempotencyKey, data}`, then the
 * reservation's answer read through the `reservation` update, the result and the history. Every
 * command goes through the codec server (`--codec-endpoint`): the input it sends is encrypted, what
 * it shows decoded, and a worker refuses (and deletes) a saga whose input arrives in clear. The demo
 * runs these arguments with the Temporal CLI; docs/temporal-clients.md shows the same commands, and
 * test/unit/readme.test.ts keeps them equal.
 */
import { RESERVATION_SAGA_WORKFLOW, reservationUpdate, sagaWorkflowId } from '../../src/shared';

/** The codec server of `make dev` (TEMPORAL_DEV_CODEC_PORT, default 8234). */
export const DEV_CODEC_ENDPOINT = 'http://127.0.0.1:8234';

/**
 * `temporal` arguments that start a saga of `type` by the workflow type alone. The worker derives
 * everything else (intent key, request hash, steps, timings) and reserves the intent itself.
 */
export function temporalStartArgs(taskQueue: string, type: string, idempotencyKey: string, data: unknown, codecEndpoint = DEV_CODEC_ENDPOINT): string[] {
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
    '--codec-endpoint',
    codecEndpoint,
  ];
}

/** `temporal` arguments that wait for the saga's reservation answer (the `reservation` update, no argument). */
export function temporalAnswerArgs(workflowId: string, codecEndpoint = DEV_CODEC_ENDPOINT): string[] {
  return ['workflow', 'update', 'execute', '--name', reservationUpdate.name, '--workflow-id', workflowId, '--codec-endpoint', codecEndpoint];
}

/** `temporal` arguments that wait for the saga's end and print its final state. */
export function temporalResultArgs(workflowId: string, codecEndpoint = DEV_CODEC_ENDPOINT): string[] {
  return ['workflow', 'result', '--workflow-id', workflowId, '--codec-endpoint', codecEndpoint];
}

/** `temporal` arguments that print the saga's history, decoded. */
export function temporalShowArgs(workflowId: string, codecEndpoint = DEV_CODEC_ENDPOINT): string[] {
  return ['workflow', 'show', '--workflow-id', workflowId, '--codec-endpoint', codecEndpoint];
}

/**
 * A history as `temporal workflow show --output json` prints it, with every payload's data decoded
 * from base64 (but not decrypted): what anyone who reads Temporal's storage could read.
 */
export function readableHistory(json: string): string {
  const parts = [json];
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === 'object') {
      const { data } = value as { data?: unknown };
      if (typeof data === 'string') parts.push(Buffer.from(data, 'base64').toString('latin1'));
      Object.values(value).forEach(visit);
    }
  };
  visit(JSON.parse(json));
  return parts.join('\n');
}
