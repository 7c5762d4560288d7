/**
 * The package's entries as an app loads them: `reservation-saga` (declarations and the client) loads
 * no part of `@temporalio/worker`, whose native module a web service that only starts sagas must not
 * pay for; `reservation-saga/worker` does; `reservation-saga/testing` does not load `@temporalio/testing`,
 * which apps need not install. Each entry is loaded in a fresh node process.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');

/** The packages a fresh process has loaded after requiring `entry` (a file under src/public/). */
function packagesLoadedBy(entry: string): string[] {
  const script = `require('./src/public/${entry}'); process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
  const files = JSON.parse(execFileSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], { cwd: ROOT, encoding: 'utf8' })) as string[];
  const names = files.map((f) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1]).filter((n): n is string => n !== undefined);
  return [...new Set(names)].sort();
}

describe('the package entries', () => {
  it('reservation-saga loads no part of @temporalio/worker (nor the Temporal client until a call needs it)', () => {
    const loaded = packagesLoadedBy('index.ts');
    expect(loaded).toEqual(expect.arrayContaining(['zod']));
    expect(loaded.filter((p) => p.startsWith('@temporalio/'))).toEqual([]);
  }, 60_000);

  it('reservation-saga/worker loads the worker', () => {
    expect(packagesLoadedBy('worker.ts')).toContain('@temporalio/worker');
  }, 60_000);

  it('reservation-saga/testing loads @temporalio/testing (an optional peer) only when it must download a dev server', () => {
    const loaded = packagesLoadedBy('testing.ts');
    expect(loaded).toContain('@temporalio/worker');
    expect(loaded).not.toContain('@temporalio/testing');
  }, 60_000);
});
