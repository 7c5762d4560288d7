/**
 * Redis out of reach: every command rejects with RmsUnavailableError (cause kept) within about the
 * configured timeout, nothing hangs; bad input is still refused first, as a validation error.
 */
import { describe, expect, it } from 'vitest';
import { Rms, RmsUnavailableError, RmsValidationError, createRedis, intentKey } from '../../src/rms';
import { freePort } from '../helpers/redis-servers';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

const TIMEOUT_MS = 500;

describe.each(['single', 'cluster'] as const)('the RMS on an unreachable %s Redis', (kind) => {
  async function unreachable() {
    // A loopback port nothing listens on: connections are refused at once, again and again.
    const port = await freePort();
    const redis = createRedis({
      url: `redis://127.0.0.1:${port}`,
      clusterNodes: kind === 'cluster' ? [{ host: '127.0.0.1', port }] : undefined,
      keyPrefix: 'unreachable:',
      commandTimeoutMs: TIMEOUT_MS,
    });
    redis.on('error', () => {});
    return { redis, rms: new Rms(redis, { keyPrefix: 'unreachable:' }) };
  }

  it('rejects every command with RmsUnavailableError carrying the cause', { timeout: 10_000 }, async () => {
    const { redis, rms } = await unreachable();
    const intent = intentKey('order', { id: 1 }, TEST_INTENT_SECRET);
    const token = '1795000000000000';

    const errors = await Promise.all([
      rms.reserve({ intent, sessionId: 's', leaseMs: 1000 }).catch((e: unknown) => e),
      rms.extend({ intent, sessionId: 's', fencingToken: token, leaseMs: 1000 }).catch((e: unknown) => e),
      rms.finalize({ intent, sessionId: 's', fencingToken: token }).catch((e: unknown) => e),
      rms.release({ intent, sessionId: 's', fencingToken: token }).catch((e: unknown) => e),
      rms.free({ intent, fencingToken: token }).catch((e: unknown) => e),
      rms.markExists({ intent, fencingToken: token }).catch((e: unknown) => e),
      rms.inspect(intent).catch((e: unknown) => e),
    ]);
    redis.disconnect();

    expect(errors.map((e) => (e as RmsUnavailableError).command)).toEqual([
      'reserve',
      'extend',
      'finalize',
      'release',
      'free',
      'markExists',
      'inspect',
    ]);
    for (const error of errors) {
      expect(error).toBeInstanceOf(RmsUnavailableError);
      expect((error as RmsUnavailableError).cause).toBeInstanceOf(Error);
    }
  });

  it('refuses bad input with RmsValidationError before trying Redis', { timeout: 10_000 }, async () => {
    const { redis, rms } = await unreachable();

    const error = await rms.reserve({ intent: 'order:x}{y', sessionId: 's', leaseMs: 1000 }).catch((e: unknown) => e);
    redis.disconnect();

    expect(error).toBeInstanceOf(RmsValidationError);
  });
});

describe('the RMS on a client that was closed', () => {
  it('rejects with RmsUnavailableError', { timeout: 10_000 }, async () => {
    const redis = createRedis({ url: 'redis://127.0.0.1:6379', keyPrefix: 'closed:', commandTimeoutMs: TIMEOUT_MS });
    const rms = new Rms(redis, { keyPrefix: 'closed:' });
    await redis.quit();

    const error = await rms.inspect(intentKey('order', { id: 1 }, TEST_INTENT_SECRET)).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(RmsUnavailableError);
  });
});
