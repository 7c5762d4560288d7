/**
 * Tracing's packages (the OpenTelemetry SDK, the instrumentations, Temporal's interceptors) are
 * optional peer dependencies: an app that does not trace installs none of them. Each case runs in a
 * fresh node process where they cannot be found (test/helpers/without-packages.cjs), as in such an
 * app: the entries load; asking for traces (the OTEL_* environment) gets a TracingPackagesMissingError
 * that names what is missing and the npm command that installs it.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { requireTracingPackages, TRACING_PACKAGES, tracingInstallCommand, TracingPackagesMissingError } from '../../src/tracing/packages';

const ROOT = path.resolve(__dirname, '../..');
const WITHOUT_PACKAGES = path.join(ROOT, 'test/helpers/without-packages.cjs');
const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
};
/** What asks for traces (src/tracing/env.ts). */
const TRACING_ON = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
/** The error a script reports, as JSON on stdout. */
const REPORT_ERROR = `const report = (e) => process.stdout.write(JSON.stringify({ name: e.name, message: e.message, missing: e.missing, installCommand: e.installCommand }));`;

/** Runs node with `args` (after the TypeScript loader) where `hidden` cannot be found, with `env` over an environment without OTEL_*. */
function node(args: string[], hidden: readonly string[], env: Record<string, string> = {}) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')));
  const r = spawnSync(process.execPath, ['--require', WITHOUT_PACKAGES, '--require', 'tsx/cjs', ...args], {
    cwd: ROOT,
    env: { ...base, ...env, WITHOUT_PACKAGES: hidden.join(',') },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Requires `entry` (a file under src/public/) in such a process; its error, if it threw one. */
function load(entry: string, hidden: readonly string[], env: Record<string, string> = {}) {
  const r = node(['-e', `${REPORT_ERROR} try { require('./src/public/${entry}'); process.stdout.write('loaded'); } catch (e) { report(e); }`], hidden, env);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout === 'loaded' ? 'loaded' : (JSON.parse(r.stdout) as { name: string; message: string; missing?: string[]; installCommand?: string });
}

describe('without the tracing packages installed', () => {
  it('reservation-saga (the client entry) loads, even with the OTEL_* environment set', () => {
    expect(load('index.ts', TRACING_PACKAGES)).toBe('loaded');
    expect(load('index.ts', TRACING_PACKAGES, TRACING_ON)).toBe('loaded');
  }, 60_000);

  it('reservation-saga/worker loads while tracing is not asked for', () => {
    expect(load('worker.ts', TRACING_PACKAGES)).toBe('loaded');
  }, 60_000);

  it('reservation-saga/worker with tracing asked for throws TracingPackagesMissingError naming every package and the npm command', () => {
    const error = load('worker.ts', TRACING_PACKAGES, TRACING_ON);
    expect(error).toMatchObject({ name: 'TracingPackagesMissingError', missing: [...TRACING_PACKAGES] });
    const { installCommand, message } = error as { installCommand: string; message: string };
    expect(installCommand).toBe(`npm install ${TRACING_PACKAGES.map((name) => `${name}@${manifest.peerDependencies?.[name]}`).join(' ')}`);
    expect(message).toContain(installCommand);
    expect(message).toContain('OTEL_SDK_DISABLED=true');
  }, 60_000);

  it('starting tracing as runWorker and the CLI do names only the package that is missing', () => {
    const script = `${REPORT_ERROR} require('./src/tracing/env.ts').startTracingIfRequested('test').then(() => process.stdout.write('{"name":"started"}'), report);`;
    const r = node(['-e', script], ['@temporalio/interceptors-opentelemetry'], TRACING_ON);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      name: 'TracingPackagesMissingError',
      missing: ['@temporalio/interceptors-opentelemetry'],
      installCommand: `npm install @temporalio/interceptors-opentelemetry@${manifest.peerDependencies?.['@temporalio/interceptors-opentelemetry']}`,
    });
  }, 60_000);

  it('the CLI with tracing asked for exits 78 (CONFIG) with one line naming the packages and the npm command', () => {
    const r = node([path.join(ROOT, 'src/cli.ts'), '--help'], TRACING_PACKAGES, TRACING_ON);
    expect(r.code).toBe(78);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`configuration error: ${new TracingPackagesMissingError(TRACING_PACKAGES, tracingInstallCommand()).message}\n`);
  }, 60_000);
});

describe('the tracing packages', () => {
  it('are optional peer dependencies of package.json, and devDependencies at the same ranges (never dependencies)', () => {
    const optional = Object.keys(manifest.peerDependencies ?? {}).filter((name) => manifest.peerDependenciesMeta?.[name]?.optional === true);
    expect(optional).toEqual(expect.arrayContaining([...TRACING_PACKAGES]));
    for (const name of TRACING_PACKAGES) {
      expect(manifest.devDependencies[name], name).toBe(manifest.peerDependencies?.[name]);
      expect(manifest.dependencies[name], name).toBeUndefined();
    }
    // The project's own spans (src/tracing/index.ts) use the API whether tracing is on or off.
    expect(manifest.dependencies['@opentelemetry/api']).toBeDefined();
  });

  it('resolve in this checkout (their devDependencies)', () => {
    expect(() => requireTracingPackages()).not.toThrow();
  });

  it('are installed by the command docs/operations.md shows', () => {
    expect(readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8')).toContain(`\`${tracingInstallCommand()}\``);
  });
});
