/**
 * The one-walk canonical JSON of intents already in NFC (canonicalJsonIfNfc, intentKeyIfNfc) against
 * the full way the gate took before it (normalise, then canonicalJson): byte for byte the same
 * wherever the fast path answers, on many generated inputs, and an answer for every plain NFC input.
 */
import { describe, expect, it } from 'vitest';
import { MAX_CANONICAL_JSON_BYTES, MAX_CANONICAL_JSON_DEPTH, canonicalJson, canonicalJsonIfNfc, intentKey, intentKeyIfNfc } from '../../src/rms';
import { sortedKeys } from '../../src/rms/intent-key';
import { normalizeText } from '../../src/sagas';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { seededRandom } from '../helpers/seeded-random';


/** Pieces of text: ASCII, escapes, Latin-1, NFD and NFC spellings, singletons NFC replaces, CJK, emoji, controls, lone surrogates. */
const PIECES = ['a', 'Zoë', 'x y', '"', '\\', '\n', '\t', '\u0001', '\u007f', 'é', 'e\u0301', 'A\u030a', '\u212b', '\u00c5', 'ﬁ', '한', '\u1112\u1161\u11ab', '日本', '🧨', '\ud800', '\udc00', '\u0000', '\u0300', 'ǅ', '\u02ff', '\u0344', '\u0958', '\uff21'];

function text(next: () => number, nfc: boolean): string {
  let out = '';
  const n = Math.floor(next() * 4);
  for (let i = 0; i < n; i++) out += PIECES[Math.floor(next() * PIECES.length)]!;
  return nfc ? out.normalize('NFC') : out;
}

const NUMBERS = [0, -0, 1, -1, 1.5, 1e21, 1e-7, -2e-7, 123456789012345680000, 0.000001234567890123456, Number.MAX_SAFE_INTEGER, Number.MIN_VALUE, -Number.MAX_VALUE];

/** A JSON-like value; with `nfc`, every string and key in NFC and nothing but plain JSON. */
function value(next: () => number, depth: number, nfc: boolean): unknown {
  const pick = next();
  if (depth > 4 || pick < 0.35) {
    const kind = Math.floor(next() * 5);
    if (kind === 0) return text(next, nfc);
    if (kind === 1) return NUMBERS[Math.floor(next() * NUMBERS.length)]!;
    if (kind === 2) return next() < 0.5;
    if (kind === 3) return null;
    return nfc ? text(next, true) : [undefined, Number.NaN, Infinity, 10n, Symbol('s'), () => 1, new Date(0)][Math.floor(next() * 7)];
  }
  if (pick < 0.65) return Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth + 1, nfc));
  const record: Record<string, unknown> = nfc || next() < 0.9 ? {} : (Object.create(null) as Record<string, unknown>);
  const n = Math.floor(next() * 4);
  for (let i = 0; i < n; i++) record[text(next, nfc) || `k${i}`] = value(next, depth + 1, nfc);
  return record;
}

/** What the gate computed before the fast path: the canonical JSON of the NFC normalisation, or the error. */
function fullWay(data: unknown): string | Error {
  try {
    return canonicalJson(normalizeText(data).value);
  } catch (err) {
    return err as Error;
  }
}

describe('canonicalJsonIfNfc', () => {
  it('is, wherever it answers, byte for byte the canonical JSON of the data and of its NFC normalisation (20,000 generated inputs, NFC or not)', () => {
    const next = seededRandom(42);
    let answered = 0;
    for (let i = 0; i < 20_000; i++) {
      const data = value(next, 0, next() < 0.5);

      const fast = canonicalJsonIfNfc(data);

      if (fast === undefined) continue;
      answered++;
      expect(fast, `input ${i}`).toBe(canonicalJson(data));
      expect(fast, `input ${i}`).toBe(fullWay(data));
    }
    expect(answered).toBeGreaterThan(10_000);
  });

  it('answers for every plain input whose strings and keys are in NFC (5,000 generated inputs)', () => {
    const next = seededRandom(7);
    for (let i = 0; i < 5_000; i++) {
      const data = value(next, 0, true);

      expect(canonicalJsonIfNfc(data), `input ${i}: ${canonicalJson(data)}`).toBe(canonicalJson(data));
    }
  });

  it('leaves to the full way text not in NFC, in values and in keys, nested or not', () => {
    for (const data of ['e\u0301', { name: 'A\u030a' }, { ['e\u0301']: 1 }, [{ a: ['\u212b'] }], { deep: { deeper: [1, 'ﬁ', '\u1112\u1161\u11ab'] } }]) {
      expect(canonicalJsonIfNfc(data)).toBeUndefined();
    }
  });

  it('leaves to the full way what it must refuse or name: undefined, holes, non-finite numbers, BigInt, functions, symbols, non-plain objects, cycles, too deep, too long', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i <= MAX_CANONICAL_JSON_DEPTH; i++) deep = [deep];
    const refused: unknown[] = [
      undefined,
      { a: undefined },
      [1, , 2], // eslint-disable-line no-sparse-arrays -- a hole
      Number.NaN,
      { n: -Infinity },
      10n,
      () => 1,
      Symbol('s'),
      { [Symbol('k')]: 1, a: 1 },
      new Date(0),
      new Map(),
      Object.create(null),
      cyclic,
      deep,
      'x'.repeat(MAX_CANONICAL_JSON_BYTES),
      Array.from({ length: MAX_CANONICAL_JSON_BYTES / 2 }, () => 1),
      JSON.parse('{"__proto__": {"a": 1}}'),
    ];
    for (const data of refused) expect(canonicalJsonIfNfc(data)).toBeUndefined();
  });

  it('answers up to the limits, as canonicalJson does', () => {
    let deep: unknown = 1;
    for (let i = 0; i < MAX_CANONICAL_JSON_DEPTH; i++) deep = [deep];
    const long = 'é'.repeat((MAX_CANONICAL_JSON_BYTES - 2) / 2);

    expect(canonicalJsonIfNfc(deep)).toBe(canonicalJson(deep));
    expect(canonicalJsonIfNfc(long)).toBe(canonicalJson(long));
    expect(canonicalJsonIfNfc(`${long}x`)).toBeUndefined();
  });

  it('takes every text below U+0300 for NFC: each character, and each pair of them', () => {
    for (let a = 0; a < 0x300; a++) {
      const one = String.fromCharCode(a);
      expect(one.normalize('NFC')).toBe(one);
      for (let b = 0; b < 0x300; b += 7) {
        const two = one + String.fromCharCode(b);
        expect(two.normalize('NFC') === two, JSON.stringify(two)).toBe(true);
      }
    }
  });
});

describe('sortedKeys', () => {
  it("orders an object's keys as Object.keys(...).sort() does, by insertion up to 16 keys and by sort beyond (2,000 generated objects of 0 to 40 keys)", () => {
    const next = seededRandom(0x5e17);
    const sizes = new Set<number>();
    for (let n = 0; n < 2_000; n++) {
      const record: Record<string, unknown> = {};
      const count = Math.floor(next() * 41);
      for (let i = 0; i < count; i++) {
        // Text of every kind, and keys V8 keeps as array indexes (listed first, in numeric order).
        const key = next() < 0.2 ? String(Math.floor(next() * 1_000)) : text(next, false) || `k${i}`;
        record[key] = i;
      }
      const keys = Object.keys(record);
      sizes.add(keys.length);
      expect(sortedKeys(record)).toEqual([...keys].sort());
    }
    expect(Math.min(...sizes)).toBe(0);
    expect(Math.max(...sizes)).toBeGreaterThan(16);
  });
});

describe('intentKeyIfNfc', () => {
  it('gives the key the gate gave before (the NFC normalisation keyed), or leaves the intent to that way (5,000 generated inputs)', () => {
    const next = seededRandom(1234);
    for (let i = 0; i < 5_000; i++) {
      const data = value(next, 0, next() < 0.5);

      const fast = intentKeyIfNfc('order', data, TEST_INTENT_SECRET);

      if (fast !== undefined) expect(fast, `input ${i}`).toBe(intentKey('order', normalizeText(data).value, TEST_INTENT_SECRET));
    }
  });

  it('refuses a malformed scope or a short secret as intentKey does', () => {
    expect(() => intentKeyIfNfc('Bad Scope', { a: 1 }, TEST_INTENT_SECRET)).toThrow(/scope: must match/);
    expect(() => intentKeyIfNfc('order', { a: 1 }, new Uint8Array(8))).toThrow(/secret: must be at least 32 bytes/);
  });
});
