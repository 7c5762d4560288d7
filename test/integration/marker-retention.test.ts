/**
 * Marker retention (ENTITY_EXISTS_TTL_MS): the `entity_exists` marker ends after its TTL, and a
 * duplicate that comes later is still answered DUPLICATE, by the PostgreSQL truth check, which writes
 * the marker again (with the TTL). Redis forgetting is never a second entity.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';

import { END_REPORTED_TTL_MS } from '../../src/activities/observe';
import { intentKeys } from '../../src/rms';

import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';
import { ordersTable, DECLINED_CARD } from '../fixtures/orders';

let h: SagaHarness;
beforeAll(async () => {
  h = await startHarness('marker retention', { env: { ENTITY_EXISTS_TTL_MS: '1500' } });
});
afterAll(async () => {
  await h?.stop();
});

it('lets the marker end after ENTITY_EXISTS_TTL_MS, then answers a duplicate from PostgreSQL and marks it again', async () => {
  const cart = order();
  const first = await h.client.start('order', cart);
  expect((await h.client.result(first.workflowId)).outcome).toBe('COMPLETED');
  const marker = intentKeys(h.config.redis.keyPrefix, first.intentKey).entityExists;
  const ttl = await h.redis.pttl(marker);
  expect(ttl).toBeGreaterThan(0);
  expect(ttl).toBeLessThanOrEqual(1500);

  await eventually(() => h.rms.inspect(first.intentKey), (i) => !i.exists, 'the marker to end', 10_000);
  const again = await h.client.start('order', cart);

  expect(again).toMatchObject({ started: false, reservation: { status: 'DUPLICATE' } });
  const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM orders WHERE intent_key = $1', [first.intentKey]);
  expect(rows[0]).toEqual({ n: 1 });
  expect(await ordersTable.find(h.pool, first.intentKey)).toMatchObject({ status: 'COMPLETED' });
  // Repaired with the TTL again: the marker never outlives its retention.
  const repaired = await h.redis.pttl(marker);
  expect(repaired).toBeGreaterThan(0);
  expect(repaired).toBeLessThanOrEqual(1500);
  // And no lease left behind by the DUPLICATE answer.
  expect((await h.rms.inspect(first.intentKey)).holder).toBeUndefined();
});

it('leaves no key in Redis once the retention has passed, for completed and compensated sagas alike', async () => {
  const completed = await h.client.start('order', order());
  const compensated = await h.client.start('order', order({ payment: { card: DECLINED_CARD } }));
  expect((await h.client.result(completed.workflowId)).outcome).toBe('COMPLETED');
  expect((await h.client.result(compensated.workflowId)).outcome).toBe('COMPENSATED');
  // While it lasts, every key the sagas left has an end (the marker, the tombstone).
  const left = await keysUnder(h.config.redis.keyPrefix);
  expect(left.length).toBeGreaterThan(0);
  for (const key of left) expect(await h.redis.pttl(key)).toBeGreaterThan(0);

  // The intents' keys end with the retention. The workers' marks of each saga's reported end
  // (`saga-ended:`, so that an end reported again after a worker died is not counted twice) end on
  // their own, shorter clock: within END_REPORTED_TTL_MS. The compensated saga's record of its end
  // (its key's answer, which holds for the key's retention) ends with IDEMPOTENCY_RETENTION_MS.
  const endMarks = (keys: string[]) => keys.filter((key) => key.startsWith(`${h.config.redis.keyPrefix}saga-ended:`));
  const marks = [completed, compensated].map((saga) => `${h.config.redis.keyPrefix}saga-ended:{${saga.runId}}`);
  expect(endMarks(left)).toEqual(expect.arrayContaining(marks));
  for (const key of endMarks(left)) expect(await h.redis.pttl(key)).toBeLessThanOrEqual(END_REPORTED_TTL_MS);
  const ended = intentKeys(h.config.redis.keyPrefix, compensated.intentKey).endedSessions;
  expect(left).toContain(ended);
  expect(await h.redis.pttl(ended)).toBeLessThanOrEqual(h.config.idempotencyRetentionMs);
  expect(left).not.toContain(intentKeys(h.config.redis.keyPrefix, completed.intentKey).endedSessions);
  const lasting = (keys: string[]) => endMarks(keys).length + (keys.includes(ended) ? 1 : 0);
  await eventually(() => keysUnder(h.config.redis.keyPrefix), (keys) => keys.length === lasting(keys), 'every intent key of the run to end', 10_000);
});

it('gives the tombstone an end when the saga compensates after its marker has ended', async () => {
  // The charge takes longer than the marker's retention, then the card is declined.
  const started = await h.client.start('order', order({ payment: { card: DECLINED_CARD }, simulate: { stepDelayMs: 3000 } }));
  const { entityExists } = intentKeys(h.config.redis.keyPrefix, started.intentKey);

  expect((await h.client.result(started.workflowId)).outcome).toBe('COMPENSATED');

  // The compensation freed the intent with a tombstone (a late finalise of this saga must not mark
  // it again), and the tombstone lives as long as a marker would, not for ever.
  expect(await h.redis.get(entityExists)).toMatch(/^\{freed\}:\d+$/);
  const ttl = await h.redis.pttl(entityExists);
  expect(ttl).toBeGreaterThan(0);
  expect(ttl).toBeLessThanOrEqual(1500);
});

/** The run's keys (its own prefix; a test database's few keys, so KEYS is fine here). */
function keysUnder(prefix: string): Promise<string[]> {
  return h.redis.keys(`${prefix}*`);
}
