import { createHash, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { INTENT_KEY_PATTERN, MAX_CANONICAL_JSON_BYTES, RmsValidationError, canonicalJson, intentKey } from '../../src/rms';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

describe('canonicalJson', () => {
  it('sorts object keys at every level and writes no whitespace', () => {
    const data = { b: 1, a: { d: [3, { z: true, y: null }], c: 'x' } };

    const json = canonicalJson(data);

    expect(json).toBe('{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}');
  });

  it('writes numbers and strings as JSON.stringify does', () => {
    const data = { n: [0, -0, 1.5, 1e21, -2e-7], s: 'quote " backslash \\ newline \n lone \uD800 emoji 🧨' };

    const json = canonicalJson(data);

    expect(JSON.parse(json)).toEqual({ ...data, n: [0, 0, 1.5, 1e21, -2e-7] });
    expect(json).toContain('"n":[0,0,1.5,1e+21,-2e-7]');
    expect(json).toContain('lone \\ud800');
  });

  it('accepts objects without a prototype and shared (acyclic) references', () => {
    const shared = { v: 1 };
    const bare = Object.assign(Object.create(null) as object, { k: shared });

    const json = canonicalJson({ one: shared, two: shared, bare });

    expect(json).toBe('{"bare":{"k":{"v":1}},"one":{"v":1},"two":{"v":1}}');
  });

  const cyclicObject: Record<string, unknown> = {};
  cyclicObject.self = cyclicObject;
  const cyclicArray: unknown[] = [];
  cyclicArray.push([cyclicArray]);
  class Order {
    id = 1;
  }

  it.each([
    ['undefined', undefined],
    ['undefined in an object', { a: undefined }],
    ['undefined in an array', [1, undefined]],
    ['a hole in a sparse array', [1, , 3]], // eslint-disable-line no-sparse-arrays
    ['a function', { f: () => 1 }],
    ['a symbol', Symbol('s')],
    ['a symbol key', { [Symbol('k')]: 1 }],
    ['a BigInt', { n: 1n }],
    ['NaN', NaN],
    ['Infinity', [Infinity]],
    ['-Infinity', { n: -Infinity }],
    ['a cyclic object', cyclicObject],
    ['a cyclic array', cyclicArray],
    ['a Date', { at: new Date(0) }],
    ['a Map', new Map([['a', 1]])],
    ['a Set', new Set([1])],
    ['a class instance', new Order()],
    ['a Buffer', Buffer.from('x')],
  ])('refuses %s', (_label, data) => {
    const act = () => canonicalJson(data);

    expect(act).toThrow(RmsValidationError);
    expect(catchError(act)).toMatchObject({ field: 'data' });
  });

  it('names the path of the refused value without echoing the data', () => {
    const error = catchError(() => canonicalJson({ customer: { email: 'someone@example.com', tags: ['a', undefined] } }));

    expect((error as Error).message).toContain('$.customer.tags[1]');
    expect((error as Error).message).not.toContain('someone@example.com');
  });

  it('accepts exactly 64 KiB of canonical JSON and refuses one byte more', () => {
    const fits = 'x'.repeat(MAX_CANONICAL_JSON_BYTES - 2); // plus two quotes

    const accepted = canonicalJson(fits);
    const refused = catchError(() => canonicalJson(`${fits}x`));

    expect(Buffer.byteLength(accepted)).toBe(MAX_CANONICAL_JSON_BYTES);
    expect(refused).toBeInstanceOf(RmsValidationError);
  });

  it('measures the limit in UTF-8 bytes, not in characters', () => {
    const euros = '€'.repeat(21_845); // 21,845 characters, 65,535 bytes

    const error = catchError(() => canonicalJson(euros));

    expect(error).toBeInstanceOf(RmsValidationError);
  });

  it('refuses a 1 MiB string and many small values adding up past the limit', () => {
    const huge = catchError(() => canonicalJson({ s: 'x'.repeat(1024 * 1024) }));
    const many = catchError(() => canonicalJson(Array.from({ length: 20_000 }, (_, i) => i)));

    expect(huge).toBeInstanceOf(RmsValidationError);
    expect(many).toBeInstanceOf(RmsValidationError);
  });

  it('refuses nesting deeper than 64 levels without exhausting the stack', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    let sixtyFour: unknown = 'leaf';
    for (let i = 0; i < 64; i++) sixtyFour = [sixtyFour];

    const refused = catchError(() => canonicalJson(deep));
    const accepted = canonicalJson(sixtyFour);

    expect(refused).toBeInstanceOf(RmsValidationError);
    expect(accepted).toMatch(/^\[{64}"leaf"\]{64}$/);
  });
});

describe('intentKey', () => {
  it('is the scope and the base64url HMAC-SHA-256 of the canonical JSON under the secret', () => {
    const data = { sku: 'A-1', customer: 42 };
    const expected = createHmac('sha256', TEST_INTENT_SECRET).update('{"customer":42,"sku":"A-1"}').digest('base64url');

    const key = intentKey('order', data, TEST_INTENT_SECRET);

    expect(key).toBe(`order:${expected}`);
    expect(key).toMatch(INTENT_KEY_PATTERN);
  });

  it('cannot be found from a dictionary of intents without the secret: another secret, or none, gives another key', () => {
    const data = { customer: 'ada@example.com', cart: [{ sku: 'widget', quantity: 2 }] };
    const unkeyed = `order:${createHash('sha256').update(canonicalJson(data)).digest('base64url')}`;

    const key = intentKey('order', data, TEST_INTENT_SECRET);

    expect(key).not.toBe(unkeyed);
    expect(key).not.toBe(intentKey('order', data, randomBytes(32)));
  });

  it('refuses a secret shorter than 32 bytes', () => {
    const error = catchError(() => intentKey('order', { id: 1 }, randomBytes(31)));

    expect(error).toBeInstanceOf(RmsValidationError);
    expect(error).toMatchObject({ field: 'secret' });
  });

  it('gives equal data in any key order the same key', () => {
    const one = intentKey('order', { a: 1, b: { c: [1, 2], d: 'x' } }, TEST_INTENT_SECRET);
    const two = intentKey('order', { b: { d: 'x', c: [1, 2] }, a: 1 }, TEST_INTENT_SECRET);

    expect(one).toBe(two);
  });

  it.each([
    ['arrays in another order', [1, 2], [2, 1]],
    ['a number and its string', { id: 1 }, { id: '1' }],
    ['null and an empty object', null, {}],
    ['NFC and NFD spellings', { name: 'caf\u00e9' }, { name: 'cafe\u0301' }],
    ['two different lone surrogates', '\uD800', '\uD801'],
  ])('tells apart %s', (_label, one, two) => {
    expect(intentKey('order', one, TEST_INTENT_SECRET)).not.toBe(intentKey('order', two, TEST_INTENT_SECRET));
  });

  it('tells scopes apart', () => {
    expect(intentKey('order', { id: 1 }, TEST_INTENT_SECRET)).not.toBe(intentKey('refund', { id: 1 }, TEST_INTENT_SECRET));
  });

  it('hashes hostile data into a key of the safe shape', () => {
    const hostile = { 'x}{y': '{\n}', ' ': '\u0000', emoji: '🧨', rtl: '\u202E' };

    const key = intentKey('order', hostile, TEST_INTENT_SECRET);

    expect(key).toMatch(INTENT_KEY_PATTERN);
  });

  it.each(['a', '0', 'order_v2-eu', 'a'.repeat(64)])('accepts the scope %j', (scope) => {
    expect(intentKey(scope, 1, TEST_INTENT_SECRET)).toMatch(INTENT_KEY_PATTERN);
  });

  it.each(['', 'Order', '-order', '_order', 'a'.repeat(65), 'order items', 'order:v2', 'order{x}', 'order\n', 'ördér'])(
    'refuses the scope %j',
    (scope) => {
      const error = catchError(() => intentKey(scope, 1, TEST_INTENT_SECRET));

      expect(error).toBeInstanceOf(RmsValidationError);
      expect(error).toMatchObject({ field: 'scope' });
    },
  );
});

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return new Error('returned, but a throw was expected');
}
