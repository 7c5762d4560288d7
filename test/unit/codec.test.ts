import { inspect } from 'node:util';
import { ApplicationFailure, DefaultFailureConverter, defaultPayloadConverter, type Payload } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import {
  CODEC_KEY_ID_PATTERN,
  CodecKey,
  CodecKeyError,
  ENCRYPTED_ENCODING,
  EncryptionCodec,
  FAILURE_CONVERTER_PATH,
  IV_BYTES,
  KEY_ID_METADATA,
  PayloadDecryptionError,
  UnknownCodecKeyError,
  createDataConverter,
  generateCodecKey,
  parseCodecKeys,
  type CodecKeys,
} from '../../src/codec';
import { failureConverter } from '../../src/codec/failure-converter';

const SECRET_TEXT = 'card 4111 1111 1111 1111, Jane Doe, 1 Main Street';

const text = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array(0)).toString('utf8');
const keysOf = (...entries: string[]): CodecKeys => parseCodecKeys(entries.join(','));
const contains = (haystack: Uint8Array | null | undefined, needle: string) => Buffer.from(haystack ?? []).includes(Buffer.from(needle, 'utf8'));

describe('EncryptionCodec', () => {
  const values: [string, unknown][] = [
    ['a string', SECRET_TEXT],
    ['an object', { customer: 'Jane Doe', items: [{ sku: 'A-1', qty: 2 }], note: 'émoji 🧨' }],
    ['null', null],
    ['undefined', undefined],
    ['binary data', new Uint8Array([0, 1, 2, 254, 255])],
    ['an empty string', ''],
  ];

  it.each(values)('round-trips %s made by the default payload converter', async (_name, value) => {
    const codec = new EncryptionCodec(keysOf(generateCodecKey('k1')));
    const payload = defaultPayloadConverter.toPayload(value);

    const [decoded] = await codec.decode(await codec.encode([payload]));

    expect(decoded).toBeDefined();
    expect(defaultPayloadConverter.fromPayload(decoded!)).toEqual(value);
    expect(text(decoded!.metadata?.encoding)).toBe(text(payload.metadata?.encoding));
    expect(Buffer.from(decoded!.data ?? [])).toEqual(Buffer.from(payload.data ?? []));
  });

  it('encrypts every payload with the newest key and hides its data and metadata', async () => {
    const codec = new EncryptionCodec(keysOf(generateCodecKey('new'), generateCodecKey('old')));
    const payloads = [SECRET_TEXT, { secret: SECRET_TEXT }, 42].map((v) => defaultPayloadConverter.toPayload(v));

    const encoded = await codec.encode(payloads);

    expect(encoded).toHaveLength(3);
    for (const payload of encoded) {
      expect(Object.keys(payload.metadata ?? {}).sort()).toEqual(['encoding', KEY_ID_METADATA]);
      expect(text(payload.metadata?.encoding)).toBe(ENCRYPTED_ENCODING);
      expect(text(payload.metadata?.[KEY_ID_METADATA])).toBe('new');
      expect(contains(payload.data, 'Jane Doe')).toBe(false);
      expect(contains(payload.data, 'json/plain')).toBe(false);
    }
  });

  it('decrypts payloads encrypted with an older key that is still configured', async () => {
    const old = generateCodecKey('old');
    const before = new EncryptionCodec(keysOf(old));
    const encodedBefore = await before.encode([defaultPayloadConverter.toPayload(SECRET_TEXT)]);
    const after = new EncryptionCodec(keysOf(generateCodecKey('new'), old));

    const [decoded] = await after.decode(encodedBefore);

    expect(defaultPayloadConverter.fromPayload(decoded!)).toBe(SECRET_TEXT);
  });

  it('passes payloads that are not encrypted through unchanged', async () => {
    const codec = new EncryptionCodec(keysOf(generateCodecKey('k1')));
    const clear = [defaultPayloadConverter.toPayload({ recorded: 'before encryption' }), defaultPayloadConverter.toPayload(undefined)];

    const decoded = await codec.decode(clear);

    expect(decoded).toHaveLength(2);
    expect(decoded[0]).toBe(clear[0]);
    expect(decoded[1]).toBe(clear[1]);
  });

  it('refuses a payload whose key id it does not hold, naming the id and not the data', async () => {
    const encoded = await new EncryptionCodec(keysOf(generateCodecKey('retired'))).encode([defaultPayloadConverter.toPayload(SECRET_TEXT)]);
    const codec = new EncryptionCodec(keysOf(generateCodecKey('current')));

    const error: unknown = await codec.decode(encoded).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(UnknownCodecKeyError);
    expect(error).toMatchObject({ keyId: 'retired', message: expect.stringContaining('"retired"') });
    expect(inspect(error)).not.toContain('Jane Doe');
  });

  it.each<[string, (payload: Payload) => Payload]>([
    ['a flipped ciphertext bit', (p) => ({ ...p, data: flipBit(p.data!, IV_BYTES + 1) })],
    ['a flipped IV bit', (p) => ({ ...p, data: flipBit(p.data!, 0) })],
    ['a flipped tag bit', (p) => ({ ...p, data: flipBit(p.data!, p.data!.length - 1) })],
    ['truncated data', (p) => ({ ...p, data: p.data!.subarray(0, 20) })],
    ['the key id of another configured key', (p) => ({ ...p, metadata: { ...p.metadata, [KEY_ID_METADATA]: Buffer.from('other') } })],
    ['a malformed key id', (p) => ({ ...p, metadata: { ...p.metadata, [KEY_ID_METADATA]: Buffer.from('no spaces allowed') } })],
  ])('refuses a payload with %s', async (_name, tamper) => {
    const codec = new EncryptionCodec(keysOf(generateCodecKey('k1'), generateCodecKey('other')));
    const [encoded] = await codec.encode([defaultPayloadConverter.toPayload(SECRET_TEXT)]);

    const error: unknown = await codec.decode([tamper(encoded!)]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PayloadDecryptionError);
    expect(inspect(error)).not.toContain('Jane Doe');
  });

  it('uses a fresh IV for every payload: the same input twice gives different ciphertexts', async () => {
    const codec = new EncryptionCodec(keysOf(generateCodecKey('k1')));
    const payload = defaultPayloadConverter.toPayload(SECRET_TEXT);

    const [first, second] = await codec.encode([payload, payload]);

    expect(Buffer.from(first!.data!.subarray(0, IV_BYTES))).not.toEqual(Buffer.from(second!.data!.subarray(0, IV_BYTES)));
    expect(Buffer.from(first!.data!)).not.toEqual(Buffer.from(second!.data!));
  });
});

describe('failure encryption', () => {
  it('moves a failure message and stack into a payload that the codec encrypts', async () => {
    const codec = new EncryptionCodec(keysOf(generateCodecKey('k1')));
    const error = ApplicationFailure.nonRetryable(`payment declined for ${SECRET_TEXT}`, 'PaymentDeclined');

    const failure = new DefaultFailureConverter({ encodeCommonAttributes: true }).errorToFailure(error, defaultPayloadConverter);
    const [encrypted] = await codec.encode([failure.encodedAttributes!]);

    expect(failure.message).not.toContain('Jane Doe');
    expect(failure.stackTrace ?? '').not.toContain('Jane Doe');
    expect(contains(failure.encodedAttributes!.data, 'Jane Doe')).toBe(true);
    expect(contains(encrypted!.data, 'Jane Doe')).toBe(false);
    const [decrypted] = await codec.decode([encrypted!]);
    expect(defaultPayloadConverter.fromPayload(decrypted!)).toMatchObject({ message: `payment declined for ${SECRET_TEXT}` });
  });

  it('builds a data converter with the codec and the failure converter that encodes common attributes', async () => {
    const converter = createDataConverter(keysOf(generateCodecKey('k1')));

    const failure = failureConverter.errorToFailure(new Error(SECRET_TEXT), defaultPayloadConverter);

    expect(converter.payloadCodecs).toEqual([expect.any(EncryptionCodec)]);
    expect(converter.failureConverterPath).toBe(FAILURE_CONVERTER_PATH);
    expect(failure.message).not.toContain('Jane Doe');
    expect(failure.encodedAttributes).toBeDefined();
  });
});

describe('parseCodecKeys', () => {
  const k1 = generateCodecKey('k1');
  const k2 = generateCodecKey('k2.old');
  const material = (entry: string) => entry.slice(entry.indexOf(':') + 1);

  it('reads keys newest first, ignoring spaces around entries', () => {
    const keys = parseCodecKeys(` ${k1} , ${k2} `);

    expect(keys.map((k) => k.id)).toEqual(['k1', 'k2.old']);
    expect(keys[0].material.toString('base64')).toBe(material(k1));
    expect(keys[1]?.material).toHaveLength(32);
  });

  it.each<[string, string | undefined, string]>([
    ['unset', undefined, 'is not set'],
    ['blank', '  ', 'is not set'],
    ['with an empty entry', `${k1},`, 'entry 2 of 2 is empty'],
    ['with an entry without an id', material(k1), 'has no "<id>:"'],
    ['with a malformed id', `bad id:${material(k1)}`, 'id that does not match'],
    ['with a duplicate id', `${k1},k1:${material(k2)}`, '"k1" appears more than once'],
    ['with key material that is not base64', `k1:${material(k1).slice(0, -2)}!=`, 'not valid base64'],
    ['with key material of the wrong length', `k1:${Buffer.alloc(16, 7).toString('base64')}`, 'is 16 bytes'],
  ])('refuses a value %s, naming the variable and never the key', (_name, value, reason) => {
    const error: unknown = (() => {
      try {
        return parseCodecKeys(value, 'MY_KEYS');
      } catch (e) {
        return e;
      }
    })();

    expect(error).toBeInstanceOf(CodecKeyError);
    expect(error).toMatchObject({ variable: 'MY_KEYS', message: expect.stringMatching(/^MY_KEYS: /) });
    expect((error as Error).message).toContain(reason);
    for (const secret of [material(k1), material(k2), material(k1).slice(0, 16)]) {
      expect(inspect(error)).not.toContain(secret);
    }
  });

  it('names SAGA_CODEC_KEYS by default', () => {
    expect(() => parseCodecKeys(undefined)).toThrow(/^SAGA_CODEC_KEYS: /);
  });

  it('never shows key material when a key is logged or serialised', () => {
    const [key] = parseCodecKeys(k1);

    expect(inspect(key)).not.toContain(material(k1));
    expect(JSON.stringify(key)).toBe('{"id":"k1"}');
    expect(key).toBeInstanceOf(CodecKey);
  });
});

describe('generateCodecKey', () => {
  it('makes an entry of the given id and 32 fresh random bytes', () => {
    const [a, b] = [generateCodecKey('dev'), generateCodecKey('dev')];

    const [key] = parseCodecKeys(a);

    expect(key.id).toBe('dev');
    expect(key.material).toHaveLength(32);
    expect(a).not.toBe(b);
  });

  it('names the key after the current time by default', () => {
    const [key] = parseCodecKeys(generateCodecKey());

    expect(key.id).toMatch(/^k\d{14}$/);
    expect(key.id).toMatch(CODEC_KEY_ID_PATTERN);
  });

  it('refuses an id that does not match the id pattern', () => {
    expect(() => generateCodecKey('has:colon')).toThrow(RangeError);
  });
});

function flipBit(data: Uint8Array, index: number): Buffer {
  const copy = Buffer.from(data);
  copy[index]! ^= 1;
  return copy;
}
