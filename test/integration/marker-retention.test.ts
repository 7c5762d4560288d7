/**
 * Marker retention (ENTITY_EXISTS_TTL_MS): the `entity_exists` marker ends after its TTL, and a
 * duplicate that comes later is still answered DUPLICATE, by the PostgreSQL truth check, which writes
 * the marker again (with the TTL). Redis forgetting is never a second entity.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ordersTable } from '../../src/db';
import { intentKeys } from '../../src/rms';
import { eventually, order, startHarness, type SagaHarness } from '../helpers/saga-harness';

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
