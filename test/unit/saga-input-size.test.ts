/**
 * The size and depth checks of a saga's input (parseSagaData): a payload whose JSON is longer than
 * MAX_PAYLOAD_BYTES is refused with its exact size, one nested too deep with where, and what
 * JSON.stringify cannot write fails as it does, whether or not the cheap bound of plain data lets
 * the exact measure be skipped.
 */
import { describe, expect, it } from 'vitest';
import { MAX_PAYLOAD_BYTES, prepareSaga } from '../../src/sagas';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { blobTypes } from '../fixtures/blob-saga';

const timings = { leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000, compensationAttempts: 5 };
const prepare = (data: unknown) => prepareSaga('blob', data, { timings, intentSecret: TEST_INTENT_SECRET, types: blobTypes });
const bytesOf = (data: unknown) => Buffer.byteLength(JSON.stringify(data), 'utf8');

/** `{ body: <string> }` whose JSON is exactly `bytes` long, the string made of `unit` (1 byte of JSON each) padded with 'x'. */
function blobOf(bytes: number, unit: string): { body: string } {
  const frame = bytesOf({ body: '' });
  const perUnit = bytesOf(unit) - 2;
  const units = Math.floor((bytes - frame) / perUnit);
  return { body: unit.repeat(units) + 'x'.repeat(bytes - frame - units * perUnit) };
}

describe('the size of a payload', () => {
  it.each([
    ['ASCII', 'a'],
    ['escaped control characters (6 bytes of JSON each)', '\u0001'],
    ['quotes (2 bytes of JSON each)', '"'],
    ['text beyond ASCII (2 and 3 bytes each)', 'é€'],
    ['surrogate pairs (4 bytes each)', '😀'],
  ])('of %s is accepted up to the limit and refused past it with its exact size', (_name, unit) => {
    const atLimit = blobOf(MAX_PAYLOAD_BYTES, unit);
    const past = blobOf(MAX_PAYLOAD_BYTES + 1, unit);

    expect(bytesOf(atLimit)).toBe(MAX_PAYLOAD_BYTES);
    expect(prepare(atLimit).payload).toEqual(atLimit);
    expect(() => prepare(past)).toThrow(`payload is ${bytesOf(past)} bytes; at most ${MAX_PAYLOAD_BYTES} are accepted`);
  });

  it('counts what JSON.stringify writes for values it changes or leaves out: toJSON, undefined, non-finite numbers', () => {
    const dates = { body: Array.from({ length: 2800 }, () => new Date(0)) };
    const holes = { body: Array.from({ length: 14_000 }, () => undefined) };

    expect(() => prepare(dates)).toThrow(`payload is ${bytesOf(dates)} bytes`);
    expect(() => prepare(holes)).toThrow(`payload is ${bytesOf(holes)} bytes`);
    expect(prepare({ body: { gone: undefined, n: Number.NaN } }).payload).toEqual({ body: { gone: undefined, n: Number.NaN } });
  });

  it('fails on a BigInt as JSON.stringify does, before the schema', () => {
    expect(() => prepare({ body: [1, 2n] })).toThrow(TypeError);
  });

  it('names too deep nesting before a size past the limit', () => {
    let deep: unknown = 'x'.repeat(MAX_PAYLOAD_BYTES);
    for (let i = 0; i < 70; i++) deep = { a: deep };

    expect(() => prepare({ body: deep })).toThrow(/^invalid blob input at body(\.a)+: nested deeper than 64 levels$/);
  });

  it('refuses a cycle as too deep', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;

    expect(() => prepare({ body: cyclic })).toThrow(/^invalid blob input at body\.self\.self.*: nested deeper than 64 levels$/);
  });
});
