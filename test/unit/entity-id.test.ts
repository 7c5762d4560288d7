import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeEntityId, encodeEntityId, ENTITY_ID_PATTERN } from '../../src/sagas';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

const other = createHash('sha256').update('another deployment').digest();

describe('entity ids: what callers are handed for a row', () => {
  it('names the row back, and tells a caller nothing of its number or of its neighbours', () => {
    const ids = ['1', '2', '3', '9223372036854775807'].map((row) => encodeEntityId(TEST_INTENT_SECRET, 'orders', row));

    expect(ids.map((id) => decodeEntityId(TEST_INTENT_SECRET, 'orders', id))).toEqual(['1', '2', '3', '9223372036854775807']);
    for (const id of ids) {
      expect(id).toMatch(ENTITY_ID_PATTERN);
      expect(id).not.toMatch(/^\d+$/);
    }
    // Neighbouring rows share no prefix a caller could count along.
    expect(new Set(ids.map((id) => id.slice(0, 4))).size).toBe(ids.length);
    expect(encodeEntityId(TEST_INTENT_SECRET, 'orders', '2')).toBe(ids[1]);
  });

  it('names no row for an altered or made-up id, another table’s, or another secret’s', () => {
    const id = encodeEntityId(TEST_INTENT_SECRET, 'orders', '42');
    const altered = [...id].map((c, i) => (i === 5 ? (c === 'A' ? 'B' : 'A') : c)).join('');
    // The last character carries four spare bits: one that sets them is no id this module wrote.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const spareBits = id.slice(0, 21) + alphabet[alphabet.indexOf(id[21]!) ^ 1];

    expect(decodeEntityId(TEST_INTENT_SECRET, 'orders', altered)).toBeUndefined();
    expect(decodeEntityId(TEST_INTENT_SECRET, 'orders', spareBits)).toBeUndefined();
    expect(decodeEntityId(TEST_INTENT_SECRET, 'orders', 'A'.repeat(22))).toBeUndefined();
    expect(decodeEntityId(TEST_INTENT_SECRET, 'trips', id)).toBeUndefined();
    expect(decodeEntityId(other, 'orders', id)).toBeUndefined();
    for (const junk of ['', '0', '-1', '99999999999999999999', 'x'.repeat(23), 'a b'.repeat(8)]) {
      expect(decodeEntityId(TEST_INTENT_SECRET, 'orders', junk)).toBeUndefined();
    }
  });

  it('takes a row id, as earlier versions handed out, only for a table that opts in', () => {
    expect(decodeEntityId(TEST_INTENT_SECRET, 'orders', '42', { numericIds: true })).toBe('42');
    expect(decodeEntityId(TEST_INTENT_SECRET, 'orders', '42')).toBeUndefined();
    expect('42').toMatch(ENTITY_ID_PATTERN);
  });
});
