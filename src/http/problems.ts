/**
 * RFC 9457 problem documents of the HTTP API. Every error the API answers is one, with a `type` that
 * names the problem (relative URIs under `/problems/`, listed in docs/http.md) or `about:blank` when
 * the status code says it all. No detail ever quotes a token or the request's data.
 */
import { STATUS_CODES } from 'node:http';
import type { FastifyReply } from 'fastify';

/** The problem types of the API (`type` member), by name. */
export const ProblemType = {
  IDEMPOTENCY_KEY_MISSING: '/problems/idempotency-key-missing',
  IDEMPOTENCY_KEY_INVALID: '/problems/idempotency-key-invalid',
  IDEMPOTENCY_KEY_REUSED: '/problems/idempotency-key-reused',
  DUPLICATE: '/problems/duplicate',
  CONFLICT: '/problems/conflict',
  LIMITED: '/problems/limited',
  INVALID_INPUT: '/problems/invalid-input',
  ENTITY_NOT_FOUND: '/problems/entity-not-found',
  UNKNOWN_SAGA_TYPE: '/problems/unknown-saga-type',
  SAGA_NOT_FOUND: '/problems/saga-not-found',
  SAGA_ENDED: '/problems/saga-ended',
  NOT_NEEDING_ATTENTION: '/problems/not-needing-attention',
  NOT_WAITING: '/problems/not-waiting',
  UNAVAILABLE: '/problems/unavailable',
  DEADLINE_EXCEEDED: '/problems/deadline-exceeded',
  GENERIC: 'about:blank',
} as const;
export type ProblemType = (typeof ProblemType)[keyof typeof ProblemType];

/** The JSON members of a problem document; `extensions` are added beside the standard ones. */
export interface Problem {
  type: ProblemType;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

const TITLES: Partial<Record<ProblemType, string>> = {
  [ProblemType.IDEMPOTENCY_KEY_MISSING]: 'Idempotency-Key header missing',
  [ProblemType.IDEMPOTENCY_KEY_INVALID]: 'Idempotency-Key header invalid',
  [ProblemType.IDEMPOTENCY_KEY_REUSED]: 'Idempotency-Key reused with another payload',
  [ProblemType.DUPLICATE]: 'The entity already exists',
  [ProblemType.ENTITY_NOT_FOUND]: 'The entity to operate on does not exist',
  [ProblemType.CONFLICT]: 'Another request holds the intent',
  [ProblemType.LIMITED]: 'Too many sagas started by this client',
  [ProblemType.INVALID_INPUT]: 'Invalid saga data',
  [ProblemType.UNKNOWN_SAGA_TYPE]: 'Unknown saga type',
  [ProblemType.SAGA_NOT_FOUND]: 'No such saga',
  [ProblemType.SAGA_ENDED]: 'The saga has already ended',
  [ProblemType.NOT_NEEDING_ATTENTION]: 'The saga does not need attention',
  [ProblemType.NOT_WAITING]: 'The saga does not wait for this signal',
  [ProblemType.UNAVAILABLE]: 'A backing service is unavailable',
  [ProblemType.DEADLINE_EXCEEDED]: 'The request deadline passed',
};

/** A problem document of `status` and `type`, with extension members. */
export function problem(status: number, type: ProblemType, detail: string, extensions: Record<string, unknown> = {}): Problem {
  return { type, title: TITLES[type] ?? STATUS_CODES[status] ?? 'Error', status, detail, ...extensions };
}

/** Sends `doc` as `application/problem+json` with its status. */
export function sendProblem(reply: FastifyReply, doc: Problem): FastifyReply {
  return reply.code(doc.status).type('application/problem+json').send(doc);
}

/** The raw HTTP/1.1 answer of a problem, for errors met before Fastify has a request (a head too large). */
export function rawProblemResponse(status: number, detail: string): string {
  const body = JSON.stringify(problem(status, ProblemType.GENERIC, detail));
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
