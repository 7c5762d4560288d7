/**
 * The payload codec that keeps data encrypted in Temporal: every payload leaving the process becomes
 * AES-256-GCM ciphertext under the newest codec key, and the data converter built here also encrypts
 * failure messages and stack traces. Payloads recorded before encryption was turned on still decode
 * (they pass through unchanged), so old histories keep replaying.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { DataConverter, Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { secretKeyOf } from '../secret-key';
import { CODEC_KEY_ID_PATTERN, type CodecKey, type CodecKeys } from './keys';

/** The `encoding` metadata of an encrypted payload. */
export const ENCRYPTED_ENCODING = 'binary/encrypted';

/** The metadata entry naming the codec key that encrypted a payload. */
export const KEY_ID_METADATA = 'encryption-key-id';

/** Bytes of the random IV (GCM nonce) that starts an encrypted payload's data. */
export const IV_BYTES = 12;

/** Bytes of the GCM authentication tag that ends an encrypted payload's data. */
export const TAG_BYTES = 16;

/**
 * Absolute path of the module exporting the `failureConverter`: the `.js` beside this file in `dist/`,
 * else the `.ts` source (tsx, vitest, the workflow bundler). The SDK wants an existing file.
 */
export const FAILURE_CONVERTER_PATH = ['.js', '.ts'].map((ext) => path.join(__dirname, `failure-converter${ext}`)).find((file) => existsSync(file)) ?? path.join(__dirname, 'failure-converter.js');

/**
 * Thrown by {@link EncryptionCodec.decode} when an encrypted payload cannot be decrypted: too short to
 * hold an IV and a tag, altered since it was encrypted, or encrypted under another key with the same
 * id. Not retryable. The message names the key id, never the data.
 */
export class PayloadDecryptionError extends Error {
  override readonly name: string = 'PayloadDecryptionError';
  /** The key id of the payload's metadata (`''` when absent, `'<invalid>'` when not a valid id). */
  readonly keyId: string;
  constructor(keyId: string, message: string, options?: { cause: unknown }) {
    super(message, options);
    this.keyId = keyId;
  }
}

/**
 * Thrown by {@link EncryptionCodec.decode} when a payload names a key id the codec does not hold:
 * the key was removed from the codec keys while a history still needs it, or the payload was made
 * elsewhere. Not retryable until the key is configured again.
 */
export class UnknownCodecKeyError extends PayloadDecryptionError {
  override readonly name = 'UnknownCodecKeyError';
  constructor(keyId: string) {
    super(keyId, `payload encrypted with unknown codec key "${keyId}"; add that key to the codec keys to decrypt it`);
  }
}

/**
 * AES-256-GCM payload codec. `encode` replaces each payload by one with metadata
 * `encoding: binary/encrypted` and `encryption-key-id: <newest key id>`, whose data is
 * IV (12 random bytes, fresh per payload) ‖ ciphertext ‖ tag (16 bytes) of the original payload's
 * protobuf encoding; the key id is also authenticated (GCM additional data). `decode` reverses this
 * for encrypted payloads, with whichever configured key the metadata names, and returns any other
 * payload unchanged.
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly newest: CodecKey;
  private readonly byId: ReadonlyMap<string, CodecKey>;

  /** @param keys The codec keys, newest first (see `parseCodecKeys`). */
  constructor(keys: CodecKeys) {
    this.newest = keys[0];
    this.byId = new Map(keys.map((key) => [key.id, key]));
  }

  /** Encrypts every payload with the newest key. */
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  /**
   * Decrypts the encrypted payloads and passes the others through.
   *
   * @throws UnknownCodecKeyError when a payload names a key id the codec does not hold.
   * @throws PayloadDecryptionError when a payload is malformed or fails authentication.
   */
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => (isEncrypted(payload) ? this.decrypt(payload) : payload));
  }

  private encrypt(payload: Payload): Payload {
    const { id, material } = this.newest;
    const keyId = Buffer.from(id, 'utf8');
    const iv = randomBytes(IV_BYTES);
    // As a KeyObject: with bytes, Node 24 pays two caught exceptions per payload (src/secret-key.ts).
    const cipher = createCipheriv('aes-256-gcm', secretKeyOf(material), iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(keyId);
    const plain = temporal.api.common.v1.Payload.encode(payload).finish();
    const data = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: { encoding: Buffer.from(ENCRYPTED_ENCODING, 'utf8'), [KEY_ID_METADATA]: keyId },
      data,
    };
  }

  private decrypt(payload: Payload): Payload {
    const rawId = payload.metadata?.[KEY_ID_METADATA];
    const id = rawId ? Buffer.from(rawId).toString('utf8') : '';
    // The id comes from stored or posted data: quote it only when it is a well-formed id.
    if (!CODEC_KEY_ID_PATTERN.test(id)) {
      const keyId = id === '' ? '' : '<invalid>';
      throw new PayloadDecryptionError(keyId, `encrypted payload has ${id === '' ? 'no' : 'a malformed'} ${KEY_ID_METADATA} metadata`);
    }
    const key = this.byId.get(id);
    if (key === undefined) throw new UnknownCodecKeyError(id);
    const data = payload.data ?? new Uint8Array(0);
    if (data.length < IV_BYTES + TAG_BYTES) {
      throw new PayloadDecryptionError(id, `encrypted payload (key "${id}") is too short to hold an IV and a tag`);
    }
    let plain: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', secretKeyOf(key.material), data.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(id, 'utf8'));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
    } catch (cause) {
      throw new PayloadDecryptionError(id, `encrypted payload (key "${id}") failed authentication: altered, or encrypted under another key`, {
        cause,
      });
    }
    try {
      return temporal.api.common.v1.Payload.decode(plain);
    } catch (cause) {
      // Authenticated yet not a Payload: written by some other program holding the same key.
      throw new PayloadDecryptionError(id, `encrypted payload (key "${id}") does not hold a Temporal payload`, { cause });
    }
  }
}

/**
 * The data converter of every worker and client that must keep data encrypted in Temporal: the
 * {@link EncryptionCodec} over `keys`, and the failure converter of {@link FAILURE_CONVERTER_PATH}, which
 * turns failure messages and stack traces into payloads so the codec encrypts them too. Workflow
 * bundles built ahead of time must be given the same `failureConverterPath`.
 */
export function createDataConverter(keys: CodecKeys): DataConverter {
  return { payloadCodecs: [new EncryptionCodec(keys)], failureConverterPath: FAILURE_CONVERTER_PATH };
}

/** Whether a payload is one this codec encrypted (its `encoding` metadata says so). */
export function isEncrypted(payload: Payload): boolean {
  const encoding = payload.metadata?.encoding;
  return encoding !== undefined && encoding !== null && Buffer.from(encoding).toString('utf8') === ENCRYPTED_ENCODING;
}
