import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, ConfigError, configEnv, loadConfig, requireIntentSecret } from '../../src/config';

describe('loadConfig', () => {
  it('gives the documented defaults for an empty environment', () => {
    const config = loadConfig({});

    expect(config.temporal).toMatchObject({ address: '127.0.0.1:7233', namespace: 'default', taskQueue: 'reservation-saga' });
    expect(config.temporal.tls).toBeUndefined();
    expect(config.redis).toMatchObject({ url: 'redis://127.0.0.1:6379', keyPrefix: 'rs:' });
    expect(config.db.url).toBe('postgres://postgres@127.0.0.1:5432/reservation_saga');
    expect(config.saga).toEqual({ leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000 });
    expect(config.simulations).toBe(false);
    expect(config.entityExistsTtlMs).toBe(86_400_000);
    expect(loadConfig({ ENTITY_EXISTS_TTL_MS: '0' }).entityExistsTtlMs).toBeUndefined();
  });

  it('turns the saga simulations (test knobs) on only when SAGA_SIMULATIONS says so', () => {
    expect(loadConfig({ SAGA_SIMULATIONS: 'true' }).simulations).toBe(true);
    expect(loadConfig({ SAGA_SIMULATIONS: '1' }).simulations).toBe(true);
    expect(loadConfig({ SAGA_SIMULATIONS: 'false' }).simulations).toBe(false);
    expect(loadConfig({ SAGA_SIMULATIONS: '' }).simulations).toBe(false);
  });

  it.each([
    ['REDIS_URL', 'nonsense'],
    ['DATABASE_URL', 'mysql://x/y'],
    ['TEMPORAL_ADDRESS', 'no-port'],
    ['LEASE_MS', '-5'],
    ['LEASE_MS', '1.5'],
    ['DB_POOL_MAX', 'many'],
    ['REDIS_KEY_PREFIX', 'has space'],
    ['REDIS_CLUSTER_NODES', 'a:1,b'],
    ['TEMPORAL_TLS', 'maybe'],
    ['SAGA_SIMULATIONS', 'maybe'],
  ])('refuses %s=%s with an error naming the variable', (variable, value) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
    try {
      loadConfig({ [variable]: value });
    } catch (err) {
      expect((err as ConfigError).variable).toBe(variable);
      expect((err as ConfigError).message).toMatch(new RegExp(`^${variable}: `));
    }
  });

  it('never shows a password from a refused URL', () => {
    expect(() => loadConfig({ DATABASE_URL: 'mysql://app:s3cret@db/x' })).toThrow('(got "mysql://app:***@db/x")');
    expect(() => loadConfig({ REDIS_URL: 'http://:s3cret@cache:6379' })).toThrow('(got "http://:***@cache:6379")');
  });

  it('requires heartbeat interval < heartbeat timeout < lease', () => {
    expect(() => loadConfig({ HEARTBEAT_INTERVAL_MS: '20000' })).toThrow(/HEARTBEAT_INTERVAL_MS: must be below HEARTBEAT_TIMEOUT_MS/);
    expect(() => loadConfig({ LEASE_MS: '10000' })).toThrow(/HEARTBEAT_TIMEOUT_MS: must be below LEASE_MS/);
  });

  it('turns on TLS for an API key or a client certificate, and wants cert and key together', () => {
    expect(loadConfig({ TEMPORAL_API_KEY: 'k' }).temporal.tls).toEqual({});
    expect(loadConfig({ TEMPORAL_TLS_CERT_PATH: '/c', TEMPORAL_TLS_KEY_PATH: '/k' }).temporal.tls).toMatchObject({ certPath: '/c', keyPath: '/k' });
    expect(() => loadConfig({ TEMPORAL_TLS_CERT_PATH: '/c' })).toThrow(ConfigError);
  });

  it('writes back an environment that loads into the same config, naming every variable', () => {
    const config = loadConfig({
      TEMPORAL_API_KEY: 'k',
      TEMPORAL_TLS_CA_PATH: '/ca.pem',
      REDIS_CLUSTER_NODES: '127.0.0.1:7000,127.0.0.1:7001',
      REDIS_KEY_PREFIX: 'x:',
      LEASE_MS: '9000',
      HEARTBEAT_INTERVAL_MS: '1000',
      HEARTBEAT_TIMEOUT_MS: '3000',
      SAGA_SIMULATIONS: 'true',
      INTENT_KEY_SECRET: randomBytes(32).toString('base64'),
    });

    const env = configEnv(config);

    expect(Object.keys(env).sort()).toEqual([...CONFIG_VARIABLES].sort());
    expect(loadConfig(env)).toEqual(config);
    expect(loadConfig(configEnv(loadConfig({})))).toEqual(loadConfig({}));
  });

  it('reads the intent-key secret as base64 of at least 32 bytes, and never shows a refused one', () => {
    const secret = randomBytes(32);

    expect(loadConfig({ INTENT_KEY_SECRET: secret.toString('base64') }).secrets.intentKey).toEqual(secret);
    expect(loadConfig({ INTENT_KEY_SECRET: secret.toString('base64url') }).secrets.intentKey).toEqual(secret);
    for (const bad of [randomBytes(31).toString('base64'), 'not base64 at all!']) {
      const error = (() => {
        try {
          loadConfig({ INTENT_KEY_SECRET: bad });
        } catch (err) {
          return err;
        }
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect(error).toMatchObject({ variable: 'INTENT_KEY_SECRET', message: expect.stringMatching(/at least 32 random bytes.*not shown/) });
      expect((error as Error).message).not.toContain(bad);
    }
  });

  it('lets a process that reserves or plans sagas start only with the intent-key secret', () => {
    expect(() => requireIntentSecret(loadConfig({}))).toThrow(expect.objectContaining({ variable: 'INTENT_KEY_SECRET', message: expect.stringMatching(/is not set/) }));
  });

  it('reads Redis Cluster seed nodes', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000, 127.0.0.1:7001' }).redis.clusterNodes).toEqual([
      { host: '127.0.0.1', port: 7000 },
      { host: '127.0.0.1', port: 7001 },
    ]);
  });

  it('makes an entry point print one clear line and exit 78 on a bad value', () => {
    const root = path.resolve(__dirname, '../..');
    let stderr = '';
    let status = 0;
    try {
      execFileSync(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
        cwd: root,
        env: { ...process.env, REDIS_URL: 'nonsense' },
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
      });
    } catch (err) {
      const e = err as { status: number; stderr: string };
      status = e.status;
      stderr = e.stderr;
    }
    expect(status).toBe(78);
    expect(stderr.trim().split('\n')).toEqual([
      'configuration error: REDIS_URL: must be a URL starting with redis:// or rediss:// (got "nonsense")',
    ]);
  });
});
