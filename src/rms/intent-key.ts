/**
 * Intent keys: what makes a created thing unique, as `<scope>:<base64url HMAC-SHA-256 of canonical
 * JSON>` under a secret. Raw intent data (often personal data) never becomes a Redis key; only its
 * keyed digest does, which a dictionary of customers and carts cannot reverse without the secret.
 */
import { createHmac } from 'node:crypto';
import { secretKeyOf } from '../secret-key';
import { RmsValidationError } from './errors';
import { SCOPE_PATTERN, preview } from './validation';

/** Largest canonical JSON accepted, in UTF-8 bytes (64 KiB). */
export const MAX_CANONICAL_JSON_BYTES = 64 * 1024;

/** Deepest nesting of arrays and objects accepted (keeps canonicalisation off the call-stack limit). */
export const MAX_CANONICAL_JSON_DEPTH = 64;

/**
 * The canonical JSON of `data`: object keys sorted (by UTF-16 code units, as `Array.prototype.sort`)
 * at every level, arrays in their order, no whitespace, numbers and strings as `JSON.stringify` writes
 * them. For I-JSON input this is the JSON Canonicalization Scheme (RFC 8785); lone surrogates, which
 * I-JSON excludes, are written escaped (`\ud800`), so they survive UTF-8 hashing without colliding.
 *
 * Only JSON values are accepted: `null`, booleans, finite numbers, strings, arrays and plain objects.
 * Everything JSON.stringify would drop or change silently is refused instead, so two different
 * inputs can never share a key by accident: `undefined` (also inside arrays and objects, and holes of
 * sparse arrays), functions, symbols (values and keys), BigInt, NaN and ±Infinity, cycles, and
 * non-plain objects (Date, Map, Set, class instances, buffers). Strings are not Unicode-normalised:
 * NFC and NFD spellings are different data.
 *
 * @throws RmsValidationError (field `data`) naming the path of the first refused value, or when the
 *   result exceeds {@link MAX_CANONICAL_JSON_BYTES} or nests deeper than {@link MAX_CANONICAL_JSON_DEPTH}.
 */
export function canonicalJson(data: unknown): string {
  const writer = new CanonicalWriter();
  writer.write(data, 0);
  return writer.result();
}

/** Fewest bytes of an intent secret: the HMAC's own key length (SHA-256 output). */
export const MIN_INTENT_SECRET_BYTES = 32;

/**
 * The intent key of `data` in `scope` under `secret`: `<scope>:<base64url HMAC-SHA-256(secret,
 * canonicalJson(data))>`. Equal data in any key order gives the same key; every process that
 * reserves or plans the same sagas (clients and workers) must hold the same secret.
 *
 * @throws RmsValidationError (field `scope`) when the scope does not match {@link SCOPE_PATTERN},
 *   (field `data`) when {@link canonicalJson} refuses the data, or (field `secret`) when the secret is
 *   shorter than {@link MIN_INTENT_SECRET_BYTES}.
 */
export function intentKey(scope: string, data: unknown, secret: Uint8Array): string {
  checkKeying(scope, secret);
  return keyed(scope, canonicalJson(data), secret);
}

/**
 * {@link intentKey} of `data` when {@link canonicalJsonIfNfc} answers for it (plain JSON data whose
 * every string and key is in NFC), in one walk of the data; undefined otherwise, and then nothing
 * is checked: the caller takes the full way (normalise, then {@link intentKey}), which says what it
 * refuses. Where it answers, the key is byte for byte the one {@link intentKey} gives.
 *
 * @throws RmsValidationError (field `scope` or `secret`) as {@link intentKey} does.
 */
export function intentKeyIfNfc(scope: string, data: unknown, secret: Uint8Array): string | undefined {
  const canonical = canonicalJsonIfNfc(data);
  if (canonical === undefined) return undefined;
  checkKeying(scope, secret);
  return keyed(scope, canonical, secret);
}

function checkKeying(scope: string, secret: Uint8Array): void {
  if (typeof scope !== 'string' || !SCOPE_PATTERN.test(scope)) {
    throw new RmsValidationError('scope', `must match ${String(SCOPE_PATTERN)} (got ${preview(scope)})`);
  }
  if (!(secret instanceof Uint8Array) || secret.length < MIN_INTENT_SECRET_BYTES) {
    throw new RmsValidationError('secret', `must be at least ${MIN_INTENT_SECRET_BYTES} bytes`);
  }
}

function keyed(scope: string, canonical: string, secret: Uint8Array): string {
  return `${scope}:${createHmac('sha256', secretKeyOf(secret)).update(canonical, 'utf8').digest('base64url')}`;
}

/**
 * Text made only of code units below U+0300 is in NFC: the first character that can combine with
 * the one before it (U+0300, the combining grave accent) and every character that NFC replaces
 * lie above; `normalize` is asked only about other text.
 */
const BELOW_COMBINING_MARKS = /^[^\u0300-\uffff]*$/;

/** Whether `text` is in Unicode Normalization Form C. */
function isNfc(text: string): boolean {
  return BELOW_COMBINING_MARKS.test(text) || text.normalize('NFC') === text;
}

/**
 * {@link canonicalJson} of `data`, in one walk without a path kept, when `data` is plain JSON data
 * whose every string and object key is already in Unicode Normalization Form C; undefined for
 * anything else, which the caller then normalises and canonicalises the full way. It answers only
 * for `null`, booleans, finite numbers, strings, arrays without holes or `undefined`, and objects
 * whose prototype is `Object.prototype` without symbol keys or a `__proto__` key, at most
 * {@link MAX_CANONICAL_JSON_DEPTH} deep and {@link MAX_CANONICAL_JSON_BYTES} long: for such data the
 * NFC normalisation is a copy of the same keys and values, so its canonical JSON is this one too.
 */
export function canonicalJsonIfNfc(data: unknown): string | undefined {
  const text = nfcJson(data, 0);
  // UTF-8 takes at most 3 bytes per UTF-16 code unit: only long text is measured.
  if (text === undefined || (text.length * 3 > MAX_CANONICAL_JSON_BYTES && Buffer.byteLength(text, 'utf8') > MAX_CANONICAL_JSON_BYTES)) return undefined;
  return text;
}

/** The canonical JSON of `value` at `depth` (see {@link canonicalJsonIfNfc}), or undefined. */
function nfcJson(value: unknown, depth: number): string | undefined {
  switch (typeof value) {
    case 'string':
      return isNfc(value) ? JSON.stringify(value) : undefined;
    case 'number':
      // JSON.stringify writes a finite number as String() does.
      return Number.isFinite(value) ? String(value) : undefined;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      if (depth >= MAX_CANONICAL_JSON_DEPTH) return undefined;
      return Array.isArray(value) ? nfcArray(value as unknown[], depth) : nfcObject(value, depth);
    default:
      return undefined;
  }
}

function nfcArray(value: unknown[], depth: number): string | undefined {
  let text = '[';
  for (let i = 0; i < value.length; i++) {
    const item = nfcJson(value[i], depth + 1);
    if (item === undefined || text.length > MAX_CANONICAL_JSON_BYTES) return undefined;
    text += i === 0 ? item : `,${item}`;
  }
  return `${text}]`;
}

function nfcObject(value: object, depth: number): string | undefined {
  if (Object.getPrototypeOf(value) !== Object.prototype || Object.getOwnPropertySymbols(value).length > 0) return undefined;
  const record = value as Record<string, unknown>;
  const keys = sortedKeys(record);
  let text = '{';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    // A copy made by assignment would set the prototype instead of a `__proto__` key.
    if (key === '__proto__' || !isNfc(key)) return undefined;
    const item = nfcJson(record[key], depth + 1);
    if (item === undefined || text.length > MAX_CANONICAL_JSON_BYTES) return undefined;
    text += `${i === 0 ? '' : ','}${JSON.stringify(key)}:${item}`;
  }
  return `${text}}`;
}

/** Objects with at most this many keys have them sorted by insertion, larger ones by `Array.prototype.sort`. */
const INSERTION_SORT_MAX_KEYS = 16;

/**
 * The own enumerable keys of `record` in the order `Object.keys(record).sort()` gives (UTF-16 code
 * units; keys are distinct), sorted in place by insertion when there are few. V8's sort makes a
 * work array of about 900 bytes however short its input: an intent's object or two of two keys
 * each cost an answer more garbage than the rest of its canonical JSON.
 */
export function sortedKeys(record: object): string[] {
  const keys = Object.keys(record);
  if (keys.length > INSERTION_SORT_MAX_KEYS) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    for (; j >= 0 && keys[j]! > key; j--) keys[j + 1] = keys[j]!;
    keys[j + 1] = key;
  }
  return keys;
}

/**
 * Builds canonical JSON piece by piece, refusing as soon as the size limit is passed. The path of a
 * value is kept as a stack of keys and spelt out only for a refusal: every gate answer keys its
 * intent, and names nobody reads cost it.
 */
class CanonicalWriter {
  private readonly parts: string[] = [];
  private bytes = 0;
  /** Objects and arrays on the current path: meeting one again is a cycle (shared subtrees are fine). */
  private readonly ancestors = new Set<object>();
  /** The keys and indexes from the root to the value being written. */
  private readonly path: (string | number)[] = [];

  result(): string {
    return this.parts.join('');
  }

  write(value: unknown, depth: number): void {
    switch (typeof value) {
      case 'string':
        this.emitString(value);
        return;
      case 'number':
        if (!Number.isFinite(value)) this.refuse(`${String(value)} is not a JSON number`);
        this.emit(JSON.stringify(value));
        return;
      case 'boolean':
        this.emit(value ? 'true' : 'false');
        return;
      case 'object':
        if (value === null) {
          this.emit('null');
          return;
        }
        this.writeContainer(value, depth);
        return;
      case 'undefined':
        this.refuse('undefined has no JSON form');
        return;
      default:
        // function, symbol, bigint
        this.refuse(`a ${typeof value} has no JSON form`);
    }
  }

  private writeContainer(value: object, depth: number): void {
    if (depth >= MAX_CANONICAL_JSON_DEPTH) this.refuse(`nests deeper than ${MAX_CANONICAL_JSON_DEPTH} levels`);
    if (this.ancestors.has(value)) this.refuse('is a cycle');
    this.ancestors.add(value);
    if (Array.isArray(value)) {
      this.emit('[');
      for (let i = 0; i < value.length; i++) {
        this.path.push(i);
        if (i > 0) this.emit(',');
        // A hole reads as undefined and is refused like an explicit undefined.
        this.write(value[i], depth + 1);
        this.path.pop();
      }
      this.emit(']');
    } else {
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        this.refuse(`a ${value.constructor?.name ?? 'non-plain'} object has no canonical JSON form; pass plain data`);
      }
      if (Object.getOwnPropertySymbols(value).length > 0) this.refuse('symbol keys have no JSON form');
      const record = value as Record<string, unknown>;
      const keys = sortedKeys(record);
      this.emit('{');
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        this.path.push(key);
        if (i > 0) this.emit(',');
        this.emitString(key);
        this.emit(':');
        this.write(record[key], depth + 1);
        this.path.pop();
      }
      this.emit('}');
    }
    this.ancestors.delete(value);
  }

  private emitString(value: string): void {
    // Every UTF-16 unit becomes at least one UTF-8 byte: refuse huge strings before escaping them.
    if (value.length > MAX_CANONICAL_JSON_BYTES) this.tooLarge();
    this.emit(JSON.stringify(value));
  }

  private emit(text: string): void {
    this.bytes += Buffer.byteLength(text, 'utf8');
    if (this.bytes > MAX_CANONICAL_JSON_BYTES) this.tooLarge();
    this.parts.push(text);
  }

  private tooLarge(): never {
    this.refuse(`canonical JSON exceeds ${MAX_CANONICAL_JSON_BYTES} bytes`);
  }

  /** Refuses the value being written, named by its path (`$.items[0].sku`). */
  private refuse(reason: string): never {
    const named = this.path.map((key) => (typeof key === 'number' ? `[${key}]` : /^[A-Za-z_$][\w$]{0,63}$/.test(key) ? `.${key}` : `[${preview(key)}]`));
    refuse(`$${named.join('')}`, reason);
  }
}

function refuse(path: string, reason: string): never {
  throw new RmsValidationError('data', `${path} ${reason}`);
}

/**
 * The digest a declared scope value (a customer id, a tenant) is known by in the Redis keys of its
 * limit counter: 128 bits of HMAC-SHA-256 under the intent secret, as 22 base64url characters.
 * Domain-separated from intent keys, so neither can stand for the other.
 */
export function scopeValueDigest(value: string, secret: Uint8Array): string {
  if (!(secret instanceof Uint8Array) || secret.length < MIN_INTENT_SECRET_BYTES) {
    throw new RmsValidationError('secret', `must be at least ${MIN_INTENT_SECRET_BYTES} bytes`);
  }
  return createHmac('sha256', secretKeyOf(secret)).update(`limit-scope\u0000${value}`, 'utf8').digest().subarray(0, 16).toString('base64url');
}
