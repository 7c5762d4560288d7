/**
 * OpenTelemetry traces: one trace from `SagaClient.start` (or the HTTP request that calls it) through
 * the gate's Redis and PostgreSQL calls, the workflow start, the workflow and every activity, down to
 * their own Redis, PostgreSQL and HTTP calls.
 *
 * Off unless the standard OTLP environment asks for it ({@link tracingRequested}). Then a process's
 * entry point starts the OpenTelemetry Node SDK (`startTracing` in ./sdk, loaded only then), which
 * exports with the exporter, protocol, endpoint, headers, sampler and resource the `OTEL_*` variables
 * name. This module is light (the OpenTelemetry API only): the gate and the worker import it to ask
 * whether tracing is on ({@link activeTracing}) and to make the project's own spans.
 */
import { SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

/** The tracer of the project's own spans (`saga.start`). */
export const TRACER_NAME = 'reservation-saga';

export { startTracingIfRequested, tracingRequested } from './env';

/** Tracing as started in this process (by `startTracing`). */
export interface Tracing {
  /**
   * Where the workflow interceptors' spans go: the worker hands them to this processor (they are
   * made inside the workflow sandbox and reach the worker through a sink).
   */
  readonly workflowSpans: SpanProcessor;
  /** The resource of this process's spans (service name and the detected attributes). */
  readonly resource: Resource;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

let current: Tracing | undefined;

/** Tracing as started in this process, or undefined when it is off. */
export function activeTracing(): Tracing | undefined {
  return current;
}

/** Records the process's tracing (`startTracing` does; undefined when it stops). */
export function setActiveTracing(tracing: Tracing | undefined): void {
  current = tracing;
}

/** The tracer of the project's own spans (a no-op one while tracing is off). */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/**
 * Runs `fn` in a new active span named `name`, ending it when `fn` settles (recording the error it
 * throws). Without tracing the span is a no-op.
 */
export async function inSpan<T>(name: string, attributes: Record<string, string>, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).name });
      throw err;
    } finally {
      span.end();
    }
  });
}
