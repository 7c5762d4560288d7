/**
 * The secrets behind every keyed digest and every encrypted payload are handed to node:crypto as
 * KeyObjects made once (src/secret-key.ts), not as bytes per call: on Node 24 bytes cost each HMAC
 * two caught exceptions. What users rely on is that nothing they can see changes: the digests are
 * those earlier releases wrote (a retry after an upgrade must match its saga's request hash, a
 * limit counter its caller), and a key always follows the bytes of its secret, even one changed in
 * place.
 */
import { describe, expect, it } from 'vitest';
import { keyedRequestHash } from '../../src/db/canonical-json';
import { intentKey, scopeValueDigest } from '../../src/rms';
import { reservationMac } from '../../src/sagas';
import { secretKeyOf } from '../../src/secret-key';

const SECRET = Buffer.alloc(32, 7);
const INTENT = { cart: [1, 2], customer: 'c-1' };

describe('the keyed digests', () => {
  it('are those the earlier releases wrote', () => {
    expect(scopeValueDigest('customer-1', SECRET)).toBe('UOuoJxGmDR1RtqmA_5lAlQ');
    expect(keyedRequestHash({ type: 'order', payload: { customer: 'c-1', items: [{ sku: 'a', quantity: 2 }] } }, SECRET)).toBe(
      '4040d41bde5fcd7b4f915222c4c919e5a82f3c3df69c8bd3eace92b459c7d69c',
    );
    const taken = { sessionId: 's'.repeat(22), fencingToken: '7', expiresAt: 1_700_000_000_000 };
    expect(reservationMac(taken, { workflowId: 'order-k1', requestHash: 'abc' }, SECRET)).toBe('803bf4d08f091ac43b55ae8301b12e31670dd63d42a2b741bc819d95cb77073a');
  });
});

describe('secretKeyOf', () => {
  it('makes one KeyObject per secret, of its bytes, and the same for every copy of them', () => {
    const secret = new Uint8Array(SECRET);
    const key = secretKeyOf(secret);

    expect(secretKeyOf(secret)).toBe(key);
    expect(key.type).toBe('secret');
    expect(key.export().equals(SECRET)).toBe(true);
    expect(intentKey('order', INTENT, secret)).toBe(intentKey('order', INTENT, Buffer.from(SECRET)));
  });

  it('follows a secret changed in place: never a key of bytes it no longer holds', () => {
    const secret = Buffer.from(SECRET);
    const before = intentKey('order', INTENT, secret);
    const keyBefore = secretKeyOf(secret);

    secret[0] = secret[0]! ^ 0xff;

    expect(secretKeyOf(secret)).not.toBe(keyBefore);
    expect(secretKeyOf(secret).export().equals(secret)).toBe(true);
    expect(intentKey('order', INTENT, secret)).not.toBe(before);
    expect(intentKey('order', INTENT, secret)).toBe(intentKey('order', INTENT, Buffer.from(secret)));
    expect(scopeValueDigest('customer-1', secret)).toBe(scopeValueDigest('customer-1', Buffer.from(secret)));
  });

  it('derives the request hash\'s key from the bytes a secret holds now, not those it held at first use', () => {
    const secret = Buffer.from(SECRET);
    const request = { type: 'order', payload: { customer: 'c-1' } };
    const before = keyedRequestHash(request, secret);

    secret[0] = secret[0]! ^ 0xff;

    expect(keyedRequestHash(request, secret)).not.toBe(before);
    expect(keyedRequestHash(request, secret)).toBe(keyedRequestHash(request, Buffer.from(secret)));
  });
});
