import ClusterAllFailedError from 'ioredis/built/errors/ClusterAllFailedError';
import MaxRetriesPerRequestError from 'ioredis/built/errors/MaxRetriesPerRequestError';
import { describe, expect, it } from 'vitest';
import { RmsError, RmsReplyError, RmsUnavailableError, RmsValidationError, isRedisUnavailable } from '../../src/rms';
import { toRmsError } from '../../src/rms/errors';

function withCode(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:1`), { code });
}

function replyError(message: string): Error {
  return Object.assign(new Error(message), { name: 'ReplyError' });
}

describe('Redis error classification', () => {
  it.each([
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a reset connection', withCode('ECONNRESET')],
    ['a connect timeout', withCode('ETIMEDOUT')],
    ['an unknown host', withCode('ENOTFOUND')],
    ['an ioredis command timeout', new Error('Command timed out')],
    ['a closed connection', new Error('Connection is closed.')],
    ['the retry limit', new MaxRetriesPerRequestError(1)],
    ['a cluster whose nodes all failed', new ClusterAllFailedError('Failed to refresh slots cache.', new Error('x'))],
    ['a cluster with no reachable startup node', new Error('None of startup nodes is available')],
    ['a server loading its dataset', replyError('LOADING Redis is loading the dataset in memory')],
    ['a cluster that is down', replyError('CLUSTERDOWN The cluster is down')],
    ['a replica during failover', replyError("READONLY You can't write against a read only replica.")],
  ])('counts %s as Redis unavailable', (_label, error) => {
    const translated = toRmsError(error, 'reserve');

    expect(isRedisUnavailable(error)).toBe(true);
    expect(translated).toBeInstanceOf(RmsUnavailableError);
    expect(translated.cause).toBe(error);
    expect(translated).toMatchObject({ command: 'reserve' });
  });

  it.each([
    ['a wrong-type reply', replyError('WRONGTYPE Operation against a key holding the wrong kind of value')],
    ['a script error', replyError('ERR user_script:1: Script attempted to access nonexistent global variable')],
    ['an RMS corruption report', replyError('RMS_CORRUPT entity_exists holds a tombstone that names no token')],
    ['a thrown string', 'boom'],
  ])('counts %s as an unexpected reply, not an outage', (_label, error) => {
    const translated = toRmsError(error, 'extend');

    expect(isRedisUnavailable(error)).toBe(false);
    expect(translated).toBeInstanceOf(RmsReplyError);
    expect(translated.cause).toBe(error);
  });

  it('passes RMS errors through unchanged', () => {
    const original = new RmsValidationError('intent', 'bad');

    expect(toRmsError(original, 'reserve')).toBe(original);
  });

  it('makes every RMS error an RmsError and an Error with its own name', () => {
    const errors = [
      new RmsValidationError('sessionId', 'bad'),
      new RmsUnavailableError('reserve', 'down', { cause: new Error('x') }),
      new RmsReplyError('inspect', 'odd'),
    ];

    expect(errors.map((e) => e instanceof RmsError && e instanceof Error)).toEqual([true, true, true]);
    expect(errors.map((e) => e.name)).toEqual(['RmsValidationError', 'RmsUnavailableError', 'RmsReplyError']);
  });
});
