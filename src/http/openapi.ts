/**
 * The OpenAPI 3.1 document of the HTTP API, made from the saga types' own zod schemas (`z.toJSONSchema`,
 * JSON Schema 2020-12, which OpenAPI 3.1 uses as is): one request body schema per type, so a client
 * generated from it validates data the way the server does (refinements a JSON Schema cannot say,
 * such as "each sku once", are still checked by the server, answered 422).
 */
import { z } from 'zod';
import { limitsOf, type SagaType, type SagaTypes } from '../sagas';
import { MAX_DEADLINE_MS, SagaAbort, SagaOutcome, SagaPhase } from '../shared/saga';

/** How a saga ends: its outcome, or how its workflow was stopped without one. */
const SAGA_ENDS = [...Object.values(SagaOutcome), ...Object.values(SagaAbort)];
import { MAX_HEADER_KEY_LENGTH } from './idempotency-key';
import { ProblemType } from './problems';

/** The `limit` of `GET /v1/sagas`: its default and largest value. */
export const LIST_LIMIT = { default: 100, max: 1000 } as const;

/** The JSON schema of `GET /v1/sagas`'s query string (also Fastify's validation of it). */
export const LIST_QUERY_SCHEMA = {
  type: 'object',
  properties: {
    type: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,200}$' },
    outcome: { type: 'string', enum: Object.values(SagaOutcome) },
    phase: { type: 'string', enum: Object.values(SagaPhase) },
    limit: { type: 'integer', minimum: 1, maximum: LIST_LIMIT.max, default: LIST_LIMIT.default },
  },
  additionalProperties: false,
} as const;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const problemResponse = (description: string, headers?: Record<string, unknown>) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/problem+json': { schema: ref('Problem') } },
});
const RETRY_AFTER = { 'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } } };
const COMMON_ERRORS = {
  '401': problemResponse('no valid bearer token', { 'WWW-Authenticate': { schema: { type: 'string' } } }),
  '503': problemResponse('Redis, PostgreSQL or Temporal unavailable, or the request deadline passed; retry', RETRY_AFTER),
};

/** A type's limits in words, e.g. `5 in flight, 10 per second; per scope value: 2 in flight`. */
function limitsText(def: SagaType<unknown>): string {
  return limitsOf(def)
    .map((l) => `${l.per ? 'per scope value: ' : ''}${[l.inFlight === undefined ? '' : `${l.inFlight} in flight`, l.perSecond === undefined ? '' : `${l.perSecond} per second`].filter(Boolean).join(', ')}`)
    .join('; ');
}

/** `order` → `OrderData`: the component name of a saga type's request body. */
function componentName(type: string): string {
  return `${type.replace(/(^|[^A-Za-z0-9])([A-Za-z0-9])/g, (_m, _sep: string, c: string) => c.toUpperCase())}Data`;
}

/** The OpenAPI 3.1 document of a server running `types`. */
export function openApiDocument(types: SagaTypes, options: { title?: string; version?: string } = {}): Record<string, unknown> {
  const schemas: Record<string, unknown> = {
    Problem: {
      type: 'object',
      description: 'RFC 9457 problem details',
      properties: {
        type: { type: 'string', format: 'uri-reference', examples: Object.values(ProblemType) },
        title: { type: 'string' },
        status: { type: 'integer' },
        detail: { type: 'string' },
        retryAfterMs: { type: 'integer', description: 'CONFLICT: when the intent may be free again; 429: when the limit may admit a start' },
        limit: { enum: ['IN_FLIGHT', 'RATE'], description: '429: the limit reached, of sagas in flight or of starts per second' },
      },
      required: ['type', 'title', 'status', 'detail'],
    },
    Reservation: {
      oneOf: [
        { type: 'object', properties: { status: { const: 'SUCCESS' }, fencingToken: { type: 'string', pattern: '^[0-9]+$' }, expiresAt: { type: 'integer' } }, required: ['status', 'fencingToken', 'expiresAt'] },
        { type: 'object', properties: { status: { const: 'DUPLICATE' } }, required: ['status'] },
        { type: 'object', properties: { status: { const: 'CONFLICT' }, retryAfterMs: { type: 'integer' } }, required: ['status', 'retryAfterMs'] },
      ],
    },
    Links: { type: 'object', properties: { self: { type: 'string' }, ui: { type: 'string', format: 'uri' } }, required: ['self', 'ui'] },
    StartedSaga: {
      type: 'object',
      properties: {
        workflowId: { type: 'string' },
        runId: { type: 'string' },
        intentKey: { type: 'string' },
        reservation: ref('Reservation'),
        outcome: {
          type: 'string',
          enum: SAGA_ENDS,
          description: 'once the saga has ended (a replay after its end, or an end within `Prefer: wait`): its outcome, or TERMINATED or TIMED_OUT for one stopped after it registered its entity',
        },
        reason: { type: 'string', description: 'why it ended so, when it ended within `Prefer: wait`' },
        entityId: { type: 'string', description: "the id of the saga's entity, when the saga ended within `Prefer: wait` having written one" },
        links: ref('Links'),
      },
      required: ['workflowId', 'runId', 'intentKey', 'reservation', 'links'],
    },
    SagaStatus: {
      type: 'object',
      properties: {
        workflowId: { type: 'string' },
        type: { type: 'string' },
        status: { type: 'string', description: 'the workflow execution status, e.g. RUNNING, COMPLETED' },
        phase: { type: 'string', enum: Object.values(SagaPhase) },
        outcome: { type: 'string', enum: SAGA_ENDS, description: 'once it has ended' },
        reason: { type: 'string' },
        intentKey: { type: 'string' },
        fencingToken: { type: 'string' },
        entityId: { type: 'string', description: "the id of the saga's entity, once written: opaque (22 base64url characters; a row number for sagas of earlier versions), the id its type's operations take (e.g. order-cancel's `order`)" },
        steps: { type: 'array', items: { type: 'string' }, description: 'the steps done, in order' },
        compensations: { type: 'array', items: { type: 'string' }, description: 'the compensations run, in order' },
        errors: { type: 'array', items: { type: 'object', properties: { at: { type: 'string' }, type: { type: 'string' }, message: { type: 'string' } }, required: ['at', 'message'] } },
        attention: {
          type: 'object',
          description: 'once a compensation failed after its retries: while the saga waits in NEEDS_ATTENTION (and after), what it still has to undo, since and until when it waits for a redrive, and how many it took',
          properties: {
            pending: { type: 'array', items: { type: 'string' } },
            since: { type: 'string', format: 'date-time' },
            until: { type: 'string', format: 'date-time' },
            redrives: { type: 'integer', minimum: 0 },
          },
          required: ['pending', 'since', 'until', 'redrives'],
        },
        links: ref('Links'),
      },
      required: ['workflowId', 'status', 'phase', 'steps', 'compensations', 'errors', 'links'],
    },
    SagaSummary: {
      type: 'object',
      properties: {
        workflowId: { type: 'string' },
        runId: { type: 'string' },
        status: { type: 'string' },
        type: { type: 'string' },
        phase: { type: 'string' },
        outcome: { type: 'string' },
        intentKey: { type: 'string' },
        startTime: { type: 'string', format: 'date-time' },
      },
      required: ['workflowId', 'runId', 'status', 'startTime'],
    },
  };
  const paths: Record<string, unknown> = {};
  for (const [type, def] of Object.entries(types)) {
    const name = componentName(type);
    const { $schema: _dialect, ...schema } = z.toJSONSchema(def.schema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' }) as Record<string, unknown>;
    schemas[name] = { ...schema, description: `the data of a ${type} saga` };
    paths[`/v1/sagas/${type}`] = {
      post: {
        operationId: `start${name.slice(0, -'Data'.length)}Saga`,
        summary: `start a ${type} saga through the gate`,
        parameters: [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: true,
            description: `the request's key in the caller's own namespace; a Structured Field string ("…") or bare`,
            schema: { type: 'string', pattern: `^"?[A-Za-z0-9._:-]{1,${MAX_HEADER_KEY_LENGTH}}"?$` },
          },
          {
            name: 'Prefer',
            in: 'header',
            required: false,
            description:
              "`wait=N` (RFC 7240): wait up to N seconds (within the server's request deadline) for the saga to end, and answer with its outcome, the same one every request of this key gets; a first request and a retry while the saga runs alike. `existing-entity`: a DUPLICATE names the existing entity (`entityId`) when this client created it",
            schema: { type: 'string' },
          },
          {
            name: 'deadlineMs',
            in: 'query',
            required: false,
            description: `how long the saga may take from its start, in ms: at most its type's deadline${def.deadlineMs === undefined ? '' : ` (${def.deadlineMs})`}, which it defaults to; past it the saga compensates and ends EXPIRED`,
            schema: { type: 'integer', minimum: 1, maximum: MAX_DEADLINE_MS },
          },
        ],
        requestBody: { required: true, content: { 'application/json': { schema: ref(name) } } },
        responses: {
          '201': {
            description: 'SUCCESS: the saga runs (or ran) for this key; a retry with the same key and body gets the same answer',
            headers: {
              Location: { schema: { type: 'string' } },
              'Idempotent-Replayed': { description: 'true when this answer was given to an earlier request with this key', schema: { type: 'string' } },
            },
            content: { 'application/json': { schema: ref('StartedSaga') } },
          },
          '400': problemResponse('Idempotency-Key missing or invalid, or a body that is not JSON'),
          '404': problemResponse('unknown saga type, or for an operation an entity that does not exist'),
          '409': problemResponse('DUPLICATE (the entity exists, made by another request; with `Prefer: existing-entity`, its `entityId` when it is this client\'s) or CONFLICT (another request holds the intent; Retry-After)', RETRY_AFTER),
          ...(limitsOf(def).length > 0 ? { '429': problemResponse(`this client is at a limit of the type (${limitsText(def)}); nothing was started (Retry-After)`, RETRY_AFTER) } : {}),
          '413': problemResponse('body over the limit'),
          '415': problemResponse('a body that is not application/json'),
          '422': problemResponse('data the saga type refuses, or the Idempotency-Key reused with another body'),
          ...COMMON_ERRORS,
        },
      },
    };
  }
  const idParameter = { name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'the workflow id (the Location of the start)' };
  paths['/v1/sagas'] = {
    get: {
      operationId: 'listSagas',
      summary: "the caller's sagas, newest first",
      parameters: Object.entries(LIST_QUERY_SCHEMA.properties).map(([name, schema]) => ({ name, in: 'query', required: false, schema })),
      responses: {
        '200': { description: 'the sagas', content: { 'application/json': { schema: { type: 'object', properties: { sagas: { type: 'array', items: ref('SagaSummary') } }, required: ['sagas'] } } } },
        '400': problemResponse('an invalid filter'),
        ...COMMON_ERRORS,
      },
    },
  };
  paths['/v1/sagas/{id}'] = {
    get: {
      operationId: 'getSaga',
      summary: "the saga's phase, steps, compensations and outcome",
      parameters: [idParameter],
      responses: { '200': { description: 'the saga', content: { 'application/json': { schema: ref('SagaStatus') } } }, '404': problemResponse("no saga of the caller's with this id"), ...COMMON_ERRORS },
    },
  };
  paths['/v1/sagas/{id}/cancel'] = {
    post: {
      operationId: 'cancelSaga',
      summary: 'request cancellation: the saga runs its compensations',
      parameters: [idParameter],
      responses: {
        '202': { description: 'cancellation requested', content: { 'application/json': { schema: { type: 'object', properties: { workflowId: { type: 'string' }, cancelRequested: { const: true } } } } } },
        '404': problemResponse("no saga of the caller's with this id"),
        '409': problemResponse('the saga has already ended'),
        ...COMMON_ERRORS,
      },
    },
  };
  paths['/v1/sagas/{id}/redrive'] = {
    post: {
      operationId: 'redriveSaga',
      summary: 'once the cause is fixed, retry the compensations a saga waiting in NEEDS_ATTENTION could not finish; answers when that round has run',
      parameters: [idParameter],
      responses: {
        '200': { description: 'the saga after the round: ended (its outcome) or waiting again (phase NEEDS_ATTENTION, the new failures in its errors)', content: { 'application/json': { schema: ref('SagaStatus') } } },
        '404': problemResponse("no saga of the caller's with this id"),
        '409': problemResponse('the saga does not wait in NEEDS_ATTENTION (it runs, compensates, or has ended): nothing was run'),
        ...COMMON_ERRORS,
      },
    },
  };
  paths['/v1/sagas/{id}/signals/{signal}'] = {
    post: {
      operationId: 'signalSaga',
      summary: 'send a signal a wait of the saga waits for (a payment confirmed); the body, if any, is what the steps after the wait find',
      parameters: [idParameter, { name: 'signal', in: 'path', required: true, schema: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_-]{0,63}$' } }],
      requestBody: { required: false, content: { 'application/json': { schema: {} } } },
      responses: {
        '200': {
          description: 'recorded: `first` is false for a repeat, which changed nothing',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                properties: { workflowId: { type: 'string' }, signal: { type: 'string' }, first: { type: 'boolean' }, links: { type: 'object' } },
                required: ['workflowId', 'signal', 'first'],
              },
            },
          },
        },
        '404': problemResponse("no saga of the caller's with this id"),
        '409': problemResponse('the saga waits for no such signal, its wait timed out, or it has ended: nothing was recorded'),
        ...COMMON_ERRORS,
      },
    },
  };
  const health = (what: string) => ({ get: { summary: what, security: [], responses: { '200': { description: 'yes' }, '503': problemResponse('no') } } });
  paths['/livez'] = health('the process serves requests');
  paths['/readyz'] = health('Redis, PostgreSQL and Temporal are reachable');
  return {
    openapi: '3.1.0',
    info: { title: options.title ?? 'reservation-saga HTTP API', version: options.version ?? '1' },
    components: { schemas, securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    security: [{ bearer: [] }],
    paths,
  };
}
