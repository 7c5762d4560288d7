/**
 * The intent-key secret of the tests (INTENT_KEY_SECRET in every test config, and the third argument
 * of `intentKey` in tests that make keys themselves). Test-only: derived from a public string.
 */
import { createHash } from 'node:crypto';

export const TEST_INTENT_SECRET: Buffer = createHash('sha256').update('reservation-saga: the tests’ intent-key secret').digest();
