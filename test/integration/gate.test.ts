/**
 * The gate in front of Temporal: DUPLICATE and CONFLICT answered from Redis with no workflow started,
 * SUCCESS answered with one start call, retries of one idempotency key answered from its saga, and
 * sagas started by plain Temporal clients. Most tests run with no worker at all, as a fleet that is
 * down or busy would leave the gate; a worker is started only to take a saga to its end.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { Pool } from 'pg';
import { Client, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { WorkerOptions } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createSagaActivities } from '../../src/activities/saga';
import { SagaClient, type StartedSaga } from '../../src/client';
import { EncryptionCodec, createCodecServer } from '../../src/codec';
import { requireCodecKeys, type Config } from '../../src/config';
import { type FencedTable } from '../../src/db';
import { createPool } from '../../src/db/pool';
import { reserveIntent, type GateAnswer } from '../../src/gate';
import { Rms, RmsUnavailableError, intentKeys, sessionTag } from '../../src/rms';
import { createRedis } from '../../src/rms/connection';
import { sagaSessionId, unkeyedRequestHash } from '../../src/sagas';
import { INTENT_KEY, SAGA_PHASE, SAGA_TYPE, sagaWorkflowId, type ReservationAnswer, type SagaMemo, type SagaPlan } from '../../src/shared';
import { activityFailures, eventually, order, startHarness, withWorker as runWorker, type SagaHarness } from '../helpers/saga-harness';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { readableHistory } from '../../scripts/demo/temporal-cli';
import { ordersTable, DECLINED_CARD, sagaTypesFor } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('gate', { worker: false });
});
afterAll(async () => {
  await h?.stop();
});

/** Whether a workflow with this id exists (running or closed). */
/** A worker of the order types under `config` (the harness's), until `fn` resolves. */
function withWorker<T>(fn: () => Promise<T>, config: Config = h.config, workerOptions?: Partial<WorkerOptions>): Promise<T> {
  return runWorker({ config, sagas: sagaTypesFor(config, h.providerUrl), ...(workerOptions ? { workerOptions } : {}) }, fn);
}

async function exists(workflowId: string): Promise<boolean> {
  try {
    await h.client.temporal.workflow.getHandle(workflowId).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** What SagaClient is built from in these tests: the harness's connections. */
const clientOptions = () => ({
  client: h.client.temporal,
  rms: h.rms,
  pool: h.pool,
  taskQueue: h.config.temporal.taskQueue,
  uiUrl: '',
  timings: { ...h.config.saga, compensationAttempts: 2 },
  types: h.types,
  intentSecret: TEST_INTENT_SECRET,
});

const intentOf = (data: unknown) => h.client.prepare('order', data).intentKey;
const sessionOf = (workflowId: string) => sagaSessionId(h.config.temporal.namespace, workflowId);
const tokenOf = (answer: ReservationAnswer) => (answer.status === 'SUCCESS' ? answer.fencingToken : undefined);
const tokenOfGate = (answer: GateAnswer) => (answer.status === 'SUCCESS' ? answer.fencingToken : undefined);

/** Redis loses every key of `intent` (a restart, a flush). */
async function forget(intent: string): Promise<void> {
  const { processing, entityExists } = intentKeys(h.config.redis.keyPrefix, intent);
  await h.redis.del(processing, entityExists);
}

/** Another saga's entity: reserved and finalised under a session that is not any key's. */
async function createdElsewhere(intent: string): Promise<void> {
  const held = await h.rms.reserve({ intent, sessionId: 'another-saga', leaseMs: 60_000 });
  if (held.status !== 'SUCCESS') throw new Error(`could not arrange the entity: ${held.status}`);
  await h.rms.finalize({ intent, sessionId: 'another-saga', fencingToken: held.fencingToken });
}

/** A new cart under a new key of `label`: what the client makes of it, and its saga's workflow id. */
function aRequest(label: string) {
  const cart = order();
  const key = `${label}-${randomUUID()}`;
  return { cart, key, input: h.client.prepare('order', cart, key), workflowId: sagaWorkflowId('order', key) };
}

/**
 * A saga as a describe shows it, with no worker to move it on: a plain start of its workflow id with
 * the memo and search attributes it would have. Terminate it when done.
 */
async function sagaAsDescribed(workflowId: string, saga: { memo: SagaMemo; phase: string; intentKey: string }): Promise<{ terminate: () => Promise<void> }> {
  await h.client.temporal.workflow.start('reservationSaga', {
    workflowId,
    taskQueue: `${h.config.temporal.taskQueue}-nobody`,
    args: [],
    memo: { ...saga.memo },
    typedSearchAttributes: [
      { key: SAGA_TYPE, value: 'order' },
      { key: SAGA_PHASE, value: saga.phase },
      { key: INTENT_KEY, value: saga.intentKey },
    ],
  });
  return { terminate: () => h.client.temporal.workflow.getHandle(workflowId).terminate('test over').then(() => undefined) };
}

describe('the gate', () => {
  it('answers DUPLICATE, CONFLICT and SUCCESS with every worker stopped; only SUCCESS starts a workflow, which then waits for a worker', async () => {
    const [duplicateCart, conflictCart, newCart] = [order(), order(), order()];
    await createdElsewhere(intentOf(duplicateCart));
    await h.rms.reserve({ intent: intentOf(conflictCart), sessionId: 'another-saga', leaseMs: 60_000 });
    const client = h.newClient();

    const [duplicate, conflict, success] = await Promise.all([
      client.start('order', duplicateCart),
      client.start('order', conflictCart),
      client.start('order', newCart),
    ]);

    expect(duplicate).toMatchObject({ reservation: { status: 'DUPLICATE' }, started: false });
    expect(conflict).toMatchObject({ reservation: { status: 'CONFLICT', retryAfterMs: expect.any(Number) }, started: false });
    expect(conflict.reservation.status === 'CONFLICT' && conflict.reservation.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(success).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true, runId: expect.any(String), url: expect.any(String) });
    expect([duplicate.runId, duplicate.url, conflict.runId, conflict.url]).toEqual([undefined, undefined, undefined, undefined]);
    expect(await exists(duplicate.workflowId)).toBe(false);
    expect(await exists(conflict.workflowId)).toBe(false);
    expect(client.gateCounts).toEqual({ SUCCESS: 1, DUPLICATE: 1, CONFLICT: 1 });
    // The answer's lease is in Redis, held by the saga's own session, while the saga waits for a worker.
    const handle = h.client.temporal.workflow.getHandle(success.workflowId);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect((await h.rms.inspect(success.intentKey)).holder).toMatchObject({
      sessionId: sessionOf(success.workflowId),
      fencingToken: tokenOf(success.reservation),
    });

    const final = await withWorker(() => h.client.result(success.workflowId));

    expect(final).toMatchObject({ outcome: 'COMPLETED', fencingToken: tokenOf(success.reservation), errors: [] });
  });

  it('gives exactly one of 200 concurrent different requests for one intent SUCCESS, and starts exactly one workflow', async () => {
    const cart = order();
    const keys = Array.from({ length: 200 }, () => `conc-${randomUUID()}`);
    // Twenty clients, so requests also race across clients.
    const clients = Array.from({ length: 20 }, () => h.newClient({ leaseMs: 60_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 10_000 }));

    const answers = await Promise.all(keys.map((key, i) => clients[i % 20]!.start('order', cart, { idempotencyKey: key })));

    const successes = answers.filter((a) => a.reservation.status === 'SUCCESS');
    expect(successes).toHaveLength(1);
    expect(answers.filter((a) => a.started)).toEqual(successes);
    for (const a of answers) expect(['SUCCESS', 'CONFLICT', 'DUPLICATE']).toContain(a.reservation.status);
    const started = await Promise.all(answers.map((a) => exists(a.workflowId)));
    expect(started.filter(Boolean)).toHaveLength(1);
    await withWorker(() => h.client.result(successes[0]!.workflowId));
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM orders WHERE intent_key = $1', [successes[0]!.intentKey]);
    expect(rows[0]).toEqual({ n: 1 });
  });

  it('gives a key retried after CONFLICT a fresh answer: nothing of the first answer remains', async () => {
    const cart = order();
    const intent = intentOf(cart);
    const holder = await h.rms.reserve({ intent, sessionId: 'another-saga', leaseMs: 60_000 });
    const key = `after-conflict-${randomUUID()}`;

    const first = await h.client.start('order', cart, { idempotencyKey: key });
    if (holder.status === 'SUCCESS') await h.rms.release({ intent, sessionId: 'another-saga', fencingToken: holder.fencingToken });
    const second = await h.client.start('order', cart, { idempotencyKey: key });

    expect(first.reservation.status).toBe('CONFLICT');
    expect(second).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true });
    expect((await withWorker(() => h.client.result(second.workflowId))).outcome).toBe('COMPLETED');
  });

  it('loses nothing when the client dies between reserve and start: a retry with the same key takes the same lease and starts the saga', async () => {
    const cart = order();
    const key = `crash-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    // What the dead client did: the gate's reservation for the key's session, and no start call.
    const orphan = await reserveIntent(h, { table: ordersTable, intentKey: intentOf(cart), sessionId: sessionOf(workflowId), leaseMs: 60_000 });
    expect(orphan.status).toBe('SUCCESS');

    const other = await h.client.start('order', cart);
    const retry = await h.client.start('order', cart, { idempotencyKey: key });

    expect(other.reservation.status).toBe('CONFLICT');
    expect(retry).toMatchObject({ workflowId, started: true, reservation: { status: 'SUCCESS', fencingToken: tokenOfGate(orphan) } });
    const final = await withWorker(() => h.client.result(workflowId));
    expect(final).toMatchObject({ outcome: 'COMPLETED', fencingToken: tokenOfGate(orphan) });
  });

  it('lets the lease of a client that died between reserve and start expire; then the retry succeeds with a higher token', async () => {
    const cart = order();
    const key = `crash-expired-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    const orphan = await reserveIntent(h, { table: ordersTable, intentKey: intentOf(cart), sessionId: sessionOf(workflowId), leaseMs: 300 });
    await eventually(() => h.rms.inspect(intentOf(cart)), (i) => i.holder === undefined, 'the orphaned lease to expire');

    const retry = await h.client.start('order', cart, { idempotencyKey: key });

    expect(retry.reservation.status).toBe('SUCCESS');
    expect(BigInt(tokenOf(retry.reservation)!)).toBeGreaterThan(BigInt(tokenOfGate(orphan)!));
    expect((await withWorker(() => h.client.result(workflowId))).outcome).toBe('COMPLETED');
  });

  it('answers DUPLICATE from PostgreSQL when Redis lost the marker, starts nothing, and repairs the marker with its owner', async () => {
    const cart = order();
    const first = await h.client.start('order', cart);
    const done = await withWorker(() => h.client.result(first.workflowId));
    await forget(first.intentKey);

    const second = await h.client.start('order', cart);

    expect(second).toMatchObject({ reservation: { status: 'DUPLICATE' }, started: false });
    expect(await exists(second.workflowId)).toBe(false);
    const rms = await h.rms.inspect(first.intentKey);
    expect(rms).toMatchObject({ exists: true, existsToken: done.fencingToken, existsSessionTag: sessionTag(sessionOf(first.workflowId)) });
    expect(rms.holder).toBeUndefined();
    // The first request's own retry is told its saga's answer, not DUPLICATE.
    await forget(first.intentKey);
    const retry = await h.client.start('order', cart, { idempotencyKey: first.idempotencyKey });
    expect(retry).toEqual({ ...first, outcome: 'COMPLETED', replayed: true });
    expect((await h.rms.inspect(first.intentKey)).holder).toBeUndefined();
  });

  it('keeps its SUCCESS when the entity the truth check found is undone and freed before the repair: no marker comes back', async () => {
    // Saga A's order is REGISTERED in PostgreSQL, and Redis has lost its marker (a restart, a flush).
    const intent = intentOf(order());
    const a = await h.rms.reserve({ intent, sessionId: 'saga-a', leaseMs: 60_000 });
    if (a.status !== 'SUCCESS') throw new Error(`could not arrange saga A: ${a.status}`);
    const owner = { intentKey: intent, fencingToken: a.fencingToken };
    await ordersTable.writeFenced(h.pool, { ...owner, sessionId: 'saga-a', data: { customer: 'a', items: [], amount_cents: 0, payment_key: null } });
    await ordersTable.markRegistered(h.pool, owner);
    await h.rms.release({ intent, sessionId: 'saga-a', fencingToken: a.fencingToken });
    // The truth check reads A's row; A's compensation (row COMPENSATED, then free) lands before the repair.
    const racing: FencedTable = Object.assign(Object.create(ordersTable) as FencedTable, {
      findWithEnded: async (pool: Pool, key: string) => {
        const found = await ordersTable.findWithEnded(pool, key);
        await ordersTable.markCompensated(h.pool, owner);
        await h.rms.free({ intent, fencingToken: a.fencingToken });
        return found;
      },
    });

    const answer = await reserveIntent(h, { table: racing, intentKey: intent, sessionId: 'saga-b', leaseMs: 60_000 });

    expect(answer.status).toBe('SUCCESS');
    expect(await h.rms.inspect(intent)).toMatchObject({ exists: false, holder: { sessionId: 'saga-b' } });
  });

  it("confirms its gate's token without a second truth check while that lease holds, and checks again once the lease was lost", async () => {
    const intent = intentOf(order());
    let lookups = 0;
    const counting: FencedTable = Object.assign(Object.create(ordersTable) as FencedTable, {
      findWithEnded: async (pool: Pool, key: string) => {
        lookups++;
        return ordersTable.findWithEnded(pool, key);
      },
    });
    const req = { table: counting, intentKey: intent, sessionId: 'saga-a', leaseMs: 60_000 };
    // The gate's SUCCESS, after its truth check.
    const gated = await reserveIntent(h, req);
    if (gated.status !== 'SUCCESS') throw new Error(`the gate answered ${gated.status}`);

    // The saga confirms that token while the lease holds: answered back, nothing read.
    const confirmed = await reserveIntent(h, { ...req, confirms: gated.fencingToken });

    expect(confirmed).toMatchObject({ status: 'SUCCESS', fencingToken: gated.fencingToken, alreadyHeld: true });
    expect(lookups).toBe(1);

    // The lease lost (Redis flushed) and another saga's entity registered meanwhile: the confirmation
    // of the old token takes a new lease, and that one is checked: DUPLICATE, the marker repaired.
    const other = { intentKey: intent, fencingToken: String(BigInt(gated.fencingToken) - 1n) };
    await ordersTable.writeFenced(h.pool, { ...other, sessionId: 'saga-other', data: { customer: 'a', items: [], amount_cents: 0, payment_key: null } });
    await ordersTable.markRegistered(h.pool, other);
    await h.redis.del(intentKeys(h.config.redis.keyPrefix, intent).processing);

    const again = await reserveIntent(h, { ...req, confirms: gated.fencingToken });

    expect(again.status).toBe('DUPLICATE');
    expect(lookups).toBe(2);
    expect(await h.rms.inspect(intent)).toMatchObject({ exists: true, existsToken: other.fencingToken });
    expect((await h.rms.inspect(intent)).holder).toBeUndefined();
  });

  it.each(['COMPENSATED', 'PROCESSING'] as const)(
    'raises a new token above a %s row whose token Redis forgot and the clock has not reached: the saga completes',
    async (status) => {
      // A row written under a token from a clock an hour ahead of this one (a failover to a server
      // whose clock is behind, or a clock stepped back), then Redis lost everything of the intent.
      const cart = order();
      const intent = intentOf(cart);
      const [seconds] = await h.redis.time();
      const ahead = `${Number(seconds) + 3600}000000`;
      const owner = { intentKey: intent, fencingToken: ahead };
      await ordersTable.writeFenced(h.pool, { ...owner, sessionId: 'saga-from-the-future', data: { customer: 'a', items: [], amount_cents: 0, payment_key: null } });
      if (status === 'COMPENSATED') await ordersTable.markCompensated(h.pool, owner);

      const started = await h.client.start('order', cart);
      const done = await withWorker(() => h.client.result(started.workflowId));

      expect(started.reservation.status).toBe('SUCCESS');
      expect(BigInt(tokenOf(started.reservation)!)).toBeGreaterThan(BigInt(ahead));
      expect(done).toMatchObject({ outcome: 'COMPLETED', fencingToken: tokenOf(started.reservation) });
      expect(await ordersTable.find(h.pool, intent)).toMatchObject({ status: 'COMPLETED', lastFencingToken: tokenOf(started.reservation) });
    },
  );

  it('burns nothing when Redis is out of reach: no workflow, and the same key later gets a fresh answer', async () => {
    // No cluster nodes either: the run's Redis may be a cluster (make test-stack).
    const unreachable = createRedis({ ...h.config.redis, url: 'redis://127.0.0.1:1', clusterNodes: undefined, commandTimeoutMs: 300 });
    unreachable.on('error', () => undefined); // the refused connections are this test's point
    const broken = new SagaClient({ ...clientOptions(), rms: new Rms(unreachable, { keyPrefix: h.config.redis.keyPrefix }) });
    const cart = order();
    const key = `redis-down-${randomUUID()}`;

    await expect(broken.start('order', cart, { idempotencyKey: key })).rejects.toBeInstanceOf(RmsUnavailableError);
    unreachable.disconnect();

    expect(await exists(sagaWorkflowId('order', key))).toBe(false);
    const later = await h.client.start('order', cart, { idempotencyKey: key });
    expect(later).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true });
    await withWorker(() => h.client.result(later.workflowId));
  });

  it('leaves the lease to its key when the start call fails: the same key retried later starts the saga with that token', async () => {
    // A task queue name longer than the server accepts: the start call fails at once, as it may with Temporal out of reach.
    const broken = new SagaClient({ ...clientOptions(), taskQueue: 'q'.repeat(2000) });
    const cart = order();
    const key = `start-failed-${randomUUID()}`;

    const failed = await broken.start('order', cart, { idempotencyKey: key }).then(
      () => undefined,
      (err: unknown) => err,
    );
    // A start may land with its reply lost, so the lease is not given back: it belongs to the key.
    const held = (await h.rms.inspect(intentOf(cart))).holder;
    const startedBefore = await exists(sagaWorkflowId('order', key));
    const other = await h.client.start('order', cart);
    const retry = await h.client.start('order', cart, { idempotencyKey: key });

    expect(failed).toBeInstanceOf(Error);
    expect(startedBefore).toBe(false);
    expect(held?.sessionId).toBe(sessionOf(sagaWorkflowId('order', key)));
    expect(other.reservation.status).toBe('CONFLICT');
    expect(retry).toMatchObject({ started: true, reservation: { status: 'SUCCESS', fencingToken: held?.fencingToken } });
    const final = await withWorker(() => h.client.result(retry.workflowId));
    expect(final.outcome, `ended ${final.reason}: ${JSON.stringify(final.errors)}`).toBe('COMPLETED');
  });

  it('gives the lease back when PostgreSQL is out of reach for the truth check, and starts nothing', async () => {
    const unreachable = createPool({ ...h.config.db, url: 'postgres://postgres@127.0.0.1:1/none', connectTimeoutMs: 300 });
    const broken = new SagaClient({ ...clientOptions(), pool: unreachable });
    const cart = order();

    const failed = await broken.start('order', cart).then(
      () => undefined,
      (err: unknown) => err,
    );
    await unreachable.end();

    expect(failed).toBeInstanceOf(Error);
    expect((failed as Error).message).toMatch(/ECONNREFUSED|connect/);
    expect((await h.rms.inspect(intentOf(cart))).holder).toBeUndefined();
    expect((await h.client.start('order', cart)).reservation.status).toBe('SUCCESS');
  });
});

describe('an intent spelt in two Unicode forms', () => {
  // "Zoë" composed (NFC, U+00EB) and decomposed (NFD, e + U+0308): one customer, one cart.
  const spelt = (form: 'NFC' | 'NFD') => {
    const name = `Zoë ${randomUUID()}`.normalize(form);
    return order({ customer: name, items: [{ sku: 'widget', quantity: 1, priceCents: 700 }] });
  };
  const both = () => {
    const nfc = spelt('NFC');
    return { nfc, nfd: { ...nfc, customer: nfc.customer.normalize('NFD') } };
  };

  it('is one intent: while the NFC order runs, the NFD one is a CONFLICT, starting nothing', async () => {
    const { nfc, nfd } = both();
    expect(nfd.customer).not.toBe(nfc.customer);

    const first = await h.client.start('order', nfc);
    const second = await h.client.start('order', nfd);

    expect(first.reservation.status).toBe('SUCCESS');
    expect(second).toMatchObject({ started: false, reservation: { status: 'CONFLICT' }, intentKey: first.intentKey });
    await withWorker(() => h.client.result(first.workflowId));
    expect((await h.client.start('order', nfd)).reservation.status).toBe('DUPLICATE');
  });

  it('finds an entity created under the key earlier versions gave its NFD text: DUPLICATE from Redis, or from PostgreSQL when Redis forgot', async () => {
    for (const forgotten of [false, true]) {
      const { nfd } = both();
      const { intentKey: key, legacyIntentKey } = h.client.prepare('order', nfd);
      expect(legacyIntentKey).toBeDefined();
      // The entity as an earlier version left it: its row and marker under the NFD text's key.
      await createdElsewhere(legacyIntentKey!);
      await ordersTable.writeFenced(h.pool, { intentKey: legacyIntentKey!, sessionId: 'another-saga', fencingToken: '1', data: { customer: nfd.customer, items: nfd.items, amount_cents: 700, payment_key: null } });
      await ordersTable.markRegistered(h.pool, { intentKey: legacyIntentKey!, fencingToken: '1' });
      if (forgotten) await forget(legacyIntentKey!);

      const answer = await h.client.start('order', nfd);

      expect(answer, forgotten ? 'Redis forgot' : 'Redis knows').toMatchObject({ started: false, reservation: { status: 'DUPLICATE' } });
      expect((await h.rms.inspect(key)).holder).toBeUndefined();
    }
  });

  it('waits for a saga of an earlier version still holding the NFD key: CONFLICT, the new key given back', async () => {
    const { nfd } = both();
    const { intentKey: key, legacyIntentKey } = h.client.prepare('order', nfd);
    await h.rms.reserve({ intent: legacyIntentKey!, sessionId: 'an-earlier-saga', leaseMs: 60_000 });

    const answer = await h.client.start('order', nfd);

    expect(answer).toMatchObject({ started: false, reservation: { status: 'CONFLICT' } });
    expect((await h.rms.inspect(key)).holder).toBeUndefined();
  });
});

describe('a retry with the same idempotency key', () => {
  it('after the saga ended gets its recorded answer and outcome from history, with no worker running', async () => {
    const cart = order();
    const key = `ended-${randomUUID()}`;
    const first = await h.client.start('order', cart, { idempotencyKey: key });
    await withWorker(() => h.client.result(first.workflowId));

    const again = await h.client.start('order', cart, { idempotencyKey: key });
    const status = await h.client.status(first.workflowId);

    expect(again).toEqual({ ...first, outcome: 'COMPLETED', replayed: true });
    // The id its type's operations take (order-cancel's order), read from history.
    expect(status).toMatchObject({ status: 'COMPLETED', state: { outcome: 'COMPLETED', phase: 'COMPLETED', entityId: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/) } });
  });

  it('after its saga was compensated and freed the intent starts no second saga, and leaves no lease behind', async () => {
    const cart = order({ items: [{ sku: 'rare-coin', quantity: 5, priceCents: 10 }] });
    const key = `freed-${randomUUID()}`;
    const first = await h.client.start('order', cart, { idempotencyKey: key });
    const final = await withWorker(() => h.client.result(first.workflowId));
    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'STEP_REJECTED' });
    expect((await h.rms.inspect(first.intentKey)).exists).toBe(false);

    const again = await h.client.start('order', cart, { idempotencyKey: key });

    expect(again).toEqual({ ...first, outcome: 'COMPENSATED', replayed: true });
    expect((await h.rms.inspect(first.intentKey)).holder).toBeUndefined();
    const { rows } = await h.pool.query('SELECT status FROM orders WHERE intent_key = $1', [first.intentKey]);
    expect(rows).toEqual([{ status: 'COMPENSATED' }]);
  });

  it('while the saga waits for a worker gets the same SUCCESS and token, and another payload is refused without a lease left behind', async () => {
    const cart = order();
    const key = `running-${randomUUID()}`;
    const first = await h.client.start('order', cart, { idempotencyKey: key });
    const otherIntent = order();
    const sameIntentOtherCard = { ...cart, payment: { card: '5555555555554444' } };

    const again = await h.client.start('order', cart, { idempotencyKey: key });
    const otherPayloads = await Promise.allSettled([
      h.client.start('order', otherIntent, { idempotencyKey: key }),
      h.client.start('order', sameIntentOtherCard, { idempotencyKey: key }),
    ]);

    // The same answer, marked as the key's existing saga's; the first call started it.
    expect(first.replayed).toBeUndefined();
    expect(again).toEqual({ ...first, replayed: true });
    for (const settled of otherPayloads) {
      expect(settled).toMatchObject({ status: 'rejected', reason: { name: 'SagaInputError', code: 'IDEMPOTENCY_KEY_REUSED' } });
    }
    expect((await h.rms.inspect(intentOf(otherIntent))).holder).toBeUndefined();
    expect((await h.rms.inspect(first.intentKey)).holder).toMatchObject({ sessionId: sessionOf(first.workflowId), fencingToken: tokenOf(first.reservation) });
    const final = await withWorker(() => h.client.result(first.workflowId));
    expect(final.outcome).toBe('COMPLETED');
    await expect(h.client.start('order', otherIntent, { idempotencyKey: key })).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
  });
  it('answers concurrent requests of one key together: the same payload shares one answer, another is refused, and one saga runs', async () => {
    const cart = order();
    const other = order();
    const key = `together-${randomUUID()}`;
    const asked = [cart, cart, other, cart, cart];

    // All sent before any is answered: the two payloads race for the key.
    const settled = await Promise.allSettled(asked.map((data) => h.client.start('order', data, { idempotencyKey: key })));

    const cartWon = settled[2]!.status === 'rejected';
    const [winners, losers] = [settled.filter((_, i) => (asked[i] === cart) === cartWon), settled.filter((_, i) => (asked[i] === cart) !== cartWon)];
    for (const lost of losers) expect(lost).toMatchObject({ status: 'rejected', reason: { name: 'SagaInputError', code: 'IDEMPOTENCY_KEY_REUSED' } });
    const answers = winners.map((won) => (won.status === 'fulfilled' ? won.value : undefined));
    expect(answers[0]).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true });
    // One answer for the requests of the winning payload, not a first one and replays.
    for (const answer of answers) expect(answer).toEqual(answers[0]);
    expect((await h.rms.inspect(intentOf(cartWon ? other : cart))).holder).toBeUndefined();
    expect((await withWorker(() => h.client.result(answers[0]!.workflowId))).outcome).toBe('COMPLETED');
  });
});

describe('a request that asks to wait for the saga (waitMs)', () => {
  it('while the saga runs gets the outcome and final state the first caller gets, once a worker ends it', async () => {
    const cart = order();
    const key = `waits-${randomUUID()}`;
    const first = await h.client.start('order', cart, { idempotencyKey: key });
    const waiting = h.client.start('order', cart, { idempotencyKey: key, waitMs: 60_000 });

    const [final, waited] = await withWorker(() => Promise.all([h.client.result(first.workflowId), waiting]));

    expect(final).toMatchObject({ outcome: 'COMPLETED', entityId: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/) });
    expect(waited).toEqual({ ...first, replayed: true, outcome: 'COMPLETED', final });
  });

  it('gets the running answer, no outcome, when the saga does not end within the wait, and leaves nothing waiting', async () => {
    const cart = order();
    const key = `waits-in-vain-${randomUUID()}`;
    const first = await h.client.start('order', cart, { idempotencyKey: key, waitMs: 300 });
    const again = await h.client.start('order', cart, { idempotencyKey: key, waitMs: 300 });

    expect(first).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true });
    expect(first.outcome).toBeUndefined();
    expect(again).toEqual({ ...first, replayed: true });
    await withWorker(() => h.client.result(first.workflowId));
  });

  it('gets CONFLICT at once for another key of an intent held: there is no saga of its own to wait for', async () => {
    const cart = order();
    const first = await h.client.start('order', cart, { idempotencyKey: `held-${randomUUID()}` });
    const other = await h.client.start('order', cart, { idempotencyKey: `other-${randomUUID()}`, waitMs: 60_000 });

    expect(other).toMatchObject({ reservation: { status: 'CONFLICT' }, started: false });
    expect(other.final).toBeUndefined();
    await withWorker(() => h.client.result(first.workflowId));
  });

  it.each([-1, 1.5, Number.NaN, 3_600_001])('refuses waitMs %s with a TypeError, before any gate', async (waitMs) => {
    const cart = order();
    await expect(h.client.start('order', cart, { waitMs })).rejects.toThrow(TypeError);
    expect((await h.rms.inspect(intentOf(cart))).holder).toBeUndefined();
  });
});

describe('a retry of a key whose saga recorded a plain SHA-256 of its request (an earlier version)', () => {
  it('is still its request: answered from the saga, not refused as another payload', async () => {
    const { cart, key, input, workflowId } = aRequest('unkeyed');
    const recorded: ReservationAnswer = { status: 'SUCCESS', fencingToken: '1', expiresAt: Date.now() };
    // The memo such a saga carries (its plain hash).
    const saga = await sagaAsDescribed(workflowId, { memo: { requestHash: unkeyedRequestHash(input), reservation: recorded }, phase: 'RUNNING_STEPS', intentKey: input.intentKey });
    try {
      expect(input.requestHash).not.toBe(unkeyedRequestHash(input));

      const again = await h.client.start('order', cart, { idempotencyKey: key });
      const other = h.client.start('order', order(), { idempotencyKey: key });

      expect(again).toMatchObject({ reservation: recorded, started: true, replayed: true });
      await expect(other).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    } finally {
      await saga.terminate();
    }
  });
});

describe('a retry of a key whose saga adopted the lease the retry took', () => {
  it('keeps it: the lease is the saga\'s own, as when another caller of the key started the saga with it', async () => {
    const { cart, key, input, workflowId } = aRequest('adopted');
    // The next lease of the intent gets a token known in advance: one above a tombstone's.
    const floor = '9000000000000000';
    const token = '9000000000000001';
    await h.redis.set(intentKeys(h.config.redis.keyPrefix, input.intentKey).entityExists, `{freed}:${floor}`, 'PX', 60_000);
    // Twenty callers of one key: one took the lease fresh, another started the saga with it, and the
    // saga reserved (the same session: the same lease and token) and went on writing, all before the
    // first caller's start found the workflow.
    const reservation: ReservationAnswer = { status: 'SUCCESS', fencingToken: token, expiresAt: Date.now() + 30_000 };
    const saga = await sagaAsDescribed(workflowId, { memo: { requestHash: input.requestHash, reservation }, phase: 'WRITING', intentKey: input.intentKey });
    try {
      const first = await h.client.start('order', cart, { idempotencyKey: key });

      expect(first).toMatchObject({ replayed: true, reservation: { fencingToken: token } });
      expect((await h.rms.inspect(input.intentKey)).holder).toMatchObject({ sessionId: sessionOf(workflowId), fencingToken: token });
    } finally {
      await saga.terminate();
      await h.rms.release({ intent: input.intentKey, sessionId: sessionOf(workflowId), fencingToken: token });
    }
  });
});

describe('a retry of a key whose saga freed its intent and has not ended yet', () => {
  it('gives back the lease its gate took: the saga will not take it, and another request gets the intent at once', async () => {
    const { cart, key, input, workflowId } = aRequest('compensating');
    const recorded: ReservationAnswer = { status: 'SUCCESS', fencingToken: '1', expiresAt: Date.now() };
    // The saga as the gate finds it between its last compensation (undoEntity freed the intent) and
    // its end, a window as long as its worker takes to run one more workflow task.
    const saga = await sagaAsDescribed(workflowId, { memo: { requestHash: input.requestHash, reservation: recorded }, phase: 'COMPENSATING', intentKey: input.intentKey });
    try {
      const again = await h.client.start('order', cart, { idempotencyKey: key });

      expect(again).toMatchObject({ reservation: recorded, started: true, replayed: true });
      expect((await h.rms.inspect(input.intentKey)).holder).toBeUndefined();
      const next = await h.client.start('order', cart, { idempotencyKey: `next-${randomUUID()}` });
      expect(next).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true });
      await h.client.temporal.workflow.getHandle(next.workflowId).terminate('test over');
    } finally {
      await saga.terminate();
    }
  });
});

describe('a saga whose gate lease ended before any worker ran it (every worker down past the pickup lease)', () => {
  const SHORT = { leaseMs: 1500, heartbeatIntervalMs: 250, heartbeatTimeoutMs: 1000 };
  const lapsing = () => h.newClient(SHORT, { pickupLeaseMs: SHORT.leaseMs });

  it('reserves again and completes when nobody took the intent meanwhile', async () => {
    const started = await lapsing().start('order', order());
    await eventually(() => h.rms.inspect(started.intentKey), (i) => i.holder === undefined, 'the gate lease to expire');

    const final = await withWorker(() => h.client.result(started.workflowId));

    expect(final.outcome).toBe('COMPLETED');
    expect(BigInt(final.fencingToken!)).toBeGreaterThan(BigInt(tokenOf(started.reservation)!));
    expect(final.errors).toEqual([expect.objectContaining({ at: 'reserveIntent', type: 'LEASE_EXPIRED' })]);
  });

  it('ends REJECTED, writing nothing, when another request took the intent meanwhile: one entity', async () => {
    const cart = order();
    const late = await lapsing().start('order', cart);
    await eventually(() => h.rms.inspect(late.intentKey), (i) => i.holder === undefined, 'the gate lease to expire');
    const taker = await h.client.start('order', cart);
    expect(taker.reservation.status).toBe('SUCCESS');

    const [lateFinal, takerFinal] = await withWorker(() => Promise.all([h.client.result(late.workflowId), h.client.result(taker.workflowId)]));

    expect(lateFinal).toMatchObject({ outcome: 'REJECTED', stepsDone: [] });
    expect(['CONFLICT', 'DUPLICATE']).toContain(lateFinal.reason);
    expect(takerFinal.outcome, JSON.stringify(takerFinal.errors)).toBe('COMPLETED');
    const { rows } = await h.pool.query('SELECT last_fencing_token::text AS token FROM orders WHERE intent_key = $1', [late.intentKey]);
    expect(rows).toEqual([{ token: takerFinal.fencingToken }]);
  });
});

describe('a retry of a key whose saga ended without its entity', () => {
  const SHORT = { leaseMs: 1500, heartbeatIntervalMs: 250, heartbeatTimeoutMs: 1000 };
  const lapsing = () => h.newClient(SHORT, { pickupLeaseMs: SHORT.leaseMs });

  it('after it ended REJECTED gets a fresh answer: once the intent is free, a new saga runs for the key', async () => {
    // Its lease ran out while every worker was down, and another holder took the intent meanwhile.
    const cart = order();
    const key = `rejected-${randomUUID()}`;
    const late = await lapsing().start('order', cart, { idempotencyKey: key });
    await eventually(() => h.rms.inspect(late.intentKey), (i) => i.holder === undefined, 'the gate lease to expire');
    const other = await h.rms.reserve({ intent: late.intentKey, sessionId: 'another-holder', leaseMs: 60_000 });
    if (other.status !== 'SUCCESS') throw new Error(`could not take the intent: ${other.status}`);
    const rejected = await withWorker(() => h.client.result(late.workflowId));
    expect(rejected).toMatchObject({ outcome: 'REJECTED', reason: 'CONFLICT', stepsDone: [] });
    expect(await h.client.status(late.workflowId)).toMatchObject({ status: 'FAILED', state: { outcome: 'REJECTED', reason: 'CONFLICT' } });
    // The other holder gives the intent up without creating anything.
    await h.rms.release({ intent: late.intentKey, sessionId: 'another-holder', fencingToken: other.fencingToken });

    const retry = await h.client.start('order', cart, { idempotencyKey: key });

    expect(retry).toMatchObject({ workflowId: late.workflowId, reservation: { status: 'SUCCESS' }, started: true });
    expect(retry.replayed).toBeUndefined();
    expect(retry.runId).not.toBe(late.runId);
    const final = await withWorker(() => h.client.result(late.workflowId));
    expect(final).toMatchObject({ outcome: 'COMPLETED', fencingToken: tokenOf(retry.reservation) });
    expect(await h.client.start('order', cart, { idempotencyKey: key })).toMatchObject({ runId: retry.runId, outcome: 'COMPLETED', replayed: true });
  });

  it('after it was terminated before any worker ran it starts it afresh, with the lease its session still holds', async () => {
    const cart = order();
    const key = `terminated-${randomUUID()}`;
    const first = await h.client.start('order', cart, { idempotencyKey: key });
    await h.client.temporal.workflow.getHandle(first.workflowId).terminate('an operator stops it');

    const retry = await h.client.start('order', cart, { idempotencyKey: key });

    // The lease its session holds: the same token, and the same end (Redis reports a held lease's end
    // as its clock now plus the remaining PTTL, each rounded down to the millisecond: within 2 ms).
    expect(retry).toMatchObject({ reservation: { status: 'SUCCESS', fencingToken: tokenOf(first.reservation) }, started: true });
    const end = (answer: ReservationAnswer) => (answer.status === 'SUCCESS' ? answer.expiresAt : Number.NaN);
    expect(Math.abs(end(retry.reservation) - end(first.reservation))).toBeLessThanOrEqual(2);
    expect(retry.replayed).toBeUndefined();
    expect(retry.runId).not.toBe(first.runId);
    expect(await withWorker(() => h.client.result(first.workflowId))).toMatchObject({ outcome: 'COMPLETED', fencingToken: tokenOf(first.reservation) });
  });

  it('after its workflow failed on input the worker refused starts a saga with the valid data', async () => {
    const key = `failed-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    await h.client.temporal.workflow.start('reservationSaga', { workflowId, taskQueue: h.config.temporal.taskQueue, args: [{ type: 'order', idempotencyKey: key, data: { items: [] } }] });
    await expect(withWorker(() => h.client.result(workflowId))).rejects.toThrow(WorkflowFailedError);

    const retry = await h.client.start('order', order(), { idempotencyKey: key });

    expect(retry).toMatchObject({ workflowId, reservation: { status: 'SUCCESS' }, started: true });
    expect(retry.replayed).toBeUndefined();
    expect(await withWorker(() => h.client.result(workflowId))).toMatchObject({ outcome: 'COMPLETED' });
  });
});

describe('a retry of a key whose saga was terminated after it registered its entity', () => {
  it('answers TERMINATED, and status reads it with no worker running', async () => {
    const cart = order({ simulate: { stepDelayMs: 5000 } });
    const key = `terminated-late-${randomUUID()}`;
    // A lease longer than the worker below takes to start. With the tests' 3 s one, a worker that
    // started late on a loaded machine found the gate's lease gone and reserved again, as a saga must,
    // and the retry then answered, rightly, with the saga's new token instead of the first answer's.
    const client = h.newClient({ leaseMs: 60_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 10_000 });
    const first = await client.start('order', cart, { idempotencyKey: key });
    await withWorker(async () => {
      await eventually(() => h.client.status(first.workflowId), (s) => s.state.phase === 'RUNNING_STEPS', 'the saga to run its steps');
      await h.client.temporal.workflow.getHandle(first.workflowId).terminate('an operator stops it');
    });

    const retry = await client.start('order', cart, { idempotencyKey: key });
    const status = await h.client.status(first.workflowId);

    expect(retry).toEqual({ ...first, outcome: 'TERMINATED', replayed: true });
    expect(status).toMatchObject({ status: 'TERMINATED', state: { outcome: 'TERMINATED', phase: 'RUNNING_STEPS', intentKey: first.intentKey } });
  });
});

describe('a fault run: every worker down longer than the pickup lease, then retries of every key', () => {
  it('leaves no key answering CONFLICT for a saga that has ended, and each retry answers what is true', async () => {
    const SHORT = { leaseMs: 1500, heartbeatIntervalMs: 250, heartbeatTimeoutMs: 1000 };
    const short = h.newClient(SHORT, { pickupLeaseMs: SHORT.leaseMs });
    // Per intent: a first request whose lease runs out, then a second key that takes the intent. The
    // second one's saga is compensated (the stock is short), which frees the intent again.
    const carts = Array.from({ length: 3 }, () => order({ items: [{ sku: 'rare-coin', quantity: 5, priceCents: 10 }] }));
    const lone = Array.from({ length: 2 }, () => order());
    const firsts = await Promise.all([...carts, ...lone].map((cart) => short.start('order', cart, { idempotencyKey: `fault-${randomUUID()}` })));
    await Promise.all(firsts.map((f) => eventually(() => h.rms.inspect(f.intentKey), (i) => i.holder === undefined, 'the gate leases to expire')));
    // The second keys' sagas run on a task queue of their own, after the firsts have ended: with one
    // worker for all, a second saga could end and free the intent before a first's workflow task
    // asked for it, and that first would take it again.
    const laterQueue = `${h.config.temporal.taskQueue}-later`;
    const later = new SagaClient({ ...h.clientOptions({}, { operator: true }), taskQueue: laterQueue });
    const seconds = await Promise.all(carts.map((cart) => later.start('order', cart, { idempotencyKey: `fault-${randomUUID()}` })));
    expect(seconds.map((s) => s.reservation.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS']);
    const sagas = [...firsts, ...seconds];

    const firstFinals = await withWorker(() => Promise.all(firsts.map((s) => h.client.result(s.workflowId))));
    const laterConfig = { ...h.config, temporal: { ...h.config.temporal, taskQueue: laterQueue } };
    const secondFinals = await withWorker(() => Promise.all(seconds.map((s) => h.client.result(s.workflowId))), laterConfig);
    const finals = [...firstFinals, ...secondFinals];
    const cartOf = (i: number) => (i < firsts.length ? [...carts, ...lone][i]! : carts[i - firsts.length]!);
    // One at a time, the keys whose sagas hold their answer first: a retry that starts a new saga holds
    // the intent while that saga runs, and any other key of the intent is answered CONFLICT meanwhile.
    const retries: StartedSaga[] = [];
    for (const i of [...sagas.keys()].sort((a, b) => Number(finals[a]!.outcome === 'REJECTED') - Number(finals[b]!.outcome === 'REJECTED'))) {
      retries[i] = await h.client.start('order', cartOf(i), { idempotencyKey: sagas[i]!.idempotencyKey });
    }

    // The first requests of the contested intents lost them; the lone ones reserved again and completed.
    expect(finals.map((f) => f.outcome)).toEqual(['REJECTED', 'REJECTED', 'REJECTED', 'COMPLETED', 'COMPLETED', 'COMPENSATED', 'COMPENSATED', 'COMPENSATED']);
    expect(retries.map((r) => r.reservation.status)).not.toContain('CONFLICT');
    retries.forEach((retry, i) => {
      if (finals[i]!.outcome === 'REJECTED') {
        // A new attempt: the intent is free again, so a new saga runs for the key.
        expect(retry, sagas[i]!.workflowId).toMatchObject({ reservation: { status: 'SUCCESS' }, started: true });
        expect(retry.replayed).toBeUndefined();
      } else {
        expect(retry, sagas[i]!.workflowId).toMatchObject({ runId: sagas[i]!.runId, outcome: finals[i]!.outcome, replayed: true });
      }
    });
    const again = await withWorker(() => Promise.all(firsts.slice(0, carts.length).map((s) => h.client.result(s.workflowId))));
    expect(again.map((f) => f.outcome)).toEqual(['COMPENSATED', 'COMPENSATED', 'COMPENSATED']);
  });
});

describe('a saga cancelled before any worker ran it', () => {
  it('ends COMPENSATED (CANCELLED), writing nothing and giving its lease back: the cart can be ordered at once', async () => {
    // The caller gives up while every worker is down: the first workflow task sees the cancellation.
    const cart = order();
    const started = await h.client.start('order', cart);
    await h.client.cancel(started.workflowId);

    const final = await withWorker(() => h.client.result(started.workflowId));

    expect(final).toMatchObject({ outcome: 'COMPENSATED', reason: 'CANCELLED', intentKey: started.intentKey, stepsDone: [], compensationsRun: ['undoEntity'] });
    expect(await ordersTable.find(h.pool, started.intentKey)).toBeUndefined();
    expect(await h.rms.inspect(started.intentKey)).toEqual({ intent: started.intentKey, exists: false });
    expect((await h.client.start('order', cart)).reservation.status).toBe('SUCCESS');
  });
});

describe('a saga started by a plain Temporal client', () => {
  const run = promisify(execFile);
  // The CLI encrypts and decrypts through a codec server over real HTTP, as any plain client must.
  let codecServer: FastifyInstance;
  let codecEndpoint = '';
  beforeAll(async () => {
    codecServer = createCodecServer({ codec: new EncryptionCodec(requireCodecKeys(h.config)), corsOrigins: [], namespaces: [h.config.temporal.namespace] });
    codecEndpoint = await codecServer.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await codecServer?.close();
  });
  const temporal = (args: string[], options: { codec: boolean } = { codec: true }) => {
    const cli = inject('temporalCli');
    if (!cli) throw new Error('these tests need the Temporal CLI that scripts/ensure-temporal finds');
    const codec = options.codec ? ['--codec-endpoint', codecEndpoint] : [];
    return run(cli, [...args, '--address', h.config.temporal.address, '--namespace', h.config.temporal.namespace, ...codec], { maxBuffer: 64 * 1024 * 1024 });
  };
  const startByType = (workflowId: string, input: unknown) =>
    temporal(['workflow', 'start', '--type', 'reservationSaga', '--task-queue', h.config.temporal.taskQueue, '--workflow-id', workflowId, '--input', JSON.stringify(input)]);
  /** A reservation as the gate would hand the saga of `key`: its session is anyone's to compute. */
  const forgedReservation = (key: string) => ({ sessionId: sessionOf(sagaWorkflowId('order', key)), fencingToken: '1', expiresAt: Date.now() + 60_000 });
  /** The execution's status, or DELETED when Temporal no longer has it. */
  const executionStatusOf = async (workflowId: string) => {
    try {
      return (await h.client.temporal.workflow.getHandle(workflowId).describe()).status.name;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'DELETED';
      throw err;
    }
  };
  /** The saga's failure message, once it failed. */
  const failureOf = async (workflowId: string) => {
    const err = await h.client.result(workflowId).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    return (err as WorkflowFailedError).cause?.message ?? '';
  };

  it('shows no card number and no customer in a history exported without the codec, and the decoded input through it', async () => {
    const email = `ada-${randomUUID()}@example.com`;
    const completed = order({ customer: email, payment: { card: '4242424242424242' } });
    const declined = order({ customer: email, payment: { card: DECLINED_CARD }, items: [{ sku: 'gizmo', quantity: 1, priceCents: 100 }] });
    const sagas = await withWorker(async () => {
      const ids: string[] = [];
      for (const data of [completed, declined]) {
        const started = await h.client.start('order', data);
        await h.client.result(started.workflowId);
        ids.push(started.workflowId);
      }
      return ids;
    });

    for (const workflowId of sagas) {
      const { stdout: stored } = await temporal(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json'], { codec: false });
      const { stdout: decoded } = await temporal(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json']);

      expect(stored).toContain('workflowExecutionStartedEventAttributes');
      for (const secret of [email, '4242424242424242', DECLINED_CARD, 'the card was declined']) expect(readableHistory(stored), workflowId).not.toContain(secret);
      expect(readableHistory(decoded), workflowId).toContain(email);
    }
    // The declined saga's failure message is in the history, readable through the codec only.
    const { stdout: failed } = await temporal(['workflow', 'show', '--workflow-id', sagas[1]!, '--output', 'json']);
    expect(readableHistory(failed)).toContain('the card was declined');
  });

  it('with {type, idempotencyKey, data} reserves by itself, answers through the reservation update, and a client retry finds it', async () => {
    const cart = order();
    const key = `cli-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    await startByType(workflowId, { type: 'order', idempotencyKey: key, data: cart });

    const { answer, final } = await withWorker(async () => {
      const { stdout } = await temporal(['workflow', 'update', 'execute', '--name', 'reservation', '--workflow-id', workflowId, '--output', 'json']);
      return { answer: stdout, final: await h.client.result(workflowId) };
    });

    expect(answer).toMatch(/"status":\s*"SUCCESS"/);
    expect(answer).toContain(final.fencingToken!);
    expect(final).toMatchObject({ outcome: 'COMPLETED', intentKey: intentOf(cart), requestHash: h.client.prepare('order', cart).requestHash });
    const retry = await h.client.start('order', cart, { idempotencyKey: key });
    expect(retry).toMatchObject({ workflowId, started: true, outcome: 'COMPLETED', reservation: { status: 'SUCCESS', fencingToken: final.fencingToken } });
  });

  it('that names an owner is that owner\'s saga: status and list find it for its owner only', async () => {
    const key = `owned-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    const owner = `plain-${randomUUID().slice(0, 8)}`;
    await startByType(workflowId, { type: 'order', idempotencyKey: key, data: order(), owner });

    await withWorker(() => h.client.result(workflowId));

    expect((await h.client.status(workflowId, { owner })).state.outcome).toBe('COMPLETED');
    await expect(h.client.status(workflowId, { owner: 'someone-else' })).rejects.toBeInstanceOf(WorkflowNotFoundError);
    // Visibility follows the saga's end a moment later.
    await eventually(() => h.client.list({ owner }), (found) => found.some((s) => s.workflowId === workflowId), 'the saga to be listed for its owner');
    expect((await h.client.list({ owner: 'someone-else' })).map((s) => s.workflowId)).not.toContain(workflowId);
  });

  it.each([
    ['the old field name payload', (key: string) => ({ type: 'order', idempotencyKey: key, payload: order() }), /invalid saga input: unknown field "payload"/],
    ['data the type refuses', (key: string) => ({ type: 'order', idempotencyKey: key, data: { ...order(), items: [] } }), /invalid order input at items/],
    ['an input that is no object', () => 'nonsense', /the saga input must be an object/],
    ['a lease shorter than its heartbeat', (key: string) => ({ type: 'order', idempotencyKey: key, data: order(), timings: { leaseMs: 1000, heartbeatTimeoutMs: 5000 } }), /heartbeatTimeoutMs < leaseMs/],
    ['a forged reservation', (key: string) => ({ type: 'order', idempotencyKey: key, data: order(), reservation: { sessionId: 'forged', fencingToken: '1', expiresAt: 0 } }), /reservation was not taken for this saga/],
  ])('fails at once with a message naming the problem: %s', async (_, input, message) => {
    const key = `bad-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    await startByType(workflowId, input(key));

    const failure = await withWorker(() => failureOf(workflowId));

    expect(failure).toMatch(message);
  });

  it('refuses a start that reached the worker unencrypted before any step, and deletes its execution: the card stays nowhere', async () => {
    const cart = order();
    const key = `clear-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    await temporal(['workflow', 'start', '--type', 'reservationSaga', '--task-queue', h.config.temporal.taskQueue, '--workflow-id', workflowId, '--input', JSON.stringify({ type: 'order', idempotencyKey: key, data: cart })], { codec: false });
    expect(await exists(workflowId)).toBe(true);

    await withWorker(() => eventually(() => exists(workflowId), (found) => !found, 'the unencrypted saga to be deleted'));

    expect(await h.rms.inspect(intentOf(cart))).toEqual({ intent: intentOf(cart), exists: false });
    expect(await ordersTable.find(h.pool, intentOf(cart))).toBeUndefined();
  });

  it.each([
    ['the current shape, with a reservation for its session', (key: string, cart: unknown) => ({ type: 'order', idempotencyKey: key, data: cart, reservation: forgedReservation(key) })],
    ['the older shape (a full SagaInput), with a reservation', (key: string, cart: unknown) => ({ ...h.client.prepare('order', cart, key), reservation: forgedReservation(key) })],
  ])('refuses an unencrypted start that carries a forged gate reservation in %s, and deletes its execution', async (_, input) => {
    const cart = order({ payment: { card: '4242424242424242' } });
    const key = `forged-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    await temporal(['workflow', 'start', '--type', 'reservationSaga', '--task-queue', h.config.temporal.taskQueue, '--workflow-id', workflowId, '--input', JSON.stringify(input(key, cart))], { codec: false });
    const { stdout: stored } = await temporal(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json'], { codec: false });
    expect(readableHistory(stored)).toContain('4242424242424242');
    const planning = activityFailures('planSaga');

    // Deleted (a running execution is terminated first), or ended otherwise.
    const fate = await withWorker(
      () => eventually(() => executionStatusOf(workflowId), (status) => status !== 'RUNNING' && status !== 'TERMINATED', 'the saga to be deleted or to end'),
      h.config,
      planning.workerOptions,
    );

    expect(fate).toBe('DELETED');
    expect(planning.failures).toContainEqual({ workflowId, type: 'UNENCRYPTED_INPUT' });
    await expect(temporal(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json'], { codec: false })).rejects.toThrow(/not found/i);
    expect(await h.rms.inspect(intentOf(cart))).toEqual({ intent: intentOf(cart), exists: false });
    expect(await ordersTable.find(h.pool, intentOf(cart))).toBeUndefined();
  });

  it('refuses a start by a SagaClient whose Temporal client does not encrypt: its reservation is not sealed, so the worker reads and deletes it', async () => {
    const unencrypted = new SagaClient({ ...clientOptions(), client: new Client({ connection: h.client.temporal.connection, namespace: h.config.temporal.namespace }) });
    const started = await unencrypted.start('order', order());
    expect(started).toMatchObject({ started: true, reservation: { status: 'SUCCESS' } });
    const planning = activityFailures('planSaga');

    const fate = await withWorker(
      () => eventually(() => executionStatusOf(started.workflowId), (status) => status !== 'RUNNING' && status !== 'TERMINATED', 'the saga to be deleted or to end'),
      h.config,
      planning.workerOptions,
    );

    expect(fate).toBe('DELETED');
    expect(planning.failures).toContainEqual({ workflowId: started.workflowId, type: 'UNENCRYPTED_INPUT' });
  });

  it('plans a start through SagaClient without reading its history, and a start of the previous release (no seal) after reading it', async () => {
    const cart = order();
    const started = await h.client.start('order', cart);
    try {
      const history = await h.client.temporal.workflowService.getWorkflowExecutionHistory({
        namespace: h.config.temporal.namespace,
        execution: { workflowId: started.workflowId, runId: started.runId },
        maximumPageSize: 1,
      });
      const encoded = history.history!.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads!;
      const [decoded] = await new EncryptionCodec(requireCodecKeys(h.config)).decode(encoded);
      const start = defaultPayloadConverter.fromPayload<{ reservation: Record<string, unknown> }>(decoded!);
      const { mac: _mac, ...unsealed } = start.reservation;
      const calls: string[] = [];
      const service = h.client.temporal.workflowService;
      const activities = createSagaActivities({
        rms: h.rms,
        pool: h.pool,
        timings: { ...h.config.saga, compensationAttempts: 2 },
        types: h.types,
        intentSecret: TEST_INTENT_SECRET,
        workflowService: {
          getWorkflowExecutionHistory: (req) => (calls.push('history'), service.getWorkflowExecutionHistory(req)),
          deleteWorkflowExecution: (req) => (calls.push('delete'), service.deleteWorkflowExecution(req)),
        },
      });
      const plan = (given: unknown): Promise<SagaPlan> =>
        new MockActivityEnvironment({ workflowExecution: { workflowId: started.workflowId, runId: started.runId! } }).run(
          (req: Parameters<typeof activities.planSaga>[0]) => activities.planSaga(req),
          { workflowId: started.workflowId, namespace: h.config.temporal.namespace, start: given },
        );

      const sealed = await plan(start);
      const readForSealed = calls.splice(0);
      const previous = await plan({ ...start, reservation: unsealed });

      expect(readForSealed).toEqual([]);
      expect(sealed.reservation).toEqual({ sessionId: sessionOf(started.workflowId), fencingToken: tokenOf(started.reservation), expiresAt: expect.any(Number) });
      expect(calls).toEqual(['history']);
      expect(previous).toEqual(sealed);
    } finally {
      await h.client.temporal.workflow.getHandle(started.workflowId).terminate('test over');
    }
  });

  it('fails at once, reserving nothing, when it asks for a simulation of a worker without SAGA_SIMULATIONS', async () => {
    const cart = order();
    const key = `simulate-${randomUUID()}`;
    const workflowId = sagaWorkflowId('order', key);
    await startByType(workflowId, { type: 'order', idempotencyKey: key, data: { ...cart, simulate: { writeDelayMs: 1 } } });

    const failure = await withWorker(() => failureOf(workflowId), { ...h.config, simulations: false });

    expect(failure).toMatch(/^invalid order input at \(root\): .*simulate/);
    expect(await h.rms.inspect(intentOf(cart))).toEqual({ intent: intentOf(cart), exists: false });
    expect(await ordersTable.find(h.pool, intentOf(cart))).toBeUndefined();
  });

  it('fails at once when the workflow id is not the one its type and key name', async () => {
    const key = `mismatch-${randomUUID()}`;
    const workflowId = `order-someone-else-${randomUUID()}`;
    await startByType(workflowId, { type: 'order', idempotencyKey: key, data: order() });

    const failure = await withWorker(() => failureOf(workflowId));

    expect(failure).toMatch(/must run as workflow id "order-mismatch-/);
  });
});

describe('SagaClient timings', () => {
  it.each([
    ['a lease shorter than any worker accepts', { leaseMs: 300, heartbeatIntervalMs: 50, heartbeatTimeoutMs: 200 }, /leaseMs/],
    ['more compensation attempts than a worker accepts', { compensationAttempts: 50 }, /compensationAttempts/],
  ])('refuses %s before any gate, so no lease is taken for a saga the worker would fail', (_, timings, message) => {
    expect(() => h.newClient(timings)).toThrow(message);
  });
});

describe('SagaClient.connect', () => {
  it('accepts what the saga types it is given accept: the order app\'s simulation knobs only with SAGA_SIMULATIONS on', async () => {
    const slow = order({ simulate: { stepDelayMs: 1 } });
    const on = await SagaClient.connect({ sagas: sagaTypesFor({ simulations: true }), config: h.config });
    const off = await SagaClient.connect({ sagas: sagaTypesFor({ simulations: false }), config: h.config });
    try {
      expect(on.prepare('order', slow).payload).toEqual(slow);
      expect(() => off.prepare('order', slow)).toThrow(expect.objectContaining({ name: 'SagaInputError', code: 'INVALID_INPUT' }));
    } finally {
      await Promise.all([on.close(), off.close()]);
    }
  });
});
