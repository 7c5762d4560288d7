/**
 * `saga serve`: the HTTP front door of the gate, for callers in any language. `POST /v1/sagas/{type}`
 * with an `Idempotency-Key` header answers through `SagaClient.start` (SUCCESS 201, DUPLICATE and
 * CONFLICT 409), and the saga can then be read, listed and cancelled. Every error is an RFC 9457
 * problem document; nothing logged or answered quotes a token or the request's data.
 */
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { SagaClient, StartedSaga } from '../client';
import type { SagaTypes } from '../sagas';
import { isTerminal, type SagaState } from '../shared/saga';
import { BearerTokens, type ApiClient } from './auth';
import { classifyError } from './errors';
import { httpOwner, namespacedKey, ownsWorkflow, readHeaderKey } from './idempotency-key';
import { preferredWaitSeconds, prefersExistingEntity } from './prefer';
import { LIST_LIMIT, LIST_QUERY_SCHEMA, openApiDocument } from './openapi';
import { problem, ProblemType, rawProblemResponse, sendProblem } from './problems';

/** What the server needs of SagaClient (a SagaClient, or a wrapper around one in tests). */
export interface SagaBackend {
  start: SagaClient['start'];
  list: SagaClient['list'];
  status: SagaClient['status'];
  cancel: SagaClient['cancel'];
  redrive: SagaClient['redrive'];
  signal: SagaClient['signal'];
  url: SagaClient['url'];
}

/** A readiness probe: resolves when its service answers, rejects (or times out) otherwise. */
export type ReadinessProbe = () => Promise<void>;

/** Options of {@link createSagaServer}. */
export interface SagaServerOptions {
  /** The gate and the saga operations. */
  client: SagaBackend;
  /** The saga types `client` accepts (its config's `sagaTypesFor`): routes, ownership, `/openapi.json`. */
  types: SagaTypes;
  /** The callers and their bearer tokens; at least one. */
  clients: readonly ApiClient[];
  /** `/readyz` probes by service name (e.g. redis, postgres, temporal); each must answer within 2 s. */
  readiness: Record<string, ReadinessProbe>;
  /** Largest request body in bytes; larger ones get 413. @default 65536 */
  bodyLimitBytes?: number;
  /** Largest request head (request line and headers) in bytes; larger ones get 431. @default 8192 */
  maxHeaderBytes?: number;
  /** Deadline of one request, arrival to answer; past it, 503 (the work under way goes on). @default 10000 */
  requestTimeoutMs?: number;
  /**
   * At `close()`, how long connections that have sent nothing yet are kept, so a request already on
   * its way (written, not yet read) is still answered; after it, idle connections are closed.
   * @default 500
   */
  shutdownGraceMs?: number;
  /** Whether Fastify logs requests (method, URL, status, timing: never headers or bodies). @default false */
  logger?: boolean;
  /**
   * Log JSON lines from this level up (TRACE, DEBUG, INFO, WARN, ERROR): one per gate answer, with
   * the workflow id, saga type and intent key (never the body), and each request only if `logger`.
   * @default none: only what `logger` asks for
   */
  logLevel?: string;
  /** Where those lines go. @default standard output */
  logStream?: { write(line: string): void };
}

/** Requests received so far and under way (the drain at shutdown reads them). */
export interface SagaServerStats {
  received: number;
  inFlight: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Requests received and under way. */
    sagaStats: SagaServerStats;
  }
  interface FastifyRequest {
    /** The authenticated caller's client id ('' before authentication). */
    apiClient: string;
  }
}

const PROBE_TIMEOUT_MS = 2_000;

const TIMED_OUT = Symbol('timed out');
/** What a `Prefer: wait` leaves of the request's deadline to answer in. */
const WAIT_MARGIN_MS = 500;

/**
 * The HTTP API over `options.client`, ready to `listen` (not listening yet); `close()` stops
 * accepting, answers every request already received, then resolves (it does not close the client).
 * Routes, status codes and their reasons: docs/http.md.
 * @throws TypeError when an option is malformed (never quoting a token).
 */
export function createSagaServer(options: SagaServerOptions): FastifyInstance {
  const tokens = new BearerTokens(options.clients);
  const typeNames = Object.keys(options.types);
  const bodyLimit = positive('bodyLimitBytes', options.bodyLimitBytes ?? 64 * 1024);
  const maxHeaderSize = positive('maxHeaderBytes', options.maxHeaderBytes ?? 8 * 1024);
  const requestTimeoutMs = positive('requestTimeoutMs', options.requestTimeoutMs ?? 10_000);
  const graceMs = options.shutdownGraceMs ?? 500;
  const openApi = openApiDocument(options.types);

  const app = Fastify({
    bodyLimit,
    // Reading a request's head and body is bounded by the deadline too (Node answers 408 past it).
    // (Fastify's handlerTimeout is not used: it stops counting once a request body has been read.)
    requestTimeout: requestTimeoutMs,
    // While closing, a request received is answered (with Connection: close), not refused with 503.
    return503OnClosing: false,
    http: { maxHeaderSize },
    logger:
      options.logLevel === undefined
        ? (options.logger ?? false)
        : {
            level: options.logLevel.toLowerCase(),
            // As the worker's lines: an ISO time and the level's name.
            timestamp: () => `,"time":"${new Date().toISOString()}"`,
            formatters: { level: (label: string) => ({ level: label.toUpperCase() }) },
            ...(options.logStream ? { stream: options.logStream } : {}),
          },
    logController: new LogController({ disableRequestLogging: options.logLevel !== undefined && !options.logger }),
    // Workflow ids are up to the type, a dash and 128 characters.
    routerOptions: { maxParamLength: 256 },
    // Errors before Fastify has a request (a head over the limit, a malformed request) as problems too.
    clientErrorHandler: (err: Error & { code?: string }, socket) => {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const [status, detail] =
        err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, `the request head is over ${maxHeaderSize} bytes`]
          : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? [408, 'the request was not received in time']
            : [400, 'the request is not valid HTTP'];
      if (socket.writable) socket.end(rawProblemResponse(status, detail));
      socket.destroy();
    },
  });

  // JSON only: a body of any other type is refused with 415 before it is read.
  app.removeContentTypeParser('text/plain');

  const stats: SagaServerStats = { received: 0, inFlight: 0 };
  app.decorate('sagaStats', stats);
  app.decorateRequest('apiClient', '');
  app.addHook('onRequest', async (_request, reply) => {
    stats.received++;
    stats.inFlight++;
    // The response's close: sent, or its connection gone.
    reply.raw.once('close', () => stats.inFlight--);
  });

  /*
   * A graceful close: close() stops accepting at once, but Node would also close every connection
   * without a request under way, including one whose request is written and not yet read, which
   * its client sees as a reset. Idle connections are closed only after the grace instead.
   */
  app.addHook('preClose', async () => {
    const server = app.server;
    const closeIdle = server.closeIdleConnections.bind(server);
    server.closeIdleConnections = () => undefined;
    setTimeout(() => {
      server.closeIdleConnections = closeIdle;
      closeIdle();
    }, graceMs).unref();
  });

  /** Runs `work`, or answers 503 once the deadline passes (the work goes on; its answer is dropped). */
  const withinDeadline = async (reply: FastifyReply, work: () => Promise<unknown>): Promise<unknown> => {
    let timer: NodeJS.Timeout | undefined;
    const running = work();
    const timedOut = new Promise<typeof TIMED_OUT>((resolve) => (timer = setTimeout(() => resolve(TIMED_OUT), requestTimeoutMs)));
    try {
      const first = await Promise.race([running, timedOut]);
      if (first !== TIMED_OUT) return first;
      running.catch(() => undefined);
      reply.header('Retry-After', '1');
      return sendProblem(
        reply,
        problem(503, ProblemType.DEADLINE_EXCEEDED, `no answer within ${requestTimeoutMs} ms; the request may still take effect: retry it with the same Idempotency-Key`),
      );
    } finally {
      clearTimeout(timer);
    }
  };

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (error.validation) return sendProblem(reply, problem(400, ProblemType.GENERIC, error.message));
    const status = error.statusCode ?? 500;
    // Fastify's own client errors (body too large, unsupported type, invalid JSON) quote no body.
    if (status >= 400 && status < 500) return sendProblem(reply, problem(status, ProblemType.GENERIC, error.message));
    const known = classifyError(error);
    if (known) {
      if (known.status === 503) reply.header('Retry-After', '1');
      else request.log.info({ problem: known.type }, 'request refused');
      return sendProblem(reply, known);
    }
    request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, problem(500, ProblemType.GENERIC, 'the request failed; see the server log'));
  });

  app.setNotFoundHandler(async (request, reply) => sendProblem(reply, problem(404, ProblemType.GENERIC, `no route ${request.method} ${request.url.split('?')[0]}`)));

  const authenticate = async (request: FastifyRequest, reply: FastifyReply) => {
    const clientId = tokens.clientOf(request.headers.authorization);
    if (clientId === undefined) {
      reply.header('WWW-Authenticate', 'Bearer realm="saga"');
      return sendProblem(reply, problem(401, ProblemType.GENERIC, 'a valid "Authorization: Bearer <token>" header is required'));
    }
    request.apiClient = clientId;
  };

  /**
   * The id of a route, when its shape names a saga of the caller's; a 404 otherwise (never saying
   * whose it is). The saga's recorded owner is checked too, where it is read: SagaClient answers
   * another owner's saga as a missing one (`{ owner }`), so both get the same 404.
   */
  const ownId = (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply): string | undefined => {
    const { id } = request.params;
    if (ownsWorkflow(request.apiClient, id, typeNames)) return id;
    void sendProblem(reply, problem(404, ProblemType.SAGA_NOT_FOUND, `no saga ${JSON.stringify(id)} of this client`));
    return undefined;
  };

  const links = (workflowId: string) => ({ self: `/v1/sagas/${encodeURIComponent(workflowId)}`, ui: options.client.url(workflowId) });

  app.post<{ Params: { type: string }; Querystring: { deadlineMs?: string }; Body: unknown }>(
    '/v1/sagas/:type',
    {
      onRequest: [
        authenticate,
        // Before the body is read: an unknown type or a missing key costs no body.
        async (request, reply) => {
          const { type } = request.params;
          if (!Object.hasOwn(options.types, type)) {
            return sendProblem(reply, problem(404, ProblemType.UNKNOWN_SAGA_TYPE, `unknown saga type ${JSON.stringify(type)} (known: ${typeNames.join(', ')})`));
          }
          const key = readHeaderKey(request.headers['idempotency-key']);
          if (key === 'missing') return sendProblem(reply, problem(400, ProblemType.IDEMPOTENCY_KEY_MISSING, 'an Idempotency-Key header is required'));
          if (key === 'invalid') {
            return sendProblem(reply, problem(400, ProblemType.IDEMPOTENCY_KEY_INVALID, 'the Idempotency-Key must be one key of 1-95 letters, digits and . _ : - (bare or as a quoted string)'));
          }
        },
      ],
    },
    async (request, reply) => {
      if (request.body === undefined) return sendProblem(reply, problem(400, ProblemType.GENERIC, 'a JSON body (the saga data) is required'));
      const { key } = readHeaderKey(request.headers['idempotency-key']) as { key: string };
      const { type } = request.params;
      // `Prefer: wait=N` waits for the saga's end, within this request's own deadline.
      const waitSeconds = preferredWaitSeconds(request.headers.prefer);
      const waitMs = waitSeconds === undefined ? 0 : Math.min(waitSeconds * 1000, Math.max(0, requestTimeoutMs - WAIT_MARGIN_MS));
      // `?deadlineMs=N`: less time than the type's deadline (the client refuses more, 422).
      const { deadlineMs } = request.query;
      if (deadlineMs !== undefined && !/^[1-9][0-9]{0,15}$/.test(deadlineMs)) {
        return sendProblem(reply, problem(422, ProblemType.INVALID_INPUT, 'deadlineMs must be a positive whole number of milliseconds'));
      }
      return withinDeadline(reply, async () => {
        const started = await options.client.start(type, request.body, {
          idempotencyKey: namespacedKey(request.apiClient, key),
          waitMs,
          owner: httpOwner(request.apiClient),
          ...(deadlineMs === undefined ? {} : { deadlineMs: Number(deadlineMs) }),
          // `Prefer: existing-entity`: a DUPLICATE names the entity when it is this client's.
          ...(prefersExistingEntity(request.headers.prefer) ? { findExisting: true } : {}),
        });
        const answer = started.reservation.status;
        request.log.info(
          { sagaEvent: 'gate', workflowId: started.workflowId, sagaType: type, intentKey: started.intentKey, answer, ...(started.replayed ? { replayed: true } : {}) },
          `saga gate answered ${answer}`,
        );
        if (reply.sent) return reply;
        if (started.replayed) reply.header('Idempotent-Replayed', 'true');
        return answerStart(reply, started, links(started.workflowId));
      });
    },
  );

  app.get<{ Querystring: { type?: string; outcome?: string; phase?: string; limit?: number } }>(
    '/v1/sagas',
    { onRequest: authenticate, schema: { querystring: LIST_QUERY_SCHEMA } },
    async (request, reply) => {
      const { type, outcome, phase, limit = LIST_LIMIT.default } = request.query;
      if (type !== undefined && !Object.hasOwn(options.types, type)) return { sagas: [] };
      return withinDeadline(reply, async () => {
        // The caller's own sagas only: their ids start with `<type>-<client id>.`.
        const sagas = await options.client.list({
          type,
          outcome,
          phase,
          limit,
          workflowIdPrefixes: (type === undefined ? typeNames : [type]).map((t) => `${t}-${request.apiClient}.`),
          owner: httpOwner(request.apiClient),
        });
        return { sagas };
      });
    },
  );

  app.get<{ Params: { id: string } }>('/v1/sagas/:id', { onRequest: authenticate }, async (request, reply) => {
    const id = ownId(request, reply);
    if (id === undefined) return reply;
    return withinDeadline(reply, async () => {
      const { status, state } = await options.client.status(id, { owner: httpOwner(request.apiClient) });
      return sagaView(id, status, state);
    });
  });

  /** What the API shows of a saga. */
  const sagaView = (id: string, status: string, state: SagaState) => ({
    workflowId: id,
    type: state.type,
    status,
    phase: state.phase,
    ...(state.outcome ? { outcome: state.outcome } : {}),
    ...(state.reason ? { reason: state.reason } : {}),
    intentKey: state.intentKey,
    ...(state.fencingToken ? { fencingToken: state.fencingToken } : {}),
    // The id the type's operations take (order-cancel's `order`): the owner's way to its entity.
    ...(state.entityId ? { entityId: state.entityId } : {}),
    steps: state.stepsDone,
    compensations: state.compensationsRun,
    errors: state.errors,
    ...(state.attention ? { attention: state.attention } : {}),
    links: links(id),
  });

  app.post<{ Params: { id: string } }>('/v1/sagas/:id/redrive', { onRequest: authenticate }, async (request, reply) => {
    const id = ownId(request, reply);
    if (id === undefined) return reply;
    return withinDeadline(reply, async () => {
      const state = await options.client.redrive(id, { owner: httpOwner(request.apiClient) });
      // Ended by this redrive, or waiting again (NEEDS_ATTENTION): the saga as it stands now.
      return sagaView(id, isTerminal(state.phase) ? 'COMPLETED' : 'RUNNING', state);
    });
  });

  app.post<{ Params: { id: string; signal: string }; Body: unknown }>('/v1/sagas/:id/signals/:signal', { onRequest: authenticate }, async (request, reply) => {
    const id = ownId(request, reply);
    if (id === undefined) return reply;
    return withinDeadline(reply, async () => {
      const receipt = await options.client.signal(id, request.params.signal, request.body ?? undefined, { owner: httpOwner(request.apiClient) });
      return { workflowId: id, ...receipt, links: links(id) };
    });
  });

  app.post<{ Params: { id: string } }>('/v1/sagas/:id/cancel', { onRequest: authenticate }, async (request, reply) => {
    const id = ownId(request, reply);
    if (id === undefined) return reply;
    return withinDeadline(reply, async () => {
      await options.client.cancel(id, { owner: httpOwner(request.apiClient) });
      if (reply.sent) return reply;
      return reply.code(202).send({ workflowId: id, cancelRequested: true, links: links(id) });
    });
  });

  app.get('/openapi.json', async () => openApi);

  app.get('/livez', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const checks = await Promise.all(
      Object.entries(options.readiness).map(async ([name, probe]) => {
        try {
          await withTimeout(probe(), PROBE_TIMEOUT_MS);
          return [name, 'ok'] as const;
        } catch {
          return [name, 'unavailable'] as const;
        }
      }),
    );
    const failed = checks.filter(([, state]) => state !== 'ok').map(([name]) => name);
    if (failed.length === 0) return { status: 'ok', checks: Object.fromEntries(checks) };
    reply.header('Retry-After', '1');
    return sendProblem(reply, problem(503, ProblemType.UNAVAILABLE, `unavailable: ${failed.join(', ')}`, { checks: Object.fromEntries(checks) }));
  });

  return app;
}

/**
 * The answer of a start: SUCCESS 201 with the saga's Location; DUPLICATE and CONFLICT 409 problems
 * (CONFLICT with Retry-After); a client at a limit of its saga type 429 with Retry-After. See
 * docs/http.md for why.
 */
function answerStart(reply: FastifyReply, started: StartedSaga, links: { self: string; ui: string }): FastifyReply {
  const r = started.reservation;
  if (r.status === 'SUCCESS') {
    return reply
      .code(201)
      .header('Location', links.self)
      .send({
        workflowId: started.workflowId,
        runId: started.runId,
        intentKey: started.intentKey,
        reservation: r,
        ...(started.outcome ? { outcome: started.outcome } : {}),
        // A saga that ended while the request waited (`Prefer: wait`): why, and the id its operations take.
        ...(started.final?.reason ? { reason: started.final.reason } : {}),
        ...(started.final?.entityId ? { entityId: started.final.entityId } : {}),
        links,
      });
  }
  if (r.status === 'DUPLICATE') {
    return sendProblem(
      reply,
      problem(409, ProblemType.DUPLICATE, 'the entity this request would create already exists (created by another request); nothing was started', {
        intentKey: started.intentKey,
        // Asked for (`Prefer: existing-entity`) and the client's own: the id its operations take.
        ...(started.entityId ? { entityId: started.entityId } : {}),
      }),
    );
  }
  reply.header('Retry-After', String(Math.max(1, Math.ceil(r.retryAfterMs / 1000))));
  if (started.limited) {
    const what = started.limited === 'RATE' ? 'starts per second' : 'sagas in flight';
    return sendProblem(
      reply,
      problem(429, ProblemType.LIMITED, `this client is at its limit of ${what} for this saga type; nothing was started: retry after Retry-After seconds`, { limit: started.limited, retryAfterMs: r.retryAfterMs }),
    );
  }
  return sendProblem(
    reply,
    problem(409, ProblemType.CONFLICT, 'another request holds this intent right now; nothing was started: retry after Retry-After seconds', { intentKey: started.intentKey, retryAfterMs: r.retryAfterMs }),
  );
}

function positive(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new TypeError(`saga server ${name}: must be a positive whole number (got ${value})`);
  return value;
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

