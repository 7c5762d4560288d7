import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config';
import { TEST_INTENT_SECRET } from '../helpers/secrets';

// Docker cannot run on the project's machines; this keeps docker-compose.yml consistent with the config.
const root = path.resolve(__dirname, '../..');
const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, { ports?: string[]; environment?: Record<string, string>; build?: string }>;
};
const defaults = loadConfig({});

function portOf(url: string): string {
  const u = new URL(url);
  return u.port || (u.protocol.startsWith('redis') ? '6379' : '5432');
}

describe('docker-compose.yml', () => {
  it('has the stack: PostgreSQL, Redis, Temporal, its UI and the worker', () => {
    expect(Object.keys(compose.services)).toEqual(
      expect.arrayContaining(['postgres', 'redis', 'temporal', 'temporal-ui', 'worker']),
    );
    expect(compose.services.worker!.build).toBe('.');
  });

  it('publishes the ports the config defaults point at', () => {
    expect(compose.services.postgres!.ports).toContain(`${portOf(defaults.db.url)}:5432`);
    expect(compose.services.redis!.ports).toContain(`${portOf(defaults.redis.url)}:6379`);
    expect(compose.services.temporal!.ports).toContain(`${defaults.temporal.address.split(':')[1]}:7233`);
    expect(compose.services['temporal-ui']!.ports).toContain(`${new URL(defaults.temporal.uiUrl).port}:8080`);
  });

  it('gives the worker only variables the config knows, with values it accepts, pointing at the services', () => {
    const env = compose.services.worker!.environment!;
    for (const name of Object.keys(env)) expect(CONFIG_VARIABLES).toContain(name);
    // A secret comes from the caller's environment, and compose refuses to start without it.
    expect(env.INTENT_KEY_SECRET).toMatch(/^\$\{INTENT_KEY_SECRET:\?.+\}$/);

    const config = loadConfig({ ...env, INTENT_KEY_SECRET: TEST_INTENT_SECRET.toString('base64') });

    expect(config.temporal.address).toBe('temporal:7233');
    expect(new URL(config.redis.url).hostname).toBe('redis');
    expect(new URL(config.db.url).hostname).toBe('postgres');
    expect(new URL(config.db.url).pathname).toBe(new URL(defaults.db.url).pathname);
    expect(config.temporal.taskQueue).toBe(defaults.temporal.taskQueue);
  });
});
