/**
 * How `reservation-saga/testing` finds the Temporal CLI for its dev server: TEMPORAL_CLI when set
 * (an executable file, else a typed error naming it), then `temporal` on PATH, in PATH's order; and,
 * with neither, `@temporalio/testing` if it is installed, a typed error naming every way out if not.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DevServerStartError, findTemporalCli, startDevServer, TemporalCliNotFoundError } from '../../src/testing/dev-server';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'rs-find-cli-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A file named `temporal` in `sub`, executable or not. */
function cli(sub: string, executable = true): string {
  mkdirSync(path.join(dir, sub), { recursive: true });
  const file = path.join(dir, sub, 'temporal');
  writeFileSync(file, '#!/bin/sh\n');
  chmodSync(file, executable ? 0o755 : 0o644);
  return file;
}

const pathOf = (...subs: string[]) => subs.map((s) => path.join(dir, s)).join(path.delimiter);

describe('findTemporalCli', () => {
  it('takes TEMPORAL_CLI over a `temporal` on PATH', () => {
    const named = cli('named');
    cli('on-path');

    expect(findTemporalCli({ TEMPORAL_CLI: named, PATH: pathOf('on-path') })).toBe(named);
  });

  it('takes the first executable `temporal` on PATH, passing over a file that is not executable and a folder', () => {
    cli('plain', false);
    mkdirSync(path.join(dir, 'folder', 'temporal'), { recursive: true });
    const found = cli('second');

    expect(findTemporalCli({ PATH: pathOf('missing', 'plain', 'folder', 'second') })).toBe(found);
  });

  it('finds nothing with an empty PATH and no TEMPORAL_CLI', () => {
    expect(findTemporalCli({ PATH: '' })).toBeUndefined();
  });

  it('refuses a TEMPORAL_CLI that is no executable file, naming it, even with a `temporal` on PATH', () => {
    cli('on-path');
    const plain = cli('plain', false);

    for (const named of [plain, path.join(dir, 'missing', 'temporal'), dir]) {
      expect(() => findTemporalCli({ TEMPORAL_CLI: named, PATH: pathOf('on-path') })).toThrow(TemporalCliNotFoundError);
      expect(() => findTemporalCli({ TEMPORAL_CLI: named, PATH: pathOf('on-path') })).toThrow(`TEMPORAL_CLI=${named} is not an executable file`);
    }
  });
});

describe('startDevServer without a CLI', () => {
  const notFound = (name: string) => Object.assign(new Error(`Cannot find package '${name}' imported from /app/node_modules/reservation-saga/dist/src/testing/dev-server.js`), { code: 'ERR_MODULE_NOT_FOUND' });

  it('names every way out when @temporalio/testing is not installed', async () => {
    const failure = startDevServer({ env: { PATH: '' }, loadTesting: () => Promise.reject(notFound('@temporalio/testing')) });

    await expect(failure).rejects.toThrow(TemporalCliNotFoundError);
    await expect(failure).rejects.toThrow(/set TEMPORAL_CLI to it, or `npm install --save-dev @temporalio\/testing`; or give settings.TEMPORAL_ADDRESS/);
  });

  it('passes on an error of loading @temporalio/testing that is not its absence', async () => {
    const broken = notFound('@temporalio/core-bridge');

    await expect(startDevServer({ env: { PATH: '' }, loadTesting: () => Promise.reject(broken) })).rejects.toBe(broken);
  });

  it('starts the server @temporalio/testing downloads, with the saga search attributes, and says so when that fails', async () => {
    const asked: unknown[] = [];
    const testing = (fails: boolean) => async () => ({
      TestWorkflowEnvironment: {
        createLocal: async (options: unknown) => {
          asked.push(options);
          if (fails) throw new Error('failed to download ephemeral server executable');
          return { address: '127.0.0.1:7233', teardown: async () => {} };
        },
      },
    });

    const server = await startDevServer({ env: { PATH: '' }, loadTesting: testing(false) });
    const failure = startDevServer({ env: { PATH: '' }, loadTesting: testing(true) });

    expect(server).toMatchObject({ address: '127.0.0.1:7233', source: '@temporalio/testing' });
    const names = (asked[0] as { server: { searchAttributes: { name: string }[] } }).server.searchAttributes.map((k) => k.name);
    expect(names).toEqual(['SagaType', 'SagaPhase', 'SagaOutcome', 'IntentKey']);
    await expect(failure).rejects.toThrow(DevServerStartError);
    await expect(failure).rejects.toThrow('@temporalio/testing could not start its dev server (it downloads one on first use): failed to download');
  });
});
