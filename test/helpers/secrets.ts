/**
 * The secrets of the tests: the intent-key secret (INTENT_KEY_SECRET in every test config, and the
 * third argument of `intentKey` in tests that make keys themselves) and the payload codec's key
 * (SAGA_CODEC_KEYS; scripts/record-histories.ts records with it, so the replay test can read the
 * histories). Test-only: derived from public strings.
 */
import { createHash } from 'node:crypto';

export const TEST_INTENT_SECRET: Buffer = createHash('sha256').update('reservation-saga: the tests’ intent-key secret').digest();

/** SAGA_CODEC_KEYS of the tests: one key, id `test`. */
export const TEST_CODEC_KEYS = `test:${createHash('sha256').update('reservation-saga: the tests’ codec key').digest('base64')}`;
