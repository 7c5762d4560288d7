/**
 * The log of a worker an app makes in its own process (createWorker, as its tests do): the Temporal
 * runtime's entries as one JSON line each at LOG_LEVEL and above (an error as its name and message,
 * no stack), so an app's test log is not flooded by the failures it provokes; a runtime the app
 * installed itself is kept.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { testConfig } from '../helpers/context';
import { envOf } from '../helpers/processes';

const probe = path.join(__dirname, '../helpers/log-probe.ts');

async function runProbe(env: NodeJS.ProcessEnv): Promise<string[]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', probe], {
    cwd: path.join(__dirname, '../..'),
    env: { ...envOf(testConfig('worker-log')), WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'), ...env },
  });
  return stdout.split('\n').filter((line) => line.includes('probe '));
}

describe('a worker made with createWorker in an app\'s process', () => {
  it('logs the runtime\'s entries at LOG_LEVEL and above, one JSON line each, an error without its stack', { timeout: 60_000 }, async () => {
    const lines = await runProbe({ LOG_LEVEL: 'WARN' });
    const entries = lines.map((line) => JSON.parse(line) as { level: string; msg: string; error?: unknown });
    expect(entries.map((e) => [e.level, e.msg])).toEqual([
      ['WARN', 'probe warn'],
      ['ERROR', 'probe error'],
    ]);
    expect(entries[0]!.error).toEqual({ name: 'Error', message: 'expected in the probe' });
  });

  it('keeps a runtime the app installed before it', { timeout: 60_000 }, async () => {
    const lines = await runProbe({ LOG_LEVEL: 'ERROR', PROBE_OWN_RUNTIME: '1' });
    expect(lines).toEqual(['own: INFO probe info', 'own: WARN probe warn', 'own: ERROR probe error']);
  });
});
