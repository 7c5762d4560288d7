/**
 * The step idempotency store against the real PostgreSQL of the run. Each test uses scopes of its
 * own; fn's side effect is a row in a table of this file's own schema, written through `tx`.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  IdempotencyKeyReuseError,
  IdempotencyKeyTombstonedError,
  finishExternal,
  purgeIdempotencyRecords,
  startExternal,
  requestHash,
  tombstoneIdempotencyKey,
  withIdempotency,
} from '../../src/db';
import { checkout, testPool, uniqueId, uniqueSchema } from '../helpers/db-fixtures';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ensurePurgeSchedule, purgeScheduleId } from '../../src/schedules';
import { REFUND_REFUSED_CARD } from '../fixtures/orders';

const schema = uniqueSchema('idem');
let pool: pg.Pool;

beforeAll(async () => {
  pool = testPool(4);
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(`CREATE TABLE ${schema}.effects (scope text NOT NULL, note text NOT NULL)`);
});
afterAll(async () => {
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await pool.end();
});

/** The step's effect: one row per run of fn, in fn's transaction. */
async function effect(tx: pg.PoolClient, scope: string, note: string): Promise<void> {
  await tx.query(`INSERT INTO ${schema}.effects (scope, note) VALUES ($1, $2)`, [scope, note]);
}

async function effects(scope: string): Promise<string[]> {
  const { rows } = await pool.query<{ note: string }>(`SELECT note FROM ${schema}.effects WHERE scope = $1 ORDER BY note`, [scope]);
  return rows.map((r) => r.note);
}

async function record(scope: string, key: string) {
  const { rows } = await pool.query<{ status: string; request_hash: string; response: unknown }>(
    'SELECT status, request_hash, response FROM idempotency_store WHERE scope = $1 AND key = $2',
    [scope, key],
  );
  return rows[0];
}

describe('withIdempotency', () => {
  it('runs fn, records COMPLETED with the response and the request hash, and says it was not replayed', async () => {
    const scope = uniqueId('first');
    const payload = { orderId: 'o-1', amountCents: '1200' };

    const outcome = await withIdempotency(pool, { scope, key: 'saga-1:charge', payload }, async (tx) => {
      await effect(tx, scope, 'charged');
      return { chargeId: 'ch_1' };
    });

    expect(outcome).toEqual({ result: { chargeId: 'ch_1' }, replayed: false });
    expect(await effects(scope)).toEqual(['charged']);
    expect(await record(scope, 'saga-1:charge')).toEqual({ status: 'COMPLETED', request_hash: requestHash(payload), response: { chargeId: 'ch_1' } });
  });

  it('runs fn exactly once for 20 concurrent calls with the same key and payload, and gives all 20 the same response', async () => {
    const scope = uniqueId('concurrent');
    const callPool = testPool(20);
    const input = { scope, key: 'k', payload: { a: 1, b: [1, 2] } };
    let runs = 0;
    try {
      // Each caller gets a connection of its own: warm the pool so all 20 are open before they race.
      (await checkout(callPool, 20)).forEach((c) => c.release());

      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          withIdempotency(callPool, input, async (tx) => {
            runs++;
            await effect(tx, scope, `run-${i}`);
            return { ranBy: i, at: 'step' };
          }),
        ),
      );

      expect(runs).toBe(1);
      expect(await effects(scope)).toHaveLength(1);
      const first = outcomes.find((o) => !o.replayed)!;
      expect(outcomes.filter((o) => !o.replayed)).toHaveLength(1);
      for (const outcome of outcomes) expect(outcome.result).toEqual(first.result);
    } finally {
      await callPool.end();
    }
  });

  it('replays the JSON round-trip of the stored response to a later call without running fn', async () => {
    const scope = uniqueId('later');
    const input = { scope, key: 'k', payload: { x: 1 } };
    await withIdempotency(pool, input, async (tx) => {
      await effect(tx, scope, 'once');
      return { when: new Date('2026-11-21T00:00:00.000Z'), big: '9223372036854775807', none: undefined };
    });

    const again = await withIdempotency(pool, { ...input, payload: { x: 1 } }, async () => {
      throw new Error('fn must not run again');
    });

    expect(again).toEqual({ result: { when: '2026-11-21T00:00:00.000Z', big: '9223372036854775807' }, replayed: true });
    expect(await effects(scope)).toEqual(['once']);
  });

  it('treats payloads that differ only in key order as the same request', async () => {
    const scope = uniqueId('key-order');
    await withIdempotency(pool, { scope, key: 'k', payload: { a: 1, b: { c: 2, d: 3 } } }, async () => 'done');

    const again = await withIdempotency(pool, { scope, key: 'k', payload: { b: { d: 3, c: 2 }, a: 1 } }, async () => 'ran again');

    expect(again).toEqual({ result: 'done', replayed: true });
  });

  it('refuses the same key with a different payload with IdempotencyKeyReuseError and does not run fn', async () => {
    const scope = uniqueId('reuse');
    await withIdempotency(pool, { scope, key: 'k', payload: { amount: 1 } }, async (tx) => effect(tx, scope, 'first'));
    let ran = false;

    const attempt = withIdempotency(pool, { scope, key: 'k', payload: { amount: 2 } }, async (tx) => {
      ran = true;
      await effect(tx, scope, 'second');
    });

    await expect(attempt).rejects.toThrow(IdempotencyKeyReuseError);
    await expect(attempt).rejects.toMatchObject({ scope, key: 'k' });
    expect(ran).toBe(false);
    expect(await effects(scope)).toEqual(['first']);
  });

  it('records nothing and keeps no side effect when fn throws, lets the error through, and runs fn again on retry', async () => {
    const scope = uniqueId('throws');
    const boom = new Error('payment provider said no');

    const failed = withIdempotency(pool, { scope, key: 'k', payload: {} }, async (tx) => {
      await effect(tx, scope, 'attempt-1');
      throw boom;
    });

    await expect(failed).rejects.toBe(boom);
    expect(await record(scope, 'k')).toBeUndefined();
    expect(await effects(scope)).toEqual([]);
    const retried = await withIdempotency(pool, { scope, key: 'k', payload: {} }, async (tx) => {
      await effect(tx, scope, 'attempt-2');
      return 'ok';
    });
    expect(retried).toEqual({ result: 'ok', replayed: false });
    expect(await effects(scope)).toEqual(['attempt-2']);
  });

  it('makes a concurrent duplicate wait, and run fn itself when the first call fails', async () => {
    const scope = uniqueId('waiter');
    const input = { scope, key: 'k', payload: { p: 1 } };
    let firstInside!: () => void;
    const firstIsInside = new Promise<void>((resolve) => (firstInside = resolve));
    let letFirstFail!: () => void;
    const firstMayFail = new Promise<void>((resolve) => (letFirstFail = resolve));
    const first = withIdempotency(pool, input, async (tx) => {
      await effect(tx, scope, 'first');
      firstInside();
      await firstMayFail;
      throw new Error('first failed');
    });
    await firstIsInside;

    const duplicate = withIdempotency(pool, input, async (tx) => {
      await effect(tx, scope, 'duplicate');
      return 'duplicate ran';
    });
    try {
      await untilAClaimWaits(pool);
    } finally {
      letFirstFail();
    }

    await expect(first).rejects.toThrow('first failed');
    await expect(duplicate).resolves.toEqual({ result: 'duplicate ran', replayed: false });
    expect(await effects(scope)).toEqual(['duplicate']);
    expect((await record(scope, 'k'))?.status).toBe('COMPLETED');
  });

  it('refuses a non-JSON payload and an empty key before running anything', async () => {
    const scope = uniqueId('bad-input');
    let ran = false;
    const fn = async () => {
      ran = true;
    };

    await expect(withIdempotency(pool, { scope, key: 'k', payload: { n: 1n } }, fn)).rejects.toThrow(/bigint/);
    await expect(withIdempotency(pool, { scope, key: '', payload: {} }, fn)).rejects.toThrow(/key/);
    expect(ran).toBe(false);
  });

  it('rolls back the effect when the result is not JSON-serialisable', async () => {
    const scope = uniqueId('bad-result');

    const attempt = withIdempotency(pool, { scope, key: 'k', payload: {} }, async (tx) => {
      await effect(tx, scope, 'effect');
      return { n: 1n };
    });

    await expect(attempt).rejects.toThrow(/JSON/);
    expect(await effects(scope)).toEqual([]);
    expect(await record(scope, 'k')).toBeUndefined();
  });
});

/** An attempt of `fn` held open inside its transaction (after its claim and its effect) until let go. */
function heldAttempt(pool: pg.Pool, input: { scope: string; key: string; payload: unknown; signal?: AbortSignal }, note: string) {
  let inside!: () => void;
  const isInside = new Promise<void>((resolve) => (inside = resolve));
  let letGo!: () => void;
  const mayGo = new Promise<void>((resolve) => (letGo = resolve));
  const attempt = withIdempotency(pool, input, async (tx) => {
    await effect(tx, input.scope, note);
    inside();
    await mayGo;
    await tx.query('SELECT 1');
    return note;
  });
  attempt.catch(() => {});
  return { attempt, isInside, letGo };
}

describe('tombstoneIdempotencyKey', () => {
  it('waits for an attempt in flight; when it commits, reports COMPLETED and its effect is there to undo', async () => {
    const scope = uniqueId('tomb-after-commit');
    const input = { scope, key: 'saga-1:charge', payload: { t: '1' } };
    const held = heldAttempt(pool, input, 'charged');
    await held.isInside;

    const tombstone = tombstoneIdempotencyKey(pool, input);
    await untilAClaimWaits(pool);
    held.letGo();

    await expect(held.attempt).resolves.toEqual({ result: 'charged', replayed: false });
    await expect(tombstone).resolves.toBe('COMPLETED');
    expect(await effects(scope)).toEqual(['charged']);
    expect((await record(scope, 'saga-1:charge'))?.status).toBe('COMPLETED');
  });

  it('waits for an attempt in flight; when it rolls back, takes the key for good: no later attempt runs', async () => {
    const scope = uniqueId('tomb-after-rollback');
    const input = { scope, key: 'saga-1:charge', payload: { t: '1' } };
    const givenUp = new AbortController();
    const held = heldAttempt(pool, { ...input, signal: givenUp.signal }, 'charged');
    await held.isInside;

    const tombstone = tombstoneIdempotencyKey(pool, input);
    await untilAClaimWaits(pool);
    givenUp.abort(new Error('attempt given up'));
    held.letGo();

    await expect(held.attempt).rejects.toThrow('attempt given up');
    await expect(tombstone).resolves.toBe('TOMBSTONE');
    let ran = false;
    const late = withIdempotency(pool, input, async () => {
      ran = true;
    });
    await expect(late).rejects.toBeInstanceOf(IdempotencyKeyTombstonedError);
    expect(ran).toBe(false);
    expect(await effects(scope)).toEqual([]);
    expect(await record(scope, 'saga-1:charge')).toEqual({ status: 'TOMBSTONE', request_hash: requestHash(input.payload), response: null });
    // Taking it again changes nothing.
    await expect(tombstoneIdempotencyKey(pool, input)).resolves.toBe('TOMBSTONE');
  });

  it('is not held up for ever by a stalled attempt: PostgreSQL ends its idle transaction, and the attempt commits nothing when it wakes', async () => {
    const scope = uniqueId('tomb-stalled');
    const input = { scope, key: 'saga-1:charge', payload: { t: '1' } };
    const stalling = testPool(1);
    stalling.on('connect', (c) => c.on('error', () => {}));
    await stalling.query('SET SESSION idle_in_transaction_session_timeout = 500');
    try {
      const held = heldAttempt(stalling, input, 'charged');
      await held.isInside;

      // The attempt's process is stalled (here: fn awaits); its transaction sits idle past the limit.
      await expect(tombstoneIdempotencyKey(pool, input)).resolves.toBe('TOMBSTONE');
      held.letGo();

      await expect(held.attempt).rejects.toThrow();
      expect(await effects(scope)).toEqual([]);
      expect((await record(scope, 'saga-1:charge'))?.status).toBe('TOMBSTONE');
    } finally {
      await stalling.end();
    }
  });
});

describe('external work (startExternal, finishExternal)', () => {
  it('records STARTED before the call, lets a retry call again with the same key, and answers from the store once COMPLETED', async () => {
    const scope = uniqueId('external');
    const key = 'saga-1:chargePayment';
    const payload = { intentKey: 'order:x', fencingToken: '7' };

    const first = await startExternal(pool, { scope, key, payload });
    const stored = await record(scope, key);
    const retry = await startExternal(pool, { scope, key, payload });
    const finished = await finishExternal(pool, { scope, key, status: 'COMPLETED', response: { chargeId: 'ch_1' } });
    const later = await startExternal(pool, { scope, key, payload });

    expect(first).toEqual({ status: 'STARTED' });
    expect(stored).toMatchObject({ status: 'STARTED', request_hash: requestHash(payload) });
    expect(retry).toEqual({ status: 'STARTED' });
    expect(finished).toEqual({ status: 'COMPLETED', response: { chargeId: 'ch_1' } });
    expect(later).toEqual({ status: 'COMPLETED', response: { chargeId: 'ch_1' } });
  });

  it('keeps the first outcome: a second attempt recording another one gets the first', async () => {
    const scope = uniqueId('external-first');
    await startExternal(pool, { scope, key: 'k', payload: 1 });

    const refused = await finishExternal(pool, { scope, key: 'k', status: 'FAILED', response: { reason: 'PAYMENT_DECLINED', message: 'declined' } });
    const late = await finishExternal(pool, { scope, key: 'k', status: 'COMPLETED', response: { chargeId: 'ch_2' } });

    expect(refused).toEqual({ status: 'FAILED', response: { reason: 'PAYMENT_DECLINED', message: 'declined' } });
    expect(late).toEqual(refused);
    expect(await startExternal(pool, { scope, key: 'k', payload: 1 })).toEqual(refused);
  });

  it('after the compensation tombstoned a STARTED record: no attempt calls again, and one that was out records nothing', async () => {
    const scope = uniqueId('external-tombstone');
    await startExternal(pool, { scope, key: 'k', payload: 1 });

    const found = await tombstoneIdempotencyKey(pool, { scope, key: 'k', payload: 1 });
    const late = await finishExternal(pool, { scope, key: 'k', status: 'COMPLETED', response: { chargeId: 'ch_3' } });

    expect(found).toBe('STARTED');
    expect(late).toEqual({ status: 'TOMBSTONE' });
    expect(await record(scope, 'k')).toMatchObject({ status: 'TOMBSTONE', response: null });
    await expect(startExternal(pool, { scope, key: 'k', payload: 1 })).rejects.toBeInstanceOf(IdempotencyKeyTombstonedError);
  });

  it('refuses the same key with another payload, and a key whose compensation came first', async () => {
    const scope = uniqueId('external-refusals');
    await startExternal(pool, { scope, key: 'k', payload: 1 });
    await tombstoneIdempotencyKey(pool, { scope, key: 'never-started', payload: 1 });

    await expect(startExternal(pool, { scope, key: 'k', payload: 2 })).rejects.toBeInstanceOf(IdempotencyKeyReuseError);
    await expect(startExternal(pool, { scope, key: 'never-started', payload: 1 })).rejects.toBeInstanceOf(IdempotencyKeyTombstonedError);
  });
});

describe('purgeIdempotencyRecords', () => {
  it('deletes the completed records older than the given age, returns how many, and keeps younger ones', async () => {
    // Other tests share the table: this test's old records are ten years old, nobody else's are.
    const scope = uniqueId('purge');
    for (const key of ['old-1', 'old-2', 'old-3', 'young']) await withIdempotency(pool, { scope, key, payload: key }, async () => key);
    await pool.query(`UPDATE idempotency_store SET updated_at = now() - interval '10 years' WHERE scope = $1 AND key LIKE 'old-%'`, [scope]);

    const purged = await purgeIdempotencyRecords(pool, { olderThanMs: 9 * 365 * 24 * 3600 * 1000 });

    expect(purged).toBe(3);
    const { rows } = await pool.query<{ key: string }>('SELECT key FROM idempotency_store WHERE scope = $1', [scope]);
    expect(rows.map((r) => r.key)).toEqual(['young']);
  });

  it('deletes external work left STARTED past the age too (its saga gave up on it long ago)', async () => {
    const scope = uniqueId('purge-started');
    await startExternal(pool, { scope, key: 'old', payload: 1 });
    await startExternal(pool, { scope, key: 'young', payload: 1 });
    await pool.query(`UPDATE idempotency_store SET updated_at = now() - interval '10 years' WHERE scope = $1 AND key = 'old'`, [scope]);

    expect(await purgeIdempotencyRecords(pool, { olderThanMs: 9 * 365 * 24 * 3600 * 1000 })).toBe(1);
    const { rows } = await pool.query<{ key: string; status: string }>('SELECT key, status FROM idempotency_store WHERE scope = $1', [scope]);
    expect(rows).toEqual([{ key: 'young', status: 'STARTED' }]);
  });

  it('refuses a negative or fractional age', async () => {
    await expect(purgeIdempotencyRecords(pool, { olderThanMs: -1 })).rejects.toThrow(/olderThanMs/);
    await expect(purgeIdempotencyRecords(pool, { olderThanMs: 1.5 })).rejects.toThrow(/olderThanMs/);
  });
});

describe('the purge schedule (made by saga setup, or at worker start when missing)', () => {
  // In this file, after the purge test: a run purges the whole table, and only this file ages records.
  let h: SagaHarness;
  beforeAll(async () => {
    h = await startHarness('idempotency purge schedule');
  });
  afterAll(async () => {
    await h.client.temporal.schedule.getHandle(purgeScheduleId(h.config.temporal.taskQueue)).delete().catch(() => undefined);
    await h.stop();
  });

  it('is made once, and its run deletes the records past IDEMPOTENCY_RETENTION_MS in batches, keeping younger ones', async () => {
    const scope = uniqueId('scheduled-purge');
    for (const key of ['old-1', 'old-2', 'old-3', 'young']) await withIdempotency(pool, { scope, key, payload: key }, async () => key);
    const aged = h.config.idempotencyRetentionMs / 1000 + 3600;
    await pool.query(`UPDATE idempotency_store SET updated_at = now() - $2::float8 * interval '1 second' WHERE scope = $1 AND key LIKE 'old-%'`, [scope, aged]);

    const first = await ensurePurgeSchedule(h.client.temporal, h.config);
    const second = await ensurePurgeSchedule(h.client.temporal, h.config);
    expect([first.action, second.action]).toEqual(['created', 'unchanged']);
    // A new retention in the config is applied to the schedule in place.
    const longer = { ...h.config, idempotencyRetentionMs: h.config.idempotencyRetentionMs + 3_600_000 };
    expect((await ensurePurgeSchedule(h.client.temporal, longer)).action).toBe('updated');
    expect((await ensurePurgeSchedule(h.client.temporal, longer)).action).toBe('unchanged');
    expect((await ensurePurgeSchedule(h.client.temporal, h.config)).action).toBe('updated');
    const schedule = h.client.temporal.schedule.getHandle(first.scheduleId);
    const described = await schedule.describe();
    expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'purgeIdempotencyStore', taskQueue: h.config.temporal.taskQueue });
    expect(described.spec.intervals).toMatchObject([{ every: 3_600_000 }]);

    await schedule.trigger();
    const run = await eventually(() => schedule.describe(), (d) => d.info.recentActions.length > 0, 'the triggered run to start');
    const result = await h.client.temporal.workflow.getHandle(run.info.recentActions[0]!.action.workflow.workflowId).result();

    expect(result).toMatchObject({ deleted: expect.any(Number), batches: expect.any(Number) });
    expect((result as { deleted: number }).deleted).toBeGreaterThanOrEqual(3);
    const { rows } = await pool.query<{ key: string }>('SELECT key FROM idempotency_store WHERE scope = $1', [scope]);
    expect(rows.map((r) => r.key)).toEqual(['young']);
  });

  it('never purges a record younger than the worker\'s retention, whatever a starter asks (olderThanMs: 0)', async () => {
    // A tombstone younger than the retention is what stops a late step from committing after its
    // compensation: a purge run started by any Temporal client may not take it.
    const scope = uniqueId('purge-floor');
    await withIdempotency(pool, { scope, key: 'young', payload: 'young' }, async () => 'young');
    await tombstoneIdempotencyKey(pool, { scope, key: 'tombstoned', payload: 'tombstoned' });
    await pool.query(`UPDATE idempotency_store SET updated_at = now() - interval '10 minutes' WHERE scope = $1`, [scope]);

    const run = await h.client.temporal.workflow.execute('purgeIdempotencyStore', {
      taskQueue: h.config.temporal.taskQueue,
      workflowId: uniqueId('purge-everything'),
      args: [{ olderThanMs: 0, batchSize: 1000, maxBatches: 10 }],
    });

    expect(run).toMatchObject({ batches: 1 });
    const { rows } = await pool.query<{ key: string }>('SELECT key FROM idempotency_store WHERE scope = $1 ORDER BY key', [scope]);
    expect(rows.map((r) => r.key)).toEqual(['tombstoned', 'young']);
  });

  it('keeps every record of a saga still running, however old, and purges past them the records of sagas that ended', async () => {
    // A saga waiting in NEEDS_ATTENTION (its stock short, its refund refused) for longer than the
    // retention: a redrive needs its records (the charge's, the tombstone of the stock it never took).
    const sku = uniqueId('purge-sku');
    await pool.query('INSERT INTO stock (sku, available) VALUES ($1, 1)', [sku]);
    const waiting = await h.client.start('order', order({ payment: { card: REFUND_REFUSED_CARD }, items: [{ sku, quantity: 5, priceCents: 100 }] }));
    const ended = await h.client.start('order', order());
    try {
      await eventually(() => h.client.status(waiting.workflowId), (s) => s.state.phase === 'NEEDS_ATTENTION', 'the saga to wait for a redrive');
      expect((await h.client.result(ended.workflowId)).outcome).toBe('COMPLETED');
      const recordsOf = async (sagaKey: string) =>
        (await pool.query<{ key: string }>('SELECT key FROM idempotency_store WHERE key LIKE $1 ORDER BY key', [`${sagaKey}:%`])).rows.map((r) => r.key);
      const kept = await recordsOf(waiting.workflowId);
      expect(kept.length).toBeGreaterThanOrEqual(3);
      expect(await recordsOf(ended.workflowId)).toHaveLength(2);
      // The waiting saga's records the oldest of all, older than the retention; the ended saga's past it too.
      const retention = h.config.idempotencyRetentionMs / 1000;
      const age = (sagaKey: string, seconds: number) =>
        pool.query(`UPDATE idempotency_store SET updated_at = now() - $2::float8 * interval '1 second' WHERE key LIKE $1`, [`${sagaKey}:%`, seconds]);
      await age(waiting.workflowId, retention + 100 * 365 * 24 * 3600);
      await age(ended.workflowId, retention + 3600);

      // Batches of 1: a purge that stopped at the first record it keeps would never reach the ended saga's.
      await h.client.temporal.workflow.execute('purgeIdempotencyStore', {
        taskQueue: h.config.temporal.taskQueue,
        workflowId: uniqueId('purge-past-running'),
        args: [{ olderThanMs: h.config.idempotencyRetentionMs, batchSize: 1, maxBatches: 1000 }],
      });

      expect(await recordsOf(waiting.workflowId)).toEqual(kept);
      expect(await recordsOf(ended.workflowId)).toEqual([]);
    } finally {
      await h.client.temporal.workflow.getHandle(waiting.workflowId).terminate('test over').catch(() => undefined);
    }
  });

  it('has one owner: a worker leaves a schedule made with another retention as it is, saga setup sets it', async () => {
    const shorter = { ...h.config, idempotencyRetentionMs: h.config.idempotencyRetentionMs - 1_800_000 };
    await ensurePurgeSchedule(h.client.temporal, h.config);
    const schedule = h.client.temporal.schedule.getHandle(purgeScheduleId(h.config.temporal.taskQueue));

    expect((await ensurePurgeSchedule(h.client.temporal, shorter, { update: false })).action).toBe('differs');
    expect((await schedule.describe()).action).toMatchObject({ args: [{ olderThanMs: h.config.idempotencyRetentionMs }] });
    expect((await ensurePurgeSchedule(h.client.temporal, shorter)).action).toBe('updated');
    expect((await schedule.describe()).action).toMatchObject({ args: [{ olderThanMs: shorter.idempotencyRetentionMs }] });
  });
});

/** Resolves once some session of this database waits for a lock while claiming an idempotency key. */
async function untilAClaimWaits(observer: pg.Pool): Promise<void> {
  const { rows } = await observer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  for (let i = 0; i < 2000; i++) {
    const waiting = await observer.query(
      `SELECT 1 FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> $1 AND query LIKE 'INSERT INTO idempotency_store%'`,
      [rows[0]!.pid],
    );
    if (waiting.rowCount) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('no claim of an idempotency key ever waited for a lock');
}
