import { describe, expect, it } from 'vitest';
import { DbUnavailableError, isUnavailable, translateDbError } from '../../src/db/errors';

const withCode = (code: string, message = 'boom') => Object.assign(new Error(message), { code });

describe('isUnavailable', () => {
  it.each(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', '08006', '08001', '57P01', '57P03', '53300'])(
    'treats code %s as PostgreSQL being out of reach',
    (code) => {
      expect(isUnavailable(withCode(code))).toBe(true);
    },
  );

  it.each(['23505', '23514', '57014', '42P01', '22P02', '40001'])('treats SQLSTATE %s as a statement outcome, not unavailability', (code) => {
    expect(isUnavailable(withCode(code))).toBe(false);
  });

  it('recognises the driver messages for a connect timeout and a dropped connection', () => {
    expect(isUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isUnavailable(new Error('Client has encountered a connection error and is not queryable'))).toBe(true);
  });

  it('recognises a refused connection to a host with several addresses (AggregateError with a code)', () => {
    const err = Object.assign(new AggregateError([withCode('ECONNREFUSED')], ''), { code: 'ECONNREFUSED' });

    expect(isUnavailable(err)).toBe(true);
  });

  it('does not treat non-errors or ordinary errors as unavailability', () => {
    expect(isUnavailable('ECONNREFUSED')).toBe(false);
    expect(isUnavailable(new Error('duplicate key value violates unique constraint'))).toBe(false);
  });
});

describe('translateDbError', () => {
  it('wraps a connection failure in DbUnavailableError that keeps the cause and names the operation', () => {
    const cause = withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:1');

    const thrown = (() => {
      try {
        translateDbError(cause, 'writeFenced');
      } catch (err) {
        return err;
      }
    })();

    expect(thrown).toBeInstanceOf(DbUnavailableError);
    expect((thrown as DbUnavailableError).cause).toBe(cause);
    expect((thrown as Error).message).toContain('writeFenced');
  });

  it('rethrows any other error unchanged', () => {
    const constraint = withCode('23505', 'duplicate key');

    let thrown: unknown;
    try {
      translateDbError(constraint, 'writeFenced');
    } catch (err) {
      thrown = err;
    }

    expect(thrown).toBe(constraint);
  });
});
