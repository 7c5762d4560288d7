import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_LEASE_MS, Rms, RmsValidationError, intentKey } from '../../src/rms';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

/**
 * A real ioredis client that has never connected (lazyConnect). Any command would move it out of
 * `wait`, so its status proves whether the RMS sent anything. Port 1 would refuse anyway.
 */
function idleClient(): Redis {
  const redis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, commandTimeout: 200, maxRetriesPerRequest: 0 });
  redis.on('error', () => {});
  clients.push(redis);
  return redis;
}
const clients: Redis[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});

const intent = intentKey('order', { id: 1 }, TEST_INTENT_SECRET);
const token = '1795243242523872';

async function refusal(redis: Redis, call: (rms: Rms) => Promise<unknown>): Promise<unknown> {
  const rms = new Rms(redis, { keyPrefix: 'rs:' });
  try {
    await call(rms);
  } catch (err) {
    return err;
  }
  return new Error('resolved, but a refusal was expected');
}

describe('RMS input validation', () => {
  it.each([
    ['order:x}{y'],
    [`${intent}\n`],
    [`${intent} `],
    [`order:${'A'.repeat(42)}`],
    [`order:${'A'.repeat(44)}`],
    [`order:${'A'.repeat(42)}=`],
    [`order:${'A'.repeat(42)}+`],
    [`Order:${'A'.repeat(43)}`],
    [`${'a'.repeat(65)}:${'A'.repeat(43)}`],
    [''],
    [42],
    [null],
  ])('refuses the intent %j without sending anything', async (bad) => {
    const redis = idleClient();

    const error = await refusal(redis, (rms) => rms.reserve({ intent: bad as string, sessionId: 's', leaseMs: 1000 }));

    expect(error).toBeInstanceOf(RmsValidationError);
    expect(error).toMatchObject({ field: 'intent' });
    expect(redis.status).toBe('wait');
  });

  it.each([[''], ['a:b'], ['a b'], ['a\tb'], ['line\n'], ['{tag}'], ['x'.repeat(129)], ['nul\u0000'], ['\u00a0'], [7]])(
    'refuses the session id %j',
    async (bad) => {
      const redis = idleClient();

      const error = await refusal(redis, (rms) => rms.reserve({ intent, sessionId: bad as string, leaseMs: 1000 }));

      expect(error).toMatchObject({ field: 'sessionId' });
      expect(redis.status).toBe('wait');
    },
  );

  it.each([['0'], ['01'], ['-1'], ['+1'], ['1.0'], ['1e3'], [' 1'], ['1 '], ['9223372036854775808'], ['99999999999999999999'], [1], [1n]])(
    'refuses the fencing token %s',
    async (bad) => {
      const redis = idleClient();

      const error = await refusal(redis, (rms) => rms.extend({ intent, sessionId: 's', fencingToken: bad as string, leaseMs: 1000 }));

      expect(error).toMatchObject({ field: 'fencingToken' });
      expect(redis.status).toBe('wait');
    },
  );

  it.each([[0], [-1], [1.5], [NaN], [Infinity], [MAX_LEASE_MS + 1], ['1000']])('refuses the lease %j', async (bad) => {
    const redis = idleClient();

    const error = await refusal(redis, (rms) => rms.reserve({ intent, sessionId: 's', leaseMs: bad as number }));

    expect(error).toMatchObject({ field: 'leaseMs' });
    expect(redis.status).toBe('wait');
  });

  it.each([[0], [-5], [0.5]])('refuses the marker expiry %j', async (bad) => {
    const redis = idleClient();

    const finalize = await refusal(redis, (rms) => rms.finalize({ intent, sessionId: 's', fencingToken: token, existsTtlMs: bad }));
    const mark = await refusal(redis, (rms) => rms.markExists({ intent, fencingToken: token, existsTtlMs: bad }));

    expect([finalize, mark]).toMatchObject([{ field: 'existsTtlMs' }, { field: 'existsTtlMs' }]);
    expect(redis.status).toBe('wait');
  });

  it('refuses a missing input object', async () => {
    const redis = idleClient();

    const error = await refusal(redis, (rms) => rms.free(undefined as unknown as { intent: string; fencingToken: string }));

    expect(error).toMatchObject({ field: 'input' });
  });

  it('accepts the largest bigint token, a 128-character session id and a 24 h lease (reaching Redis)', async () => {
    const redis = idleClient();

    const error = await refusal(redis, (rms) =>
      rms.extend({ intent, sessionId: 's'.repeat(128), fencingToken: '9223372036854775807', leaseMs: MAX_LEASE_MS }),
    );

    expect(error).not.toBeInstanceOf(RmsValidationError);
    expect(redis.status).not.toBe('wait');
  });

  it.each([['a{b}'], ['a b'], ['x'.repeat(65)], ['ü:']])('refuses the key prefix %j', (prefix) => {
    const act = () => new Rms(idleClient(), { keyPrefix: prefix });

    expect(act).toThrow(RmsValidationError);
  });

  it.each([[0], [-1], [1.5]])('refuses the command timeout %j', (commandTimeoutMs) => {
    const act = () => new Rms(idleClient(), { keyPrefix: 'rs:', commandTimeoutMs });

    expect(act).toThrow(RmsValidationError);
  });
});
