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
import { context, ProxyTracerProvider, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
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

/** `fn`'s result, the span ended when it settles (with the error it throws recorded). */
async function endingWith<T>(span: Span, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).name });
    throw err;
  } finally {
    span.end();
  }
}

/** Runs a function with a span active (see {@link inGateSpan}). */
export type UnderSpan = <R>(fn: () => R) => R;

/** An {@link UnderSpan} that runs the function as it is: where no span was made (see {@link tracingOff}). */
export const runHere: UnderSpan = (fn) => fn();

/**
 * Whether no tracer provider is registered with the OpenTelemetry API in this process (neither
 * `startTracing` nor an app registered one). Every span is then a no-op one that records nothing
 * and whose context is the active one's (or none), so making it active changes nothing either: a
 * hot path may make no span at all. A few property reads, no allocation.
 */
export function tracingOff(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider && provider.getDelegateTracer(TRACER_NAME) === undefined;
}

/**
 * Runs `fn` under a new span named `name`, ended when `fn` settles (with the error it throws recorded);
 * for the gate's answer, whose common case is a rejection that nobody samples. The span is made
 * active only when it is recorded. An unsampled one is not: its Redis call and its
 * PostgreSQL lookup then make no spans (the ioredis and pg instrumentations make none without a
 * parent span), and no context is carried through their promises (on Node 20, AsyncLocalStorage
 * pays for every promise once a context has been set). `fn` runs what must carry the decision on
 * (the workflow start: a saga whose gate was not sampled is not sampled either) through `underSpan`,
 * which makes the span active for it.
 */
export async function inGateSpan<T>(name: string, attributes: Record<string, string>, fn: (span: Span, underSpan: UnderSpan) => Promise<T>): Promise<T> {
  const span = tracer().startSpan(name, { attributes });
  if (span.isRecording()) return context.with(trace.setSpan(context.active(), span), () => endingWith(span, () => fn(span, (run) => run())));
  return fn(span, (run) => context.with(trace.setSpan(context.active(), span), run));
}
