/**
 * What went wrong, as the saga records and throws it: the business `type` and message of an
 * activity's failure, and the refusal of a request that reuses an idempotency key with another payload.
 */
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import { ErrorType } from '../../shared';

/** The business `type` of a failure, looking through the ActivityFailure wrapper. */
export function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

export function failureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

export function keyReused(idempotencyKey: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`idempotency key ${idempotencyKey} was already used with another payload`, ErrorType.IDEMPOTENCY_KEY_REUSED);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The request hash an update caller sent, if any (the Temporal CLI may send nothing at all). */
export function hashOf(request: unknown): unknown {
  return isRecord(request) ? request.requestHash : undefined;
}
