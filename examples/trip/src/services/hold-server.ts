/**
 * What the hotel and the airline have in common: a small HTTP service over PostgreSQL that holds
 * one unit of its inventory (a room, a seat) for a caller, idempotently, and releases it again.
 * Each service keeps its tables in a schema of its own (`hotel`, `airline`); see hotel.ts and
 * airline.ts for what they hold.
 *
 * - `POST /v1/holds` (`Idempotency-Key`, the service's body): 201 `{ id, status: 'held', … }`;
 *   422 when the service refuses (`sold_out`, `unknown_hotel`, …: stored, so every retry gets it);
 *   409 `idempotency_key_in_use` (with `Retry-After`) while a request with the key is processed;
 *   409 `idempotency_key_voided` when a release voided the key before any hold was made with it;
 *   422 `idempotency_key_reused` for the key sent again with another body; 400 for a bad request.
 * - `POST /v1/releases` (`Idempotency-Key`, `{ hold_key }`): releases the hold made with `hold_key`.
 *   200 `released` (now or before), `voided` (no hold was made with the key, and now none ever will
 *   be), `nothing_to_release` (the hold was refused); 409 `hold_in_progress` (with `Retry-After`)
 *   while a hold with `hold_key` is still being processed: retry the release, it is answered once the
 *   hold has settled. That is the rule a saga's compensation needs (see trip.ts).
 * - `GET /v1/holds?reference=…`: the holds made with a reference, oldest first.
 * - `GET /livez`.
 *
 * Every `POST` runs in one transaction that stores its answer with its effect, holding a lock on its
 * idempotency key for the whole of it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type pg from 'pg';
import { z } from 'zod';

/** A refusal of a hold by the service: answered 422 with this code, and stored with the key. */
export interface Refusal {
  code: string;
  detail: string;
}

/** What makes a hold service a hotel or an airline. */
export interface HoldServiceSpec<B extends { reference: string }> {
  /** `hotel` or `airline`: the name in log lines and the schema of its tables. */
  name: string;
  /** The body of `POST /v1/holds` (always with a `reference`). */
  body: z.ZodType<B>;
  /** Takes one unit of inventory for the hold, in the hold's transaction; the resource held, or a refusal. */
  take(tx: pg.PoolClient, body: B): Promise<{ resource: string } | { refused: Refusal }>;
  /** Gives the unit of `resource` back, in the release's transaction. */
  giveBack(tx: pg.PoolClient, resource: string): Promise<void>;
  /** Routes of its own (reading its inventory). */
  routes?(app: FastifyInstance, pool: pg.Pool): void;
}

/** Options of a hold service's server. */
export interface HoldServerOptions<B> {
  /** The database holding the service's schema (see migrate.ts). Not ended by the server. */
  pool: pg.Pool;
  /**
   * How long the first processing of a hold takes, inside its transaction, holding its key (a slow
   * service: its answer comes late, or after the caller gave up). @default 0
   */
  holdDelayMs?: number | ((body: B) => number);
  /** One line per hold or release outcome. @default no logging */
  log?: (line: string) => void;
  /** Test hooks. */
  hooks?: {
    /** A first processing of a hold began (the key is locked; the delay, if any, starts now). */
    holdStarted?: (idempotencyKey: string, body: B) => void;
    /** A first processing of a hold ended: committed, or rolled back. */
    holdSettled?: (idempotencyKey: string, body: B) => void;
  };
}

interface Outcome {
  status: number;
  body: string;
  replayed?: boolean;
  retryAfterSeconds?: number;
  log: string;
}

interface KeyRecord {
  operation: 'hold' | 'release';
  state: 'answered' | 'voided';
  request_hash: string | null;
  response_status: number | null;
  response_body: string | null;
}

interface HoldRow {
  id: string;
  resource: string;
  reference: string;
  status: 'HELD' | 'RELEASED';
  held_at: Date;
  released_at: Date | null;
}

const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;
const releaseBody = z.object({ hold_key: z.string().regex(IDEMPOTENCY_KEY, 'must be 1 to 255 printable ASCII characters') }).strict();
const listQuery = z.object({ reference: z.string().min(1, 'is required').max(200) });

/** The SQL of a hold service's tables in schema `name` (its inventory table is the service's own). */
export function holdTablesSql(name: string): string {
  return `
    CREATE SCHEMA IF NOT EXISTS ${name};
    CREATE TABLE IF NOT EXISTS ${name}.holds (
      id              text        PRIMARY KEY,
      idempotency_key text        NOT NULL UNIQUE,
      resource        text        NOT NULL,
      details         jsonb       NOT NULL,
      reference       text        NOT NULL,
      status          text        NOT NULL CHECK (status IN ('HELD', 'RELEASED')),
      released_by     text,
      held_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
      released_at     timestamptz
    );
    CREATE INDEX IF NOT EXISTS holds_reference_idx ON ${name}.holds (reference, held_at);
    CREATE TABLE IF NOT EXISTS ${name}.idempotency_keys (
      key             text        PRIMARY KEY,
      operation       text        NOT NULL CHECK (operation IN ('hold', 'release')),
      state           text        NOT NULL CHECK (state IN ('answered', 'voided')),
      request_hash    text,
      response_status integer,
      response_body   text,
      voided_by       text,
      created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
    );`;
}

/** The server of a hold service, ready to `listen`. */
export function createHoldServer<B extends { reference: string }>(spec: HoldServiceSpec<B>, options: HoldServerOptions<B>): FastifyInstance {
  const { pool } = options;
  const schema = spec.name;
  const log = options.log ?? (() => {});
  const delayOf = (body: B) => (typeof options.holdDelayMs === 'function' ? options.holdDelayMs(body) : (options.holdDelayMs ?? 0));
  const app = Fastify({ bodyLimit: 16 * 1024, logger: false });

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return sendProblem(reply, status, 'invalid_request', `the request was refused (${error.code ?? 'client error'})`);
    log(`${schema}: ${request.method} ${request.url} failed: ${error.message}`);
    return sendProblem(reply, 500, 'internal_error', `the ${schema} service failed; see its log`);
  });

  app.post('/v1/holds', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (key === undefined) return sendProblem(reply, 400, 'invalid_request', 'the Idempotency-Key header must be 1 to 255 printable ASCII characters');
    const parsed = spec.body.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const body = parsed.data;
    const hash = requestHash(['hold', body]);

    let started = false;
    try {
      const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
        if (!(await tryLock(tx, schema, key))) return inUse(`hold in flight (key ${key})`, 'idempotency_key_in_use', 'another request with this key is being processed');
        const record = await readRecord(tx, schema, key);
        if (record) return answerFromRecord(schema, 'hold', key, record, hash);

        started = true;
        options.hooks?.holdStarted?.(key, body);
        await processingDelay(tx, delayOf(body));
        const taken = await spec.take(tx, body);
        if ('refused' in taken) {
          const { code, detail } = taken.refused;
          return store(tx, schema, key, 'hold', hash, 422, problem(422, code, detail), `${schema}: hold refused: ${code} (key ${key})`);
        }
        const id = `hold_${randomBytes(10).toString('hex')}`;
        const { reference, ...details } = body;
        await tx.query(
          `INSERT INTO ${schema}.holds (id, idempotency_key, resource, details, reference, status) VALUES ($1, $2, $3, $4, $5, 'HELD')`,
          [id, key, taken.resource, JSON.stringify(details), reference],
        );
        const answer = { id, status: 'held', resource: taken.resource, reference };
        return store(tx, schema, key, 'hold', hash, 201, JSON.stringify(answer), `${schema}: held ${taken.resource} as ${id} (key ${key})`);
      });
      return send(reply, outcome);
    } finally {
      if (started) options.hooks?.holdSettled?.(key, body);
    }
  });

  app.post('/v1/releases', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (key === undefined) return sendProblem(reply, 400, 'invalid_request', 'the Idempotency-Key header must be 1 to 255 printable ASCII characters');
    const parsed = releaseBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const holdKey = parsed.data.hold_key;
    if (holdKey === key) return sendProblem(reply, 400, 'invalid_request', 'hold_key: must differ from the release\'s own Idempotency-Key');
    const hash = requestHash(['release', holdKey]);

    const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
      if (!(await tryLock(tx, schema, key))) return inUse(`release in flight (key ${key})`, 'idempotency_key_in_use', 'another request with this key is being processed');
      const record = await readRecord(tx, schema, key);
      if (record) return answerFromRecord(schema, 'release', key, record, hash);
      /*
       * Ordered after every attempt of the hold: a hold holds its key's lock for the whole of its
       * transaction, so while it is processed the release is answered 409 (retry), and once the lock
       * is ours no hold with the key is in flight. A release that finds no hold voids the key under
       * that lock: a hold arriving later (a delayed retry) is refused, never made.
       */
      if (!(await tryLock(tx, schema, holdKey))) {
        return inUse(`release waits: the hold is still being processed (key ${key}, hold key ${holdKey})`, 'hold_in_progress', 'a hold with hold_key is still being processed; retry the release');
      }
      const target = await readRecord(tx, schema, holdKey);
      const where = `(key ${key}, hold key ${holdKey})`;
      if (target?.operation === 'release') return { status: 400, body: problem(400, 'invalid_request', 'hold_key names a release, not a hold'), log: `${schema}: release refused: hold_key names a release ${where}` };
      if (target === undefined || target.state === 'voided') {
        if (target === undefined) {
          await tx.query(`INSERT INTO ${schema}.idempotency_keys (key, operation, state, voided_by) VALUES ($1, 'hold', 'voided', $2)`, [holdKey, key]);
        }
        return store(tx, schema, key, 'release', hash, 200, JSON.stringify({ status: 'voided', hold_id: null }), `${schema}: release voided the hold key: no hold was made with it, and none will be ${where}`);
      }
      const { rows } = await tx.query<HoldRow>(`SELECT id, resource, status FROM ${schema}.holds WHERE idempotency_key = $1 FOR UPDATE`, [holdKey]);
      const hold = rows[0];
      if (hold === undefined) {
        return store(tx, schema, key, 'release', hash, 200, JSON.stringify({ status: 'nothing_to_release', hold_id: null }), `${schema}: nothing to release: the hold was refused ${where}`);
      }
      if (hold.status === 'HELD') {
        await spec.giveBack(tx, hold.resource);
        await tx.query(`UPDATE ${schema}.holds SET status = 'RELEASED', released_by = $2, released_at = clock_timestamp() WHERE id = $1`, [hold.id, key]);
      }
      return store(tx, schema, key, 'release', hash, 200, JSON.stringify({ status: 'released', hold_id: hold.id }), `${schema}: released ${hold.resource} (${hold.id}) ${where}`);
    });
    return send(reply, outcome);
  });

  app.get('/v1/holds', async (request, reply) => {
    const parsed = listQuery.safeParse(request.query);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const { rows } = await pool.query<HoldRow>(
      `SELECT id, resource, reference, status, held_at, released_at FROM ${schema}.holds WHERE reference = $1 ORDER BY held_at, id LIMIT 1000`,
      [parsed.data.reference],
    );
    return reply.send({ data: rows.map((h) => ({ id: h.id, resource: h.resource, reference: h.reference, status: h.status, held_at: h.held_at, released_at: h.released_at })) });
  });

  app.get('/livez', async () => ({ status: 'ok' }));
  spec.routes?.(app, pool);

  function send(reply: FastifyReply, outcome: Outcome): FastifyReply {
    log(outcome.log);
    if (outcome.replayed) reply.header('Idempotent-Replayed', 'true');
    if (outcome.retryAfterSeconds !== undefined) reply.header('Retry-After', String(outcome.retryAfterSeconds));
    return reply
      .code(outcome.status)
      .type(outcome.status >= 400 ? 'application/problem+json' : 'application/json; charset=utf-8')
      .send(outcome.body);
  }

  return app;
}

async function inTransaction<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const tx = await pool.connect();
  try {
    await tx.query('BEGIN');
    const result = await fn(tx);
    await tx.query('COMMIT');
    return result;
  } catch (err) {
    await tx.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    tx.release();
  }
}

/** The transaction-level lock of an idempotency key, without waiting (a crash ends it with the connection). */
async function tryLock(tx: pg.PoolClient, schema: string, key: string): Promise<boolean> {
  const { rows } = await tx.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended($1 || ':' || $2, 0)) AS locked`, [schema, key]);
  return rows[0]!.locked;
}

async function readRecord(tx: pg.PoolClient, schema: string, key: string): Promise<KeyRecord | undefined> {
  const { rows } = await tx.query<KeyRecord>(`SELECT operation, state, request_hash, response_status, response_body FROM ${schema}.idempotency_keys WHERE key = $1`, [key]);
  return rows[0];
}

function answerFromRecord(schema: string, op: 'hold' | 'release', key: string, record: KeyRecord, hash: string): Outcome {
  if (record.state === 'voided') {
    return { status: 409, body: problem(409, 'idempotency_key_voided', 'a release voided this key before any hold was made with it'), log: `${schema}: ${op} refused: key voided (key ${key})` };
  }
  if (record.operation !== op || record.request_hash !== hash) {
    return { status: 422, body: problem(422, 'idempotency_key_reused', 'this key was used with another request'), log: `${schema}: ${op} refused: key reused (key ${key})` };
  }
  return { status: record.response_status!, body: record.response_body!, replayed: true, log: `${schema}: ${op} replayed ${record.response_status} (key ${key})` };
}

function inUse(log: string, code: string, detail: string): Outcome {
  return { status: 409, body: problem(409, code, detail), retryAfterSeconds: 1, log };
}

async function store(tx: pg.PoolClient, schema: string, key: string, op: 'hold' | 'release', hash: string, status: number, body: string, log: string): Promise<Outcome> {
  await tx.query(
    `INSERT INTO ${schema}.idempotency_keys (key, operation, state, request_hash, response_status, response_body) VALUES ($1, $2, 'answered', $3, $4, $5)`,
    [key, op, hash, status, body],
  );
  return { status, body, log };
}

/** Waits inside the transaction with statements, so PostgreSQL's idle-in-transaction timeout does not end it. */
async function processingDelay(tx: pg.PoolClient, ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= 500) await tx.query('SELECT pg_sleep($1)', [Math.min(left, 500) / 1000]);
}

/** A digest of a request (no secrets in these bodies, so an unkeyed hash serves). */
function requestHash(parts: unknown): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  return typeof value === 'string' && IDEMPOTENCY_KEY.test(value) ? value : undefined;
}

function describe(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : 'body'}: ${issue.message}`).join('; ');
}

function problem(status: number, code: string, detail: string): string {
  return JSON.stringify({ type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, detail, code });
}

/** Sends an RFC 9457 problem document with a `code` member. */
export function sendProblem(reply: FastifyReply, status: number, code: string, detail: string): FastifyReply {
  return reply.code(status).type('application/problem+json').send(problem(status, code, detail));
}
