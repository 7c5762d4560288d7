/**
 * Whether tracing is asked for, and loading and starting it if so: this module loads nothing of
 * OpenTelemetry, so the CLI can ask before any command runs and pay nothing when tracing is off. The
 * packages tracing loads are optional (./packages): each loader here checks them first, so a
 * missing one is named in a TracingPackagesMissingError rather than failing an import deep inside.
 */
import type * as temporalTracing from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from './index';
import { requireTracingPackages } from './packages';
import type * as sdk from './sdk';

/**
 * Whether the environment asks for traces: an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or an explicit `OTEL_TRACES_EXPORTER`, unless
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || exporter === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || exporter);
}

/**
 * ./sdk (the OpenTelemetry Node SDK and the instrumentations), loaded now.
 * @throws TracingPackagesMissingError when a tracing package is not installed.
 */
export function loadTracingSdk(): typeof sdk {
  requireTracingPackages();
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- synchronous: the worker's preload registers the instrumentations before its other imports
  return require('./sdk') as typeof sdk;
}

/**
 * Temporal's OpenTelemetry interceptors, loaded now (the client's and the worker's, when tracing is on).
 * @throws TracingPackagesMissingError when a tracing package is not installed.
 */
export async function loadTemporalTracing(): Promise<typeof temporalTracing> {
  requireTracingPackages();
  return import('@temporalio/interceptors-opentelemetry');
}

/**
 * A process's entry point: starts tracing as `service.name` `serviceName` when the environment asks
 * for it (`startTracing` in ./sdk, loaded only then), else does nothing and loads nothing.
 * @throws TracingPackagesMissingError when it asks for it and a tracing package is not installed.
 */
export async function startTracingIfRequested(serviceName: string): Promise<Tracing | undefined> {
  if (!tracingRequested()) return undefined;
  requireTracingPackages();
  return (await import('./sdk.js')).startTracing({ serviceName });
}
