/**
 * scripts/lib/dev-env.sh: `make dev` starts each of its processes with the development secrets of
 * dev.env under the environment's own. Run in real bash, as scripts/dev-up runs it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');
const data = mkdtempSync(path.join(tmpdir(), 'dev-env-'));
writeFileSync(path.join(data, 'dev.env'), ['INTENT_KEY_SECRET=dev-secret', 'SAGA_CODEC_KEYS=dev1:dev-key', 'SAGA_SERVE_TOKENS=dev:dev-token', ''].join('\n'));
afterAll(() => rmSync(data, { recursive: true, force: true }));

/** What two commands started one after the other, as dev-up starts the codec server and then saga serve, see. */
function seenBy(env: Record<string, string>): string[] {
  const script = [
    'set -euo pipefail',
    `data=${JSON.stringify(data)}`,
    `. ${JSON.stringify(path.join(ROOT, 'scripts/lib/dev-env.sh'))}`,
    '( dev_env; echo "first $SAGA_SERVE_TOKENS $INTENT_KEY_SECRET $SAGA_CODEC_KEYS" )',
    '( dev_env; echo "second $SAGA_SERVE_TOKENS $INTENT_KEY_SECRET $SAGA_CODEC_KEYS" )',
    'echo "script ${SAGA_SERVE_TOKENS:-unset}"',
  ].join('\n');
  return execFileSync('bash', ['-c', script], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' }).trim().split('\n');
}

describe('dev_env (scripts/lib/dev-env.sh)', () => {
  it('gives every command the environment\'s own secrets over the development ones, the second as the first', () => {
    expect(seenBy({ SAGA_SERVE_TOKENS: 'ci:own-token', INTENT_KEY_SECRET: 'own-secret' })).toEqual([
      'first ci:own-token own-secret dev1:dev-key',
      'second ci:own-token own-secret dev1:dev-key',
      'script ci:own-token',
    ]);
  });

  it('gives the development secrets where the environment has none, and leaves the script\'s own shell without them', () => {
    expect(seenBy({})).toEqual(['first dev:dev-token dev-secret dev1:dev-key', 'second dev:dev-token dev-secret dev1:dev-key', 'script unset']);
  });

  it('is the only way scripts/dev-up reads dev.env', () => {
    const devUp = readFileSync(path.join(ROOT, 'scripts/dev-up'), 'utf8');
    expect(devUp).toContain('scripts/lib/dev-env.sh');
    expect(devUp).not.toMatch(/^\s*\.\s+"\$data\/dev\.env"/m);
  });
});
