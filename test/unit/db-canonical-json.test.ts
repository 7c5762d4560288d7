import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, requestHash } from '../../src/db';
import { canonicalJson } from '../../src/db/canonical-json';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('canonicalJson', () => {
  it('sorts object keys recursively, keeps array order and writes no whitespace', () => {
    const value = { b: 1, a: [3, { z: null, y: 'x' }, 1], c: { e: true, d: false } };

    expect(canonicalJson(value)).toBe('{"a":[3,{"y":"x","z":null},1],"b":1,"c":{"d":false,"e":true}}');
  });

  it('sorts keys by UTF-16 code units, numeric-looking keys included', () => {
    expect(canonicalJson({ '10': 1, '9': 2, b: 3, B: 4, é: 5 })).toBe('{"10":1,"9":2,"B":4,"b":3,"é":5}');
  });

  it('follows JSON.stringify for what JSON cannot hold', () => {
    const value = { u: undefined, f: () => 1, n: NaN, i: -Infinity, d: new Date('2026-01-02T03:04:05.000Z'), a: [undefined, () => 1] };

    expect(canonicalJson(value)).toBe('{"a":[null,null],"d":"2026-01-02T03:04:05.000Z","i":null,"n":null}');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('parses back to what JSON.stringify would have written, for hostile strings too', () => {
    const value = { s: 'quote " backslash \\ ; \u0001 \u2028 🧪 e\u0301', nested: [{ k: [1.5, -2, 1e21, 1e-7] }] };

    expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it('refuses a bigint and a cycle', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;

    expect(() => canonicalJson({ token: 1n })).toThrow(InvalidArgumentError);
    expect(() => canonicalJson(cyclic)).toThrow(/circular/);
  });

  it('accepts the same object twice when it is not a cycle', () => {
    const shared = { x: 1 };

    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });
});

describe('requestHash', () => {
  it('is the SHA-256 hex of the canonical JSON', () => {
    expect(requestHash({ b: 1, a: 'x' })).toBe(sha256('{"a":"x","b":1}'));
  });

  it('is equal for payloads that differ only in key order', () => {
    expect(requestHash({ a: 1, b: { c: 2, d: [1, 2] } })).toBe(requestHash({ b: { d: [1, 2], c: 2 }, a: 1 }));
  });

  it('differs when a value, a key or the array order differs', () => {
    const base = requestHash({ a: [1, 2] });

    expect(requestHash({ a: [2, 1] })).not.toBe(base);
    expect(requestHash({ a: [1, 3] })).not.toBe(base);
    expect(requestHash({ b: [1, 2] })).not.toBe(base);
    expect(requestHash({ a: ['1', 2] })).not.toBe(base);
  });
});
