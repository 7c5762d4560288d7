/**
 * Codec keys: the AES-256 keys that encrypt payloads before they reach Temporal, read from one
 * environment variable as `<id>:<base64 of 32 bytes>[,<id>:<base64>...]`. The first key is the newest
 * and encrypts; every key decrypts. To rotate, prepend a new key and keep the old ones until no
 * workflow history still holds payloads encrypted with them.
 */
import { randomBytes } from 'node:crypto';

/** The environment variable the codec keys are read from by default. */
export const CODEC_KEYS_VARIABLE = 'SAGA_CODEC_KEYS';

/** Bytes of a codec key (AES-256). */
export const CODEC_KEY_BYTES = 32;

/**
 * What a key id may be. Ids are written in clear into every encrypted payload's metadata, so they
 * must name a key, never hold key material.
 */
export const CODEC_KEY_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Thrown when the codec keys cannot be read. The message names the variable and the entry at fault,
 * never the key material.
 */
export class CodecKeyError extends Error {
  override readonly name = 'CodecKeyError';
  /** The environment variable at fault, e.g. `SAGA_CODEC_KEYS`. */
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.variable = variable;
  }
}

/** One codec key: a public id and 32 secret bytes. */
export class CodecKey {
  /** The id written into the metadata of every payload this key encrypts. */
  readonly id: string;
  /**
   * The 32 key bytes. Not enumerable, so logging, inspecting or JSON-serialising a key shows its id
   * only.
   */
  declare readonly material: Buffer;

  constructor(id: string, material: Uint8Array) {
    if (!CODEC_KEY_ID_PATTERN.test(id)) throw new RangeError(`codec key id must match ${String(CODEC_KEY_ID_PATTERN)}`);
    if (material.length !== CODEC_KEY_BYTES) throw new RangeError(`codec key ${id} must be ${CODEC_KEY_BYTES} bytes`);
    this.id = id;
    // A private copy: the caller's buffer may be pooled, reused or zeroed later.
    Object.defineProperty(this, 'material', { value: Buffer.from(material), enumerable: false });
  }
}

/** The codec keys, newest first: the first encrypts, all of them decrypt. Never empty; ids are unique. */
export type CodecKeys = readonly [CodecKey, ...CodecKey[]];

const FORMAT = `expected "<id>:<base64 of ${CODEC_KEY_BYTES} bytes>[,<id>:<base64>...]", newest key first`;

/**
 * Reads the codec keys from the value of an environment variable. Entries are separated by commas
 * (spaces around them are ignored); each is `<id>:<base64>`, the id matching
 * {@link CODEC_KEY_ID_PATTERN} and unique, the base64 (standard alphabet, padded) decoding to exactly
 * {@link CODEC_KEY_BYTES} bytes.
 *
 * @param value The variable's value, e.g. `process.env.SAGA_CODEC_KEYS`.
 * @param variable The variable's name, for error messages. @default 'SAGA_CODEC_KEYS'
 * @throws CodecKeyError when the value is unset or blank, or an entry is empty, has no id, a malformed
 *   or duplicate id, or key material that is not the base64 of exactly 32 bytes.
 */
export function parseCodecKeys(value: string | undefined, variable = CODEC_KEYS_VARIABLE): CodecKeys {
  if (value === undefined || value.trim() === '') {
    throw new CodecKeyError(variable, `is not set; ${FORMAT} (make one with generateCodecKey())`);
  }
  const entries = value.split(',').map((entry) => entry.trim());
  const keys: CodecKey[] = [];
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    const key = parseEntry(entry, `entry ${index + 1} of ${entries.length}`, variable);
    if (seen.has(key.id)) throw new CodecKeyError(variable, `key id "${key.id}" appears more than once; ids must be unique`);
    seen.add(key.id);
    keys.push(key);
  });
  const [newest, ...older] = keys;
  // Unreachable: split always yields at least one entry, and an empty one was refused above.
  if (newest === undefined) throw new CodecKeyError(variable, `holds no key; ${FORMAT}`);
  return [newest, ...older];
}

/**
 * A fresh codec-keys entry, `<id>:<base64 of 32 random bytes>`, to set as (or prepend to) the
 * variable's value, e.g. for `make dev` or a key rotation.
 *
 * @param id The key id. @default `k` followed by the current UTC time, `kYYYYMMDDhhmmss`.
 * @throws RangeError when `id` does not match {@link CODEC_KEY_ID_PATTERN}.
 */
export function generateCodecKey(id: string = defaultKeyId()): string {
  if (!CODEC_KEY_ID_PATTERN.test(id)) throw new RangeError(`codec key id must match ${String(CODEC_KEY_ID_PATTERN)}`);
  return `${id}:${randomBytes(CODEC_KEY_BYTES).toString('base64')}`;
}

function parseEntry(entry: string, where: string, variable: string): CodecKey {
  // The messages below never quote the entry: a misplaced separator could make any part of it key material.
  if (entry === '') throw new CodecKeyError(variable, `${where} is empty; ${FORMAT}`);
  const colon = entry.indexOf(':');
  if (colon < 0) throw new CodecKeyError(variable, `${where} has no "<id>:" before its key; ${FORMAT}`);
  const id = entry.slice(0, colon);
  const encoded = entry.slice(colon + 1);
  if (!CODEC_KEY_ID_PATTERN.test(id)) {
    throw new CodecKeyError(variable, `${where} has an id that does not match ${String(CODEC_KEY_ID_PATTERN)}`);
  }
  const material = Buffer.from(encoded, 'base64');
  // Buffer.from skips characters outside the alphabet; re-encoding shows whether any were there.
  if (material.toString('base64') !== encoded) {
    throw new CodecKeyError(variable, `key "${id}" is not valid base64 (standard alphabet, with padding)`);
  }
  if (material.length !== CODEC_KEY_BYTES) {
    throw new CodecKeyError(variable, `key "${id}" is ${material.length} bytes; it must be exactly ${CODEC_KEY_BYTES}`);
  }
  return new CodecKey(id, material);
}

function defaultKeyId(): string {
  return `k${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}`;
}
