/**
 * Secrets as KeyObjects, for the HMACs and ciphers that run on every request. Node 24 tells a
 * KeyObject or a CryptoKey from raw bytes by reading each one's private slots and catching the
 * TypeError, so a key given as bytes throws and catches twice per call: `createHmac` and
 * `createCipheriv` cost 8 to 9 times as much with a Buffer key as with a KeyObject there (an
 * HMAC-SHA-256 19 µs against 2.5). Node 20 and 22 take either at the same cost.
 */
import { createSecretKey, type KeyObject } from 'node:crypto';

/** The KeyObject made for each secret, with a copy of the bytes it was made from. */
const made = new WeakMap<Uint8Array, { bytes: Buffer; key: KeyObject }>();

/**
 * The KeyObject of `secret`'s bytes: made once per secret and reused while its bytes stay the
 * same (a secret changed in place gets a new one, so a key never outlives the bytes it came from).
 */
export function secretKeyOf(secret: Uint8Array): KeyObject {
  const known = made.get(secret);
  if (known !== undefined && known.bytes.equals(secret)) return known.key;
  // A copy: the bytes the key was made from, compared at each use.
  const bytes = Buffer.from(secret);
  const key = createSecretKey(bytes);
  made.set(secret, { bytes, key });
  return key;
}
