/**
 * Whether tracing is asked for, and starting it if so: this module loads nothing of OpenTelemetry, so
 * the CLI can ask before any command runs and pay nothing when tracing is off.
 */
import type { Tracing } from './index';

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
 * A process's entry point: starts tracing as `service.name` `serviceName` when the environment asks
 * for it (`startTracing` in ./sdk, loaded only then), else does nothing and loads nothing.
 */
export async function startTracingIfRequested(serviceName: string): Promise<Tracing | undefined> {
  return tracingRequested() ? (await import('./sdk.js')).startTracing({ serviceName }) : undefined;
}
