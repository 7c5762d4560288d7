/**
 * What the API answers for the errors of the gate and of Temporal: bad input and a reused key are the
 * caller's (4xx); Redis, PostgreSQL or Temporal out of reach is 503, to retry with the same key.
 */
import { RedriveError, SagaEndedError, SignalError } from '../client';
import { DbUnavailableError, isUnavailable as isDbUnavailable } from '../db/errors';
import { isRedisUnavailable, RmsUnavailableError } from '../rms/errors';
import { SagaInputError } from '../sagas/definition';
import { ErrorType } from '../shared/saga';
import { problem, ProblemType, type Problem } from './problems';

/** gRPC status codes that mean "not reachable now" (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED). */
const GRPC_UNAVAILABLE = new Set([14, 4, 8]);

/** The problem document of a known error, or undefined for an unexpected one (a 500). */
export function classifyError(error: unknown): Problem | undefined {
  if (error instanceof SagaInputError) {
    if (error.code === ErrorType.UNKNOWN_SAGA_TYPE) return problem(404, ProblemType.UNKNOWN_SAGA_TYPE, error.message);
    if (error.code === ErrorType.IDEMPOTENCY_KEY_REUSED) {
      // The message quotes the namespaced key; the caller knows its own.
      return problem(422, ProblemType.IDEMPOTENCY_KEY_REUSED, 'this Idempotency-Key was already used with another body; use a new key for a new request');
    }
    // A missing entity is a 404, as a missing saga is: the answer for an id that names nothing.
    if (error.code === ErrorType.ENTITY_NOT_FOUND) return problem(404, ProblemType.ENTITY_NOT_FOUND, error.message);
    return problem(422, ProblemType.INVALID_INPUT, error.message);
  }
  if (error instanceof SagaEndedError) return problem(409, ProblemType.SAGA_ENDED, `the saga has already ended (${error.status}); there is nothing to cancel`);
  if (error instanceof RedriveError) return problem(409, ProblemType.NOT_NEEDING_ATTENTION, 'the saga does not wait in NEEDS_ATTENTION (it runs, compensates, or has ended): nothing was redriven');
  if (error instanceof SignalError) return problem(409, ProblemType.NOT_WAITING, error.message);
  if (isNotFound(error)) return problem(404, ProblemType.SAGA_NOT_FOUND, 'no such saga');
  const service = unavailableService(error);
  if (service) return problem(503, ProblemType.UNAVAILABLE, `${service} is unavailable; nothing was started unless a retry with the same Idempotency-Key finds it`);
  return undefined;
}

/** Temporal's "no such workflow" (by name: the client library is loaded lazily). */
function isNotFound(error: unknown): boolean {
  for (const e of causes(error)) {
    if (e.name === 'WorkflowNotFoundError') return true;
    if ((e as { code?: unknown }).code === 5 && /not found/i.test(e.message)) return true;
  }
  return false;
}

/** Which backing service `error` says is out of reach, if any. */
function unavailableService(error: unknown): string | undefined {
  for (const e of causes(error)) {
    if (e instanceof RmsUnavailableError || isRedisUnavailable(e)) return 'Redis';
    if (e instanceof DbUnavailableError) return 'PostgreSQL';
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && GRPC_UNAVAILABLE.has(code)) return 'Temporal';
    if (e.name === 'TransportError' || e.name === 'ServiceError') {
      if (/unavailable|deadline|connect|transport/i.test(e.message)) return 'Temporal';
    }
    if (isDbUnavailable(e)) return 'PostgreSQL';
  }
  return undefined;
}

/** `error` and its causes, outermost first (at most 8: a cycle ends the walk). */
function* causes(error: unknown): Generator<Error> {
  let e: unknown = error;
  for (let depth = 0; depth < 8 && e instanceof Error; depth++) {
    yield e;
    e = e.cause;
  }
}
