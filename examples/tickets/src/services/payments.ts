/**
 * The example payment service: a small HTTP service over PostgreSQL, in the manner of a card
 * processor's API. The app creates a payment intent for a seat held (the `ticket` saga's
 * `requestPayment` step), the buyer pays it here, the service tells the app by a signed webhook, and
 * the app cancels or refunds it when the sale is undone. Its tables are in schema `payments` of the
 * app's database (a real one has a database of its own): `payments.idempotency_keys`,
 * `payments.payment_intents`, `payments.refunds` and `payments.webhook_events`.
 *
 * - `POST /v1/payment-intents` (`Idempotency-Key`, `{ amount_cents, reference, description? }`):
 *   201 `{ id, status: 'requires_payment', amount_cents, reference }`, once per key: the same key
 *   and body get the stored answer again (`Idempotent-Replayed: true`); 422 `idempotency_key_reused`
 *   for the key with another body; 409 `idempotency_key_in_use` (with `Retry-After`) while a request
 *   with the key is processed; 409 `idempotency_key_voided` when a cancellation voided the key
 *   before any intent was created with it; 400 for a bad request.
 * - `POST /v1/payment-intents/:id/pay` (`{ card }`, the buyer paying; no key needed, as paying a
 *   paid intent charges nothing more): 200 `{ id, status: 'succeeded', … }`, now or before; 402
 *   `card_declined` (card 4000000000000002; the intent can be paid with another card); 409
 *   `payment_intent_canceled` / `payment_intent_refunded`; 404 `payment_intent_not_found`.
 * - `POST /v1/cancellations` (`Idempotency-Key`, `{ creation_key }`): settles the payment of the
 *   intent created with `creation_key`, whatever its state, so a buyer is never charged for a sale
 *   that was undone. 200 `voided` (no intent was created with the key, and now none ever will be),
 *   `canceled` (it was not paid: it cannot be any more), `refunded` (it was paid: refunded, with
 *   `refund`); 409 `creation_in_progress` (with `Retry-After`) while a creation with `creation_key`
 *   is still being processed: ask again, it is answered once the creation has settled. That is the
 *   rule a saga's compensation needs: it cannot know whether its step's last attempt got through.
 * - `POST /v1/refunds` (`Idempotency-Key`, `{ payment_intent }`): refunds a paid intent in full,
 *   once per intent: 201 `{ id, payment_intent, amount_cents, status: 'succeeded' }`; 200 with the
 *   refund made before (by another key, or a cancellation); 409 `payment_intent_not_paid`; 404.
 * - `GET /v1/payment-intents?reference=…` (oldest first), `GET /v1/payment-intents/:id`, `GET /livez`.
 *
 * Every keyed `POST` runs in one transaction that stores its answer with its effect, holding a lock
 * on its idempotency key for the whole of it (a key "in progress" is a key locked, never a row: a
 * crash cannot leave one stuck). A refusal (404, 409 `payment_intent_not_paid`) is stored too, so
 * every retry with the key gets it.
 *
 * The webhook: when an intent is paid, the event `payment_intent.succeeded` is written in the
 * payment's transaction (`payments.webhook_events`, an outbox) and POSTed to the app after commit,
 * in the background, signed, until the app answers 2xx (see webhooks.ts). A server that starts
 * resumes the deliveries still pending, so a restart loses none. Delivery is at least once: the
 * receiver recognises an event it had by its `id`. Apply PAYMENTS_SCHEMA_SQL before `listen`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type pg from 'pg';
import { z } from 'zod';
import { webhookDeliveries, type Delivery, type DeliveryHooks, type PaymentEvent, type WebhookOptions } from './webhooks';

export type { PaymentEvent } from './webhooks';

/** The card the service declines (402 `card_declined`). */
export const DECLINED_CARD = '4000000000000002';

const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;
const creationBody = z
  .object({
    amount_cents: z.number().int().positive().max(100_000_000),
    reference: z.string().min(1).max(200),
    description: z.string().max(200).optional(),
  })
  .strict();
const payBody = z.object({ card: z.string().regex(/^\d{12,19}$/, 'must be 12 to 19 digits') }).strict();
const cancellationBody = z.object({ creation_key: z.string().regex(IDEMPOTENCY_KEY, 'must be 1 to 255 printable ASCII characters') }).strict();
const refundBody = z.object({ payment_intent: z.string().min(1).max(100) }).strict();
const listQuery = z.object({ reference: z.string().min(1, 'is required').max(200) });

/** The body of `POST /v1/payment-intents`. */
export type PaymentIntentBody = z.infer<typeof creationBody>;

export type PaymentIntentStatus = 'requires_payment' | 'succeeded' | 'canceled' | 'refunded';

/** The service's tables (schema `payments`). Idempotent; concurrent runs wait for each other. */
export const PAYMENTS_SCHEMA_SQL = `
  SELECT pg_advisory_xact_lock(hashtextextended('payments schema', 0));
  CREATE SCHEMA IF NOT EXISTS payments;
  CREATE TABLE IF NOT EXISTS payments.idempotency_keys (
    key             text        PRIMARY KEY,
    operation       text        NOT NULL CHECK (operation IN ('create', 'cancel', 'refund')),
    state           text        NOT NULL CHECK (state IN ('done', 'voided')),
    request_hash    text,
    response_status integer,
    response_body   text,
    voided_by       text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE TABLE IF NOT EXISTS payments.payment_intents (
    id           text        PRIMARY KEY,
    creation_key text        NOT NULL UNIQUE,
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    reference    text        NOT NULL,
    description  text,
    status       text        NOT NULL CHECK (status IN ('requires_payment', 'succeeded', 'canceled', 'refunded')),
    card_last4   text        CHECK (card_last4 ~ '^[0-9]{4}$'),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    paid_at      timestamptz,
    canceled_at  timestamptz
  );
  CREATE INDEX IF NOT EXISTS payment_intents_reference_idx ON payments.payment_intents (reference, created_at);
  CREATE TABLE IF NOT EXISTS payments.refunds (
    id             text        PRIMARY KEY,
    payment_intent text        NOT NULL UNIQUE REFERENCES payments.payment_intents (id),
    amount_cents   bigint      NOT NULL CHECK (amount_cents > 0),
    created_by     text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE TABLE IF NOT EXISTS payments.webhook_events (
    id             text        PRIMARY KEY,
    payment_intent text        NOT NULL REFERENCES payments.payment_intents (id),
    body           text        NOT NULL,
    status         text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts       integer     NOT NULL DEFAULT 0,
    last_status    integer,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_at   timestamptz
  );
  CREATE INDEX IF NOT EXISTS webhook_events_pending_idx ON payments.webhook_events (created_at) WHERE status = 'pending';`;

/** Options of the payment service's server. */
export interface PaymentServerOptions {
  /** The database holding schema `payments` (PAYMENTS_SCHEMA_SQL). Not ended by the server. */
  pool: pg.Pool;
  /** Where to POST the events, signed with `secret`; `attempts` per event (@default 10). No webhook: events are stored, not sent. */
  webhook?: WebhookOptions;
  /**
   * How long the first processing of a creation takes, inside its transaction, holding its key (a
   * slow service: its answer comes late, or after the caller gave up). @default 0
   */
  createDelayMs?: number | ((body: PaymentIntentBody) => number);
  /** One line per request outcome and per webhook attempt. Card numbers are never in it. @default no logging */
  log?: (line: string) => void;
  /** Test hooks. */
  hooks?: DeliveryHooks & {
    /** A first processing of a creation began (the key is locked; the delay, if any, starts now). */
    creationStarted?(idempotencyKey: string, body: PaymentIntentBody): void;
  };
}

interface Outcome {
  status: number;
  body: string;
  replayed?: boolean;
  retryAfterSeconds?: number;
  log: string;
}

type Operation = 'create' | 'cancel' | 'refund';

interface KeyRecord {
  operation: Operation;
  state: 'done' | 'voided';
  request_hash: string | null;
  response_status: number | null;
  response_body: string | null;
}

interface IntentRow {
  id: string;
  status: PaymentIntentStatus;
  amount_cents: string;
  reference: string;
  description: string | null;
  card_last4: string | null;
  created_at: Date;
  paid_at: Date | null;
  canceled_at: Date | null;
  refund: string | null;
}

const INTENT_SELECT = `SELECT i.id, i.status, i.amount_cents, i.reference, i.description, i.card_last4, i.created_at, i.paid_at, i.canceled_at, r.id AS refund
  FROM payments.payment_intents i LEFT JOIN payments.refunds r ON r.payment_intent = i.id`;

/** The payment service's server, ready to `listen`. */
export function createPaymentServer(options: PaymentServerOptions): FastifyInstance {
  const { pool } = options;
  const log = options.log ?? (() => {});
  const delayOf = (body: PaymentIntentBody) => (typeof options.createDelayMs === 'function' ? options.createDelayMs(body) : (options.createDelayMs ?? 0));
  const deliveries = webhookDeliveries(pool, options.webhook, log, options.hooks);
  const app = Fastify({ bodyLimit: 16 * 1024, logger: false });
  app.addHook('onReady', () => deliveries.resume());
  app.addHook('onClose', () => deliveries.stop());

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return sendProblem(reply, status, 'invalid_request', `the request was refused (${error.code ?? 'client error'})`);
    log(`payments: ${request.method} ${request.url} failed: ${error.message}`);
    return sendProblem(reply, 500, 'internal_error', 'the payment service failed; see its log');
  });

  app.post('/v1/payment-intents', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (key === undefined) return badKey(reply);
    const parsed = creationBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const body = parsed.data;
    const hash = requestHash(['create', body]);

    const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
      if (!(await tryLock(tx, key))) return inUse(`creation in flight (key ${key})`, 'idempotency_key_in_use', 'another request with this key is being processed');
      const record = await readRecord(tx, key);
      if (record) return answerFromRecord('create', key, record, hash);

      options.hooks?.creationStarted?.(key, body);
      await processingDelay(tx, delayOf(body));
      const id = `pi_${randomId()}`;
      await tx.query(
        `INSERT INTO payments.payment_intents (id, creation_key, amount_cents, reference, description, status) VALUES ($1, $2, $3, $4, $5, 'requires_payment')`,
        [id, key, body.amount_cents, body.reference, body.description ?? null],
      );
      const answer = { id, status: 'requires_payment', amount_cents: body.amount_cents, reference: body.reference };
      return store(tx, key, 'create', hash, 201, JSON.stringify(answer), `payments: created ${id} for ${body.amount_cents} cents, reference ${body.reference} (key ${key})`);
    });
    return send(reply, outcome);
  });

  app.post<{ Params: { id: string } }>('/v1/payment-intents/:id/pay', async (request, reply) => {
    const parsed = payBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const { card } = parsed.data;
    const id = request.params.id;
    const card4 = `card ending ${card.slice(-4)}`;

    const { outcome, delivery } = await inTransaction(pool, async (tx): Promise<{ outcome: Outcome; delivery?: Delivery }> => {
      // The row's lock orders the payment with any cancellation or refund of the intent.
      const intent = await lockIntent(tx, 'id', id);
      if (intent === undefined) return { outcome: refusal(404, 'payment_intent_not_found', `there is no payment intent ${id}`) };
      if (intent.status === 'canceled' || intent.status === 'refunded') {
        return { outcome: refusal(409, `payment_intent_${intent.status}`, `payment intent ${id} is ${intent.status}: it cannot be paid`) };
      }
      if (intent.status === 'succeeded') return { outcome: { status: 200, body: JSON.stringify(summary(intent)), log: `payments: ${id} already paid; ${card4} not charged` } };
      if (card === DECLINED_CARD) return { outcome: refusal(402, 'card_declined', 'the card was declined; pay with another card', `payments: ${card4} declined for ${id}`) };

      await tx.query(`UPDATE payments.payment_intents SET status = 'succeeded', card_last4 = $2, paid_at = clock_timestamp() WHERE id = $1`, [id, card.slice(-4)]);
      const event: PaymentEvent = { id: `evt_${randomId()}`, type: 'payment_intent.succeeded', payment_intent: id, reference: intent.reference, amount_cents: Number(intent.amount_cents) };
      const body = JSON.stringify(event);
      await tx.query('INSERT INTO payments.webhook_events (id, payment_intent, body) VALUES ($1, $2, $3)', [event.id, id, body]);
      const paid = { ...intent, status: 'succeeded' as const };
      return { outcome: { status: 200, body: JSON.stringify(summary(paid)), log: `payments: ${id} paid, ${intent.amount_cents} cents by ${card4} (event ${event.id})` }, delivery: { event, body, attempts: 0 } };
    });
    // Committed: the event is sent now, in the background; the buyer does not wait for the app.
    if (delivery) deliveries.schedule(delivery, 0);
    return send(reply, outcome);
  });

  app.post('/v1/cancellations', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (key === undefined) return badKey(reply);
    const parsed = cancellationBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const creationKey = parsed.data.creation_key;
    if (creationKey === key) return sendProblem(reply, 400, 'invalid_request', "creation_key: must differ from the cancellation's own Idempotency-Key");
    const hash = requestHash(['cancel', creationKey]);

    const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
      if (!(await tryLock(tx, key))) return inUse(`cancellation in flight (key ${key})`, 'idempotency_key_in_use', 'another request with this key is being processed');
      const record = await readRecord(tx, key);
      if (record) return answerFromRecord('cancel', key, record, hash);
      /*
       * Ordered after every attempt of the creation: a creation holds its key's lock for the whole
       * of its transaction, so while one is processed the cancellation is answered 409 (ask again),
       * and once the lock is ours no creation with the key is in flight. A cancellation that finds
       * no creation voids the key under that lock: one arriving later (a delayed retry) is refused.
       */
      if (!(await tryLock(tx, creationKey))) {
        return inUse(`cancellation waits: the creation is still being processed (key ${key}, creation key ${creationKey})`, 'creation_in_progress', 'a creation with creation_key is still being processed; ask again');
      }
      const where = `(key ${key}, creation key ${creationKey})`;
      const target = await readRecord(tx, creationKey);
      if (target !== undefined && target.operation !== 'create') {
        return refusal(400, 'invalid_request', `creation_key names a ${target.operation}, not a creation`, `payments: cancellation refused: creation_key names a ${target.operation} ${where}`);
      }
      if (target === undefined || target.state === 'voided') {
        if (target === undefined) await tx.query(`INSERT INTO payments.idempotency_keys (key, operation, state, voided_by) VALUES ($1, 'create', 'voided', $2)`, [creationKey, key]);
        return store(tx, key, 'cancel', hash, 200, JSON.stringify({ status: 'voided', payment_intent: null }), `payments: cancellation voided the creation key: no intent was created with it, and none will be ${where}`);
      }
      const intent = await lockIntent(tx, 'creation_key', creationKey);
      if (intent === undefined) throw new Error(`the creation with key ${creationKey} was answered, but it has no payment intent`);
      if (intent.status === 'requires_payment') {
        await tx.query(`UPDATE payments.payment_intents SET status = 'canceled', canceled_at = clock_timestamp() WHERE id = $1`, [intent.id]);
      }
      if (intent.status === 'requires_payment' || intent.status === 'canceled') {
        return store(tx, key, 'cancel', hash, 200, JSON.stringify({ status: 'canceled', payment_intent: intent.id }), `payments: canceled ${intent.id} ${where}`);
      }
      const refund = intent.refund ?? (await refundIntent(tx, intent, key));
      return store(tx, key, 'cancel', hash, 200, JSON.stringify({ status: 'refunded', payment_intent: intent.id, refund }), `payments: cancellation refunded ${intent.id} (${refund}) ${where}`);
    });
    return send(reply, outcome);
  });

  app.post('/v1/refunds', async (request, reply) => {
    const key = idempotencyKeyOf(request);
    if (key === undefined) return badKey(reply);
    const parsed = refundBody.safeParse(request.body);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const id = parsed.data.payment_intent;
    const hash = requestHash(['refund', id]);

    const outcome = await inTransaction(pool, async (tx): Promise<Outcome> => {
      if (!(await tryLock(tx, key))) return inUse(`refund in flight (key ${key})`, 'idempotency_key_in_use', 'another request with this key is being processed');
      const record = await readRecord(tx, key);
      if (record) return answerFromRecord('refund', key, record, hash);
      const intent = await lockIntent(tx, 'id', id);
      const refused = (status: number, code: string, detail: string) => store(tx, key, 'refund', hash, status, problem(status, code, detail), `payments: refund refused: ${code} (${id}, key ${key})`);
      if (intent === undefined) return refused(404, 'payment_intent_not_found', `there is no payment intent ${id}`);
      if (intent.status === 'requires_payment' || intent.status === 'canceled') return refused(409, 'payment_intent_not_paid', `payment intent ${id} is ${intent.status}: there is nothing to refund`);
      const made = intent.refund === null;
      const refund = intent.refund ?? (await refundIntent(tx, intent, key));
      const answer = { id: refund, payment_intent: id, amount_cents: Number(intent.amount_cents), status: 'succeeded' };
      return store(tx, key, 'refund', hash, made ? 201 : 200, JSON.stringify(answer), `payments: ${made ? 'refunded' : 'already refunded'} ${id} (${refund}, key ${key})`);
    });
    return send(reply, outcome);
  });

  app.get('/v1/payment-intents', async (request, reply) => {
    const parsed = listQuery.safeParse(request.query);
    if (!parsed.success) return sendProblem(reply, 400, 'invalid_request', describe(parsed.error));
    const { rows } = await pool.query<IntentRow>(`${INTENT_SELECT} WHERE i.reference = $1 ORDER BY i.created_at, i.id LIMIT 1000`, [parsed.data.reference]);
    return reply.send({ data: rows.map((i) => ({ ...summary(i), refunded: i.refund !== null })) });
  });

  app.get<{ Params: { id: string } }>('/v1/payment-intents/:id', async (request, reply) => {
    const { rows } = await pool.query<IntentRow>(`${INTENT_SELECT} WHERE i.id = $1`, [request.params.id]);
    const i = rows[0];
    if (i === undefined) return sendProblem(reply, 404, 'payment_intent_not_found', `there is no payment intent ${request.params.id}`);
    const { description, card_last4, refund, created_at, paid_at, canceled_at } = i;
    return reply.send({ ...summary(i), refunded: refund !== null, description, card_last4, refund, created_at, paid_at, canceled_at });
  });

  app.get('/livez', async () => ({ status: 'ok' }));

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
async function tryLock(tx: pg.PoolClient, key: string): Promise<boolean> {
  const { rows } = await tx.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('payments:' || $1, 0)) AS locked`, [key]);
  return rows[0]!.locked;
}

async function readRecord(tx: pg.PoolClient, key: string): Promise<KeyRecord | undefined> {
  const { rows } = await tx.query<KeyRecord>('SELECT operation, state, request_hash, response_status, response_body FROM payments.idempotency_keys WHERE key = $1', [key]);
  return rows[0];
}

/** The intent (with its refund), its row locked until the transaction ends. */
async function lockIntent(tx: pg.PoolClient, by: 'id' | 'creation_key', value: string): Promise<IntentRow | undefined> {
  const { rows } = await tx.query<IntentRow>(`${INTENT_SELECT} WHERE i.${by} = $1 FOR UPDATE OF i`, [value]);
  return rows[0];
}

/** Refunds a paid intent in full (its row locked, no refund yet); the refund's id. */
async function refundIntent(tx: pg.PoolClient, intent: IntentRow, idempotencyKey: string): Promise<string> {
  const id = `re_${randomId()}`;
  await tx.query('INSERT INTO payments.refunds (id, payment_intent, amount_cents, created_by) VALUES ($1, $2, $3, $4)', [id, intent.id, intent.amount_cents, idempotencyKey]);
  await tx.query(`UPDATE payments.payment_intents SET status = 'refunded' WHERE id = $1`, [intent.id]);
  return id;
}

function answerFromRecord(op: Operation, key: string, record: KeyRecord, hash: string): Outcome {
  if (record.state === 'voided') {
    return refusal(409, 'idempotency_key_voided', 'a cancellation voided this key before any payment intent was created with it', `payments: ${op} refused: key voided (key ${key})`);
  }
  if (record.operation !== op || record.request_hash !== hash) {
    return refusal(422, 'idempotency_key_reused', 'this key was used with another request', `payments: ${op} refused: key reused (key ${key})`);
  }
  return { status: record.response_status!, body: record.response_body!, replayed: true, log: `payments: ${op} replayed ${record.response_status} (key ${key})` };
}

function inUse(log: string, code: string, detail: string): Outcome {
  return { status: 409, body: problem(409, code, detail), retryAfterSeconds: 1, log: `payments: ${log}` };
}

function refusal(status: number, code: string, detail: string, log = `payments: refused ${status} ${code}: ${detail}`): Outcome {
  return { status, body: problem(status, code, detail), log };
}

async function store(tx: pg.PoolClient, key: string, op: Operation, hash: string, status: number, body: string, log: string): Promise<Outcome> {
  await tx.query(
    `INSERT INTO payments.idempotency_keys (key, operation, state, request_hash, response_status, response_body) VALUES ($1, $2, 'done', $3, $4, $5)`,
    [key, op, hash, status, body],
  );
  return { status, body, log };
}

function summary(intent: IntentRow): { id: string; status: PaymentIntentStatus; amount_cents: number; reference: string } {
  return { id: intent.id, status: intent.status, amount_cents: Number(intent.amount_cents), reference: intent.reference };
}

/** Waits inside the transaction with statements, so PostgreSQL's idle-in-transaction timeout does not end it. */
async function processingDelay(tx: pg.PoolClient, ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= 500) await tx.query('SELECT pg_sleep($1)', [Math.min(left, 500) / 1000]);
}

/** A digest of a request (no card numbers in the keyed requests, so an unkeyed hash serves). */
function requestHash(parts: unknown): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

function randomId(): string {
  return randomBytes(12).toString('hex');
}

function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  return typeof value === 'string' && IDEMPOTENCY_KEY.test(value) ? value : undefined;
}

function badKey(reply: FastifyReply): FastifyReply {
  return sendProblem(reply, 400, 'invalid_request', 'the Idempotency-Key header must be 1 to 255 printable ASCII characters');
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
