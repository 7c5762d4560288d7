import { describe, expect, it } from 'vitest';
import { preferredWaitSeconds } from '../../src/http/prefer';

describe('preferredWaitSeconds (the Prefer header, RFC 7240)', () => {
  it.each([
    ['wait=10', 10],
    ['WAIT = 5', 5],
    ['respond-async, wait=7', 7],
    ['wait="3"', 3],
    ['wait=4; foo=bar', 4],
    ['wait=2, wait=9', 2],
    ['handling=lenient', undefined],
    ['wait=soon', undefined],
    ['wait=-1', undefined],
    ['wait', undefined],
    ['', undefined],
  ])('reads %j as %s', (header, seconds) => {
    expect(preferredWaitSeconds(header)).toBe(seconds);
  });

  it('reads several Prefer headers as one list, and none as no wait', () => {
    expect(preferredWaitSeconds(['respond-async', 'wait=6'])).toBe(6);
    expect(preferredWaitSeconds(undefined)).toBeUndefined();
  });
});
