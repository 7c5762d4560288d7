/**
 * The example payment provider: a small Stripe-style HTTP service over PostgreSQL (schema
 * `payment_provider`, see {@link ensureProviderSchema}) that the `order` saga charges and refunds
 * through. Every `POST` is idempotent by its `Idempotency-Key`: the first request with a key is
 * processed in one transaction that stores the answer with the effect; later requests with the key
 * get the stored answer again. Errors are RFC 9457 problem documents with a `code` member. The card
 * number is never stored nor logged: only its last 4 digits are kept.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type pg from 'pg';
import { z } from 'zod';
import { ProviderErrorCode } from './errors';
import {
  DECLINED_TEST_CARD,
  IDEMPOTENT_REPLAYED_HEADER,
  REFUND_REFUSED_TEST_CARD,
  type ChargeResponseBody,
  type ProblemDocument,
  type ProviderCharge,
  type RefundResponseBody,
} from './types';

/** Largest request body accepted, in bytes; larger ones get 413. */
export const PROVIDER_BODY_LIMIT_BYTES = 16 * 1024;

/** The operations whose first processing {@link ProviderServerOptions.hooks} can observe. */
export type ProviderOperation = 'charge' | 'refund';

/** Options of {@link createProviderServer}. */
export interface ProviderServerOptions {
  /** The database holding schema `payment_provider` (made by {@link ensureProviderSchema}). Not ended by the server. */
  pool: pg.Pool;
  /**
   * Every first processing of a charge or a refund waits this long inside its transaction, holding
   * its key (a slow provider, for tests). Replays do not wait.
   * @default 0
   */
  processingDelayMs?: number;
  /**
   * Receives one line per charge or refund outcome (`provider: charge ch_… succeeded 7499 cents (key …)`,
   * replays, refusals) and per internal error; never a card number.
   * @default no logging
   */
  log?: (line: string) => void;
  /** Test hooks. */
  hooks?: {
    /**
     * Runs after the transaction of a first processing committed and before the answer is sent
     * (e.g. to kill the process between the two). An error it throws becomes a 500 answer.
     */
    afterCommit?: (op: ProviderOperation, idempotencyKey: string) => void | Promise<void>;
  };
}

/** The outcome of one POST: what to answer, whether it was stored now, and the log line. */
interface Outcome {
  status: number;
  /** The exact JSON text to send. */
  body: string;
  /** True when this request processed the key and committed its answer (the hook runs). */
  committed: boolean;
  replayed: boolean;
  retryAfterSeconds?: number;
  log: string;
}

/** A row of `payment_provider.idempotency_keys`. */
interface KeyRecord {
  operation: ProviderOperation;
  state: 'answered' | 'voided';
  request_hash: string | null;
  response_status: number | null;
  response_body: string | null;
}

/** A row of `payment_provider.charges`, as read by the server. */
interface ChargeRow {
  id: string;
  status: 'succeeded' | 'declined';
  amount_cents: string;
  reference: string | null;
  card_last4: string;
  refunds_refused: boolean;
  refunded_at: Date | null;
  created_at: Date;
}

const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;

const chargeBody = z
  .object({
    amount_cents: z.number().int('must be a whole number of cents').positive('must be positive'),
    card: z.string().regex(/^\d{12,19}$/, 'must be 12 to 19 digits'),
    reference: z.string().max(200, 'must be at most 200 characters').nullable().optional(),
  })
  .strict();

const refundBody = z
  .object({
    charge_idempotency_key: z.string().regex(IDEMPOTENCY_KEY, 'must be 1 to 255 printable ASCII characters'),
  })
  .strict();

const listQuery = z.object({ reference: z.string().min(1, 'is required').max(200, 'must be at most 200 characters') });

const CHARGE_COLUMNS = 'id, status, amount_cents, reference, card_last4, refunds_refused, refunded_at, created_at';

/**
 * The payment provider's HTTP server, ready to `listen` (not listening yet):
 * - `POST /v1/charges` (`Idempotency-Key`, `{ amount_cents, card, reference? }`): 201 the charge;
 *   402 `card_declined`; 409 `idempotency_key_in_use` (with `Retry-After`) or `idempotency_key_voided`;
 *   422 `idempotency_key_reused`; 400 for a missing or invalid key or body.
 * - `POST /v1/refunds` (`Idempotency-Key`, `{ charge_idempotency_key }`): 200 `refunded`, `voided` or
 *   `nothing_to_refund`; 402 `refund_refused`; 409 while the refund or the charge is in flight.
 * - `GET /v1/charges?reference=…` (oldest first), `GET /v1/charges/:id`, `GET /livez`.
 *
 * A stored answer is replayed with `Idempotent-Replayed: true`. See docs/payment-provider.md.
 * @throws TypeError for a negative or non-finite `processingDelayMs`.
 */
export function createProviderServer(options: ProviderServerOptions): FastifyInstance {
  const { pool } = options;
  const processingDelayMs = options.processingDelayMs ?? 0;
  if (!Number.isFinite(processingDelayMs) || processingDelayMs < 0) {
    throw new TypeError(`payment provider processingDelayMs: must be 0 or more ms (got ${processingDelayMs})`);
  }
  const log = options.log ?? (() => {});
  const afterCommit = options.hooks?.afterCommit;
  const hashKey = cachedHashKey(pool);

  const app = Fastify({ bodyLimit: PROVIDER_BODY_LIMIT_BYTES, logger: false });
  // JSON only: a body of any other type is refused with 415 before it is read.
  app.removeContentTypeParser('text/plain');

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own client errors; their messages are not echoed, so no part of a body is either.
      return sendProblem(reply, status, clientErrorCode(status), clientErrorDetail(error));
    }
    log(`provider: ${request.method} ${request.routeOptions.url ?? request.url} failed: ${error.message}`);
    return sendProblem(reply, 500, ProviderErrorCode.INTERNAL_ERROR, 'the payment provider failed; see its log');
  });

  app.setNotFoundHandler(async (request, reply) =>
    sendProblem(reply, 404, ProviderErrorCode.NOT_FOUND, `no route ${request.method} ${request.url.split('?')[0]}`),
  );

  app.post('/v1/charges', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (typeof key !== 'string') return sendProblem(reply, 400, key.code, key.detail);
    const parsed = chargeBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, ProviderErrorCode.INVALID_REQUEST, describeIssues(parsed.error));
    const { amount_cents, card, reference = null } = parsed.data;
    const requestHash = hmac(await hashKey(), ['charge', amount_cents, card, reference]);

    const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
      if (!(await tryLock(tx, key))) return inUse('charge', key, 'another request with this key is being processed');
      const record = await readRecord(tx, key);
      if (record) return answerFromRecord('charge', key, record, requestHash);

      await processingDelay(tx, processingDelayMs);
      const declined = card === DECLINED_TEST_CARD;
      const id = newId('ch');
      const { rows } = await tx.query<ChargeRow>(
        `INSERT INTO payment_provider.charges (id, idempotency_key, status, amount_cents, reference, card_last4, refunds_refused)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${CHARGE_COLUMNS}`,
        [id, key, declined ? 'declined' : 'succeeded', amount_cents, reference, card.slice(-4), card === REFUND_REFUSED_TEST_CARD],
      );
      const charge = rows[0]!;
      const [status, body] = declined
        ? [402, problem(402, ProviderErrorCode.CARD_DECLINED, 'the card was declined', { charge_id: id })]
        : [201, chargeResponse(charge)];
      return store(tx, key, 'charge', requestHash, status, body, `provider: charge ${id} ${charge.status} ${amount_cents} cents (key ${key})`);
    });
    return send(reply, 'charge', key, outcome);
  });

  app.post('/v1/refunds', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (typeof key !== 'string') return sendProblem(reply, 400, key.code, key.detail);
    const parsed = refundBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, ProviderErrorCode.INVALID_REQUEST, describeIssues(parsed.error));
    const chargeKey = parsed.data.charge_idempotency_key;
    if (chargeKey === key) {
      return sendProblem(reply, 400, ProviderErrorCode.INVALID_REQUEST, 'charge_idempotency_key: must differ from the refund\'s own Idempotency-Key');
    }
    const requestHash = hmac(await hashKey(), ['refund', chargeKey]);

    const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
      if (!(await tryLock(tx, key))) return inUse('refund', key, 'another request with this key is being processed');
      const record = await readRecord(tx, key);
      if (record) return answerFromRecord('refund', key, record, requestHash);
      /*
       * Ordering against the charge: its key's lock is held for the whole of any charge attempt's
       * transaction, so holding it here means no attempt with that key is in flight:
       *   charge attempt: lock K ... insert charge ... commit (unlock)
       *   refund:                       try lock K → busy → 409, retried later
       *   refund (retry):                                        lock K → sees the charge → refunds it
       * and a refund that finds no record voids K while holding the lock, so an attempt arriving
       * later (a delayed retry of the charge) finds the voided record and is refused.
       */
      if (!(await tryLock(tx, chargeKey))) return inUse('refund', key, 'the charge with charge_idempotency_key is being processed; retry the refund');

      await processingDelay(tx, processingDelayMs);
      const target = await readRecord(tx, chargeKey);
      const where = `(key ${key}, charge key ${chargeKey})`;
      if (target?.operation === 'refund') {
        return unstored(400, problem(400, ProviderErrorCode.INVALID_REQUEST, 'charge_idempotency_key: names a refund, not a charge'), `provider: refund refused: charge key names a refund ${where}`);
      }
      if (target === undefined || target.state === 'voided') {
        if (target === undefined) {
          await tx.query(`INSERT INTO payment_provider.idempotency_keys (key, operation, state, voided_by) VALUES ($1, 'charge', 'voided', $2)`, [chargeKey, key]);
        }
        const body: RefundResponseBody = { status: 'voided', charge_id: null, amount_cents: 0 };
        return store(tx, key, 'refund', requestHash, 200, JSON.stringify(body), `provider: refund voided: no charge was made with the charge key, and none will be ${where}`);
      }
      const { rows } = await tx.query<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM payment_provider.charges WHERE idempotency_key = $1 FOR UPDATE`, [chargeKey]);
      const charge = rows[0];
      if (charge === undefined || charge.status === 'declined') {
        const body: RefundResponseBody = { status: 'nothing_to_refund', charge_id: null, amount_cents: 0 };
        return store(tx, key, 'refund', requestHash, 200, JSON.stringify(body), `provider: refund nothing_to_refund: the charge was declined ${where}`);
      }
      const amount = Number(charge.amount_cents);
      if (charge.refunded_at !== null) {
        const body: RefundResponseBody = { status: 'refunded', charge_id: charge.id, amount_cents: amount };
        return store(tx, key, 'refund', requestHash, 200, JSON.stringify(body), `provider: refund ${charge.id} already refunded ${amount} cents ${where}`);
      }
      if (charge.refunds_refused) {
        const body = problem(402, ProviderErrorCode.REFUND_REFUSED, 'the card network refused the refund');
        return store(tx, key, 'refund', requestHash, 402, body, `provider: refund ${charge.id} refused ${amount} cents ${where}`);
      }
      await tx.query('UPDATE payment_provider.charges SET refunded_at = clock_timestamp(), refund_idempotency_key = $2 WHERE id = $1', [charge.id, key]);
      const body: RefundResponseBody = { status: 'refunded', charge_id: charge.id, amount_cents: amount };
      return store(tx, key, 'refund', requestHash, 200, JSON.stringify(body), `provider: refund ${charge.id} refunded ${amount} cents ${where}`);
    });
    return send(reply, 'refund', key, outcome);
  });

  app.get('/v1/charges', async (request, reply) => {
    const parsed = listQuery.safeParse(request.query);
    if (!parsed.success) return sendProblem(reply, 400, ProviderErrorCode.INVALID_REQUEST, describeIssues(parsed.error));
    const { rows } = await pool.query<ChargeRow>(
      `SELECT ${CHARGE_COLUMNS} FROM payment_provider.charges WHERE reference = $1 ORDER BY created_at, id LIMIT 1000`,
      [parsed.data.reference],
    );
    return reply.send({ data: rows.map(listedCharge) });
  });

  app.get<{ Params: { id: string } }>('/v1/charges/:id', async (request, reply) => {
    const { rows } = await pool.query<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM payment_provider.charges WHERE id = $1`, [request.params.id]);
    const charge = rows[0];
    if (charge === undefined) return sendProblem(reply, 404, ProviderErrorCode.NOT_FOUND, 'no charge with that id');
    return reply.send(listedCharge(charge));
  });

  app.get('/livez', async () => ({ status: 'ok' }));

  /** Logs and sends an outcome; a committed one only after the hook ran (the answer may never leave). */
  async function send(reply: FastifyReply, op: ProviderOperation, key: string, outcome: Outcome): Promise<FastifyReply> {
    log(outcome.log);
    if (outcome.committed && afterCommit) await afterCommit(op, key);
    if (outcome.replayed) reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
    if (outcome.retryAfterSeconds !== undefined) reply.header('Retry-After', String(outcome.retryAfterSeconds));
    return reply
      .code(outcome.status)
      .type(outcome.status >= 400 ? 'application/problem+json' : 'application/json; charset=utf-8')
      .send(outcome.body);
  }

  return app;
}

/** Runs `fn` in a transaction on a connection of its own; committed when it returns, rolled back when it throws. */
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

/**
 * Takes the transaction-level advisory lock of an idempotency key, without waiting. It lasts until
 * the transaction ends: a crash ends the connection, and with it the lock and everything uncommitted.
 */
async function tryLock(tx: pg.PoolClient, key: string): Promise<boolean> {
  const { rows } = await tx.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('payment_provider:' || $1, 0)) AS locked`, [key]);
  return rows[0]!.locked;
}

async function readRecord(tx: pg.PoolClient, key: string): Promise<KeyRecord | undefined> {
  const { rows } = await tx.query<KeyRecord>(
    'SELECT operation, state, request_hash, response_status, response_body FROM payment_provider.idempotency_keys WHERE key = $1',
    [key],
  );
  return rows[0];
}

/** The answer to a request whose key already has a record: refused, or the stored answer again. */
function answerFromRecord(op: ProviderOperation, key: string, record: KeyRecord, requestHash: string): Outcome {
  if (record.state === 'voided') {
    return unstored(409, problem(409, ProviderErrorCode.IDEMPOTENCY_KEY_VOIDED, 'a refund voided this key before any charge was made with it'), `provider: ${op} refused: key voided by a refund (key ${key})`);
  }
  if (record.operation !== op || record.request_hash !== requestHash) {
    return unstored(422, problem(422, ProviderErrorCode.IDEMPOTENCY_KEY_REUSED, 'this key was used with another request'), `provider: ${op} refused: key reused with another request (key ${key})`);
  }
  return { status: record.response_status!, body: record.response_body!, committed: false, replayed: true, log: `provider: ${op} replayed ${record.response_status} (key ${key})` };
}

function inUse(op: ProviderOperation, key: string, detail: string): Outcome {
  return { ...unstored(409, problem(409, ProviderErrorCode.IDEMPOTENCY_KEY_IN_USE, detail), `provider: ${op} refused: in flight, retry (key ${key})`), retryAfterSeconds: 1 };
}

function unstored(status: number, body: string, log: string): Outcome {
  return { status, body, committed: false, replayed: false, log };
}

/** Stores the answer of a first processing with its key, in the transaction of its effect. */
async function store(tx: pg.PoolClient, key: string, op: ProviderOperation, requestHash: string, status: number, body: string | object, log: string): Promise<Outcome> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  await tx.query(
    `INSERT INTO payment_provider.idempotency_keys (key, operation, state, request_hash, response_status, response_body) VALUES ($1, $2, 'answered', $3, $4, $5)`,
    [key, op, requestHash, status, text],
  );
  return { status, body: text, committed: true, replayed: false, log };
}

/** Waits inside the transaction with statements, so the idle-in-transaction timeout does not end it. */
async function processingDelay(tx: pg.PoolClient, ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= 1000) {
    await tx.query('SELECT pg_sleep($1)', [Math.min(left, 1000) / 1000]);
  }
}

/**
 * The request hash key, read once from `payment_provider.settings`. Keyed, so the stored hash of a
 * request that held a card number cannot be turned back into the number by trying them all.
 */
function cachedHashKey(pool: pg.Pool): () => Promise<string> {
  let key: Promise<string> | undefined;
  return () => {
    key ??= pool
      .query<{ value: string }>(`SELECT value FROM payment_provider.settings WHERE name = 'request_hash_key'`)
      .then(({ rows }) => {
        if (rows[0] === undefined) throw new Error('payment_provider.settings has no request_hash_key: run ensureProviderSchema first');
        return rows[0].value;
      })
      .catch((err: unknown) => {
        key = undefined;
        throw err;
      });
    return key;
  };
}

function hmac(key: string, parts: unknown[]): string {
  return createHmac('sha256', key).update(JSON.stringify(parts)).digest('hex');
}

function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

function chargeResponse(charge: ChargeRow): ChargeResponseBody {
  return {
    id: charge.id,
    object: 'charge',
    amount_cents: Number(charge.amount_cents),
    status: 'succeeded',
    reference: charge.reference,
    card_last4: charge.card_last4,
    refunded: false,
    created_at: charge.created_at.toISOString(),
  };
}

function listedCharge(charge: ChargeRow): ProviderCharge {
  return {
    id: charge.id,
    status: charge.status,
    refunded: charge.refunded_at !== null,
    amount_cents: Number(charge.amount_cents),
    reference: charge.reference,
    card_last4: charge.card_last4,
    created_at: charge.created_at.toISOString(),
  };
}

/** The request's `Idempotency-Key`, or the problem with it. */
function idempotencyKeyOf(request: FastifyRequest): string | { code: string; detail: string } {
  const value = request.headers['idempotency-key'];
  if (value === undefined || value === '') {
    return { code: ProviderErrorCode.IDEMPOTENCY_KEY_MISSING, detail: 'the Idempotency-Key header is required' };
  }
  if (typeof value !== 'string' || !IDEMPOTENCY_KEY.test(value)) {
    return { code: ProviderErrorCode.IDEMPOTENCY_KEY_INVALID, detail: 'the Idempotency-Key header must be 1 to 255 printable ASCII characters' };
  }
  return value;
}

/** One sentence naming each invalid field; zod's messages here never quote the value. */
function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : 'body'}: ${issue.message}`).join('; ');
}

function clientErrorCode(status: number): string {
  if (status === 404) return ProviderErrorCode.NOT_FOUND;
  return ProviderErrorCode.INVALID_REQUEST;
}

function clientErrorDetail(error: FastifyError): string {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return 'the body is not valid JSON';
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'the body is empty; a JSON object is required';
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return `the body is larger than ${PROVIDER_BODY_LIMIT_BYTES} bytes`;
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return 'the body must be application/json';
    default:
      return `the request was refused (${error.code ?? 'client error'})`;
  }
}

function problem(status: number, code: string, detail: string, extra: Partial<ProblemDocument> = {}): string {
  const document: ProblemDocument = { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, detail, code, ...extra };
  return JSON.stringify(document);
}

function sendProblem(reply: FastifyReply, status: number, code: string, detail: string): FastifyReply {
  return reply.code(status).type('application/problem+json').send(problem(status, code, detail));
}
