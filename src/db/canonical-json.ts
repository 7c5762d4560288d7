/** Canonical JSON, the request hash of the idempotency store, and the keyed hash of a saga's request. */
import { createHash, createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { secretKeyOf } from '../secret-key';
import { InvalidArgumentError } from './errors';

/**
 * The canonical JSON text of `value`: what `JSON.stringify` would write (toJSON honoured,
 * undefined/functions/symbols omitted from objects and null in arrays, non-finite numbers null),
 * with object keys sorted recursively by UTF-16 code units and no whitespace. A top-level value
 * that JSON cannot hold (undefined) is `null`.
 * @throws InvalidArgumentError for a bigint or a cycle (JSON cannot hold them).
 */
export function canonicalJson(value: unknown): string {
  return encode(value, '', new Set(), '$') ?? 'null';
}

/**
 * SHA-256 (hex) of the canonical JSON of `payload`: equal for payloads that differ only in key
 * order.
 * @throws InvalidArgumentError when the payload is not JSON (a bigint, a cycle).
 */
export function requestHash(payload: unknown): string {
  return createHash('sha256').update(canonicalJson(payload), 'utf8').digest('hex');
}

/**
 * HMAC-SHA-256 (hex) of the canonical JSON of `payload`, under a key derived from `secret` (the
 * intent-key secret) for this use alone: a saga's request hash, shown in its state and kept in its
 * memo. A request holds secrets (a card number) and guessable data around them, so its plain
 * SHA-256 could be searched for them; without the secret this cannot.
 * @throws InvalidArgumentError when the payload is not JSON (a bigint, a cycle).
 */
export function keyedRequestHash(payload: unknown, secret: Uint8Array): string {
  return keyedHash('reservation-saga request hash', payload, secret);
}

/**
 * HMAC-SHA-256 (hex) of the canonical JSON of `value`, under a key derived from `secret` (the
 * intent-key secret) for `purpose` alone: a hash made for one purpose never passes for another's.
 * @throws InvalidArgumentError when the value is not JSON (a bigint, a cycle).
 */
export function keyedHash(purpose: string, value: unknown, secret: Uint8Array): string {
  // Derived once per secret's bytes and purpose (a secret changed in place has a new KeyObject):
  // every gate answer hashes its request, a DUPLICATE's included.
  const secretKey = secretKeyOf(secret);
  let keys = derivedKeys.get(secretKey);
  if (keys === undefined) {
    keys = new Map();
    derivedKeys.set(secretKey, keys);
  }
  let key = keys.get(purpose);
  if (key === undefined) {
    // A KeyObject: Node 24 pays two caught exceptions per HMAC keyed with bytes (src/secret-key.ts).
    key = createSecretKey(createHmac('sha256', secretKey).update(purpose, 'utf8').digest());
    keys.set(purpose, key);
  }
  return createHmac('sha256', key).update(canonicalJson(value), 'utf8').digest('hex');
}

/** The keys derived from each intent secret in use (its KeyObject, see secretKeyOf), by purpose. */
const derivedKeys = new WeakMap<KeyObject, Map<string, KeyObject>>();

function encode(input: unknown, key: string, ancestors: Set<object>, path: string): string | undefined {
  let value = input;
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: (key: string) => unknown }).toJSON(key);
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) value = value.valueOf();
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new InvalidArgumentError(path, 'a bigint is not JSON (pass it as a decimal string)');
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';
  const object = value as object;
  if (ancestors.has(object)) throw new InvalidArgumentError(path, 'is circular');
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      return `[${object.map((item: unknown, i) => encode(item, String(i), ancestors, `${path}[${i}]`) ?? 'null').join(',')}]`;
    }
    const members: string[] = [];
    for (const name of Object.keys(object).sort()) {
      const encoded = encode((object as Record<string, unknown>)[name], name, ancestors, `${path}.${name}`);
      if (encoded !== undefined) members.push(`${JSON.stringify(name)}:${encoded}`);
    }
    return `{${members.join(',')}}`;
  } finally {
    ancestors.delete(object);
  }
}
