/**
 * The packages tracing loads: the OpenTelemetry Node SDK, the instrumentations and Temporal's
 * OpenTelemetry interceptors (about 80 MB installed). They are optional peer dependencies of the
 * package, so an app that never traces installs none of them; an app that traces installs them
 * itself ({@link tracingInstallCommand}). This module loads none of them: it checks that they
 * resolve before anything loads them, and names the missing ones in a {@link TracingPackagesMissingError}.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../paths';

/**
 * What tracing loads (src/tracing/sdk.ts, and the interceptors in src/client.ts and src/worker.ts),
 * as package.json's optional `peerDependencies` name them (test/unit/tracing-packages.test.ts keeps
 * the two the same). `@opentelemetry/api` is not among them: a plain dependency, it makes the
 * project's own spans (no-ops while tracing is off).
 */
export const TRACING_PACKAGES = [
  '@opentelemetry/instrumentation',
  '@opentelemetry/instrumentation-http',
  '@opentelemetry/instrumentation-ioredis',
  '@opentelemetry/instrumentation-pg',
  '@opentelemetry/instrumentation-undici',
  '@opentelemetry/sdk-node',
  '@temporalio/interceptors-opentelemetry',
] as const;

/**
 * Tracing is asked for (the `OTEL_*` environment, see `tracingRequested`), but packages it loads
 * are not installed where this package can resolve them: `missing` names them, `installCommand` is
 * the npm command that installs them at the versions this package is built against.
 */
export class TracingPackagesMissingError extends Error {
  override readonly name = 'TracingPackagesMissingError';
  constructor(
    /** The tracing packages that do not resolve, in the order of package.json's peerDependencies. */
    readonly missing: readonly string[],
    /** `npm install <package>@<range> …` for the missing packages. */
    readonly installCommand: string,
  ) {
    super(
      `tracing is asked for (the OTEL_* environment) but ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed: ` +
        `they are optional peer dependencies of reservation-saga. Install them in the app (${installCommand}), ` +
        'or set OTEL_SDK_DISABLED=true to run without traces',
    );
  }
}

/**
 * `npm install` of `packages` (by default all of {@link TRACING_PACKAGES}) at the ranges of this
 * package's `peerDependencies`, so that npm installs versions it accepts.
 */
export function tracingInstallCommand(packages: readonly string[] = TRACING_PACKAGES): string {
  const ranges = peerRanges();
  return `npm install ${packages.map((name) => (ranges[name] ? `${name}@${ranges[name]}` : name)).join(' ')}`;
}

/**
 * Throws unless every tracing package resolves from this package (as the modules that load them
 * would resolve them). Cheap: resolving reads no package's code.
 * @throws TracingPackagesMissingError naming each one that does not resolve.
 */
export function requireTracingPackages(resolve: (id: string) => string = require.resolve): void {
  const missing = TRACING_PACKAGES.filter((name) => !resolves(name, resolve));
  if (missing.length > 0) throw new TracingPackagesMissingError(missing, tracingInstallCommand(missing));
}

/** Whether `name` resolves; only "not found" answers no (another failure is thrown as it is). */
function resolves(name: string, resolve: (id: string) => string): boolean {
  try {
    resolve(name);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' || (err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') return false;
    throw err;
  }
}

/** This package's `peerDependencies` (empty when its package.json cannot be read). */
function peerRanges(): Record<string, string> {
  try {
    const manifest = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { peerDependencies?: Record<string, string> };
    return manifest.peerDependencies ?? {};
  } catch {
    return {};
  }
}
