/**
 * The Redis keys of an intent and of a caller's limit counters are the same in every release: a
 * process of the next version, rolled out beside this one, must find the leases and markers this
 * one wrote, or both could answer SUCCESS for one intent. Pinned by known values, and by the
 * definition (base64url of the first 96 bits of the SHA-256) over many intents.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { intentKey } from '../../src/rms';
import { intentKeys, intentTag, limitTag } from '../../src/rms/keys';
import { seededRandom } from '../helpers/seeded-random';

const SECRET = Buffer.alloc(32, 7);

/** The definition, written out with Buffers. */
const first96Bits = (text: string) => createHash('sha256').update(text, 'utf8').digest().subarray(0, 12).toString('base64url');

describe('the Redis keys of an intent', () => {
  it('are those the earlier releases wrote', () => {
    const intent = intentKey('order', { cart: [1, 2], customer: 'c-1' }, SECRET);

    expect(intent).toBe('order:aGnfsPmcZnbB21IqBJC92jjf7786Yj_lV2c7ZLFdOss');
    expect(intentKeys('rs:', intent)).toEqual({
      processing: 'rs:p{l4PDMMYKO5oZyXEn}',
      entityExists: 'rs:e{l4PDMMYKO5oZyXEn}',
      endedSessions: 'rs:d{l4PDMMYKO5oZyXEn}',
    });
    expect(limitTag('order', 'app')).toBe('2lHG3CRiKqJYYOOK');
  });

  it('tag each intent and caller with base64url of the first 96 bits of its SHA-256', () => {
    const random = seededRandom(20261202);
    for (let n = 0; n < 5_000; n++) {
      const intent = intentKey(`scope${n % 7}`, { n, r: random() }, SECRET);
      expect(intentTag(intent)).toBe(first96Bits(intent));
      const caller = `caller-${random().toString(36)}`;
      expect(limitTag('order', caller)).toBe(first96Bits(`limits\u0000order\u0000${caller}`));
    }
  });
});
