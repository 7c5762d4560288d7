import { describe, expect, it } from 'vitest';
import { RmsReplyError } from '../../src/rms';
import {
  toExtendResult,
  toFinalizeResult,
  toFreeResult,
  toIntentInspection,
  toMarkExistsResult,
  toRaiseResult,
  toReleaseResult,
  toReserveResult,
} from '../../src/rms/replies';

const intent = `order:${'A'.repeat(43)}`;

describe('reply mapping', () => {
  it('maps reserve replies to the ReserveResult union', () => {
    expect(toReserveResult(['SUCCESS', '1795243242523872', 1795243247523, 0, 2], 'session-a')).toEqual({
      status: 'SUCCESS',
      sessionId: 'session-a',
      fencingToken: '1795243242523872',
      expiresAt: 1795243247523,
      alreadyHeld: false,
      endedCount: 2,
    });
    expect(toReserveResult(['SUCCESS', '17', 5, 1, 0], 'session-a')).toMatchObject({ alreadyHeld: true, endedCount: 0 });
    expect(toReserveResult(['ENDED'], 'session-a')).toEqual({ status: 'ENDED' });
    expect(toReserveResult(['DUPLICATE', 'session-b:12'], 'session-a')).toEqual({ status: 'DUPLICATE', owner: { sessionTag: 'session-b', fencingToken: '12' } });
    // A marker written before owners were kept: the bare token.
    expect(toReserveResult(['DUPLICATE', '12'], 'session-a')).toEqual({ status: 'DUPLICATE', owner: { fencingToken: '12' } });
    expect(toReserveResult(['CONFLICT', 4997], 'session-a')).toEqual({ status: 'CONFLICT', retryAfterMs: 4997 });
  });

  it('keeps tokens beyond 2^53 exact, as strings', () => {
    const result = toReserveResult(['SUCCESS', '9223372036854775807', 1, 0, 0], 's');

    expect(result).toMatchObject({ fencingToken: '9223372036854775807' });
  });

  it('maps the other commands’ replies', () => {
    expect(toExtendResult(['EXTENDED', 12])).toEqual({ status: 'EXTENDED', expiresAt: 12 });
    expect(toExtendResult(['LOST'])).toEqual({ status: 'LOST' });
    expect(toFinalizeResult(['FINALIZED'])).toEqual({ status: 'FINALIZED' });
    expect(toFinalizeResult(['LOST'])).toEqual({ status: 'LOST' });
    expect(toFinalizeResult(['FREED'])).toEqual({ status: 'FREED' });
    expect(toReleaseResult(['RELEASED'])).toEqual({ status: 'RELEASED' });
    expect(toReleaseResult(['NOT_OWNER'])).toEqual({ status: 'NOT_OWNER' });
    expect(toFreeResult(['FREED'])).toEqual({ status: 'FREED' });
    expect(toFreeResult(['NOT_OWNER'])).toEqual({ status: 'NOT_OWNER' });
    expect(toMarkExistsResult(['MARKED'])).toEqual({ status: 'MARKED' });
    expect(toMarkExistsResult(['FREED'])).toEqual({ status: 'FREED' });
  });

  it('maps an inspection with everything set', () => {
    const inspection = toIntentInspection(intent, ['session-a:17', 900, 'session-b:12', 86_000]);

    expect(inspection).toEqual({
      intent,
      holder: { sessionId: 'session-a', fencingToken: '17', remainingMs: 900 },
      exists: true,
      existsToken: '12',
      existsSessionTag: 'session-b',
      markerRemainingMs: 86_000,
    });
  });

  it('keeps the tag of a marker written with a whole session id, and reports no end for a marker without a TTL', () => {
    const inspection = toIntentInspection(intent, [null, -2, 'wBpYq0n3S8uXcD2r9TtFkA:12', -1]);

    expect(inspection).toEqual({ intent, exists: true, existsToken: '12', existsSessionTag: 'wBpYq0n3S8u' });
  });

  it('maps an inspection of a freed intent: its tombstone is no entity', () => {
    expect(toIntentInspection(intent, [null, -2, '{freed}:12', 500])).toEqual({ intent, exists: false, freedToken: '12', markerRemainingMs: 500 });
  });

  it('maps an inspection of an untouched intent', () => {
    expect(toIntentInspection(intent, [null, -2, null, -2])).toEqual({ intent, exists: false });
  });

  it.each([
    ['reserve', () => toReserveResult(null, 's')],
    ['reserve', () => toReserveResult([], 's')],
    ['reserve', () => toReserveResult(['MAYBE'], 's')],
    ['reserve', () => toReserveResult(['SUCCESS', 1795243242523872, 1, 0], 's')],
    ['reserve', () => toReserveResult(['SUCCESS', '01', 1, 0], 's')],
    ['reserve', () => toReserveResult(['SUCCESS', '1.7e+15', 1, 0], 's')],
    ['reserve', () => toReserveResult(['SUCCESS', '17', 1], 's')],
    ['reserve', () => toReserveResult(['SUCCESS', '17', 1, 0], 's')],
    ['reserve', () => toReserveResult(['DUPLICATE'], 's')],
    ['reserve', () => toReserveResult(['DUPLICATE', 'session:'], 's')],
    ['reserve', () => toReserveResult(['CONFLICT', '12'], 's')],
    ['extend', () => toExtendResult(['EXTENDED'])],
    ['extend', () => toExtendResult('OK')],
    ['finalize', () => toFinalizeResult(['RELEASED'])],
    ['release', () => toReleaseResult(['FREED'])],
    ['free', () => toFreeResult(['RELEASED'])],
    ['markExists', () => toMarkExistsResult(['RELEASED'])],
    ['inspect', () => toIntentInspection(intent, [null, -2, null])],
    ['inspect', () => toIntentInspection(intent, ['no-token-here', 900, null, null])],
    ['inspect', () => toIntentInspection(intent, ['session-a:17', -1, null, null])],
    ['inspect', () => toIntentInspection(intent, [null, -2, 'garbage', -1])],
    ['inspect', () => toIntentInspection(intent, [null, -2, 'session-b:12', -2])],
    ['raise', () => toRaiseResult(['RAISED', '0'])],
    ['raise', () => toRaiseResult(['EXTENDED', 5])],
  ])('refuses an unexpected %s reply with RmsReplyError', (command, map) => {
    let error: unknown;
    try {
      map();
    } catch (err) {
      error = err;
    }

    expect(error).toBeInstanceOf(RmsReplyError);
    expect(error).toMatchObject({ command });
  });
});
