/**
 * The OpenTelemetry Node SDK and instrumentations, loaded only by a process that traces (see
 * ./index). The instrumentations (HTTP server and client, fetch, ioredis, pg) patch a module when it
 * is loaded, so {@link registerInstrumentations} runs before the process loads ioredis or pg:
 * `src/tracing/preload.ts` is the first import of `src/worker.ts`, and the CLI loads those modules
 * only in its commands' actions, after {@link startTracing}.
 *
 * Spans carry no saga data: Redis spans name the command only (never its keys or arguments), pg spans
 * the parameterised SQL text (never the values), HTTP spans the method, route and status.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { registerInstrumentations as register } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import type { Resource } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { activeTracing, setActiveTracing, tracingRequested, type Tracing } from './index';

let instrumentationsRegistered = false;

/**
 * Registers the HTTP, fetch, ioredis and pg instrumentations (once per process). They patch a module
 * when it is loaded: call this before anything imports ioredis or pg. Until a tracer provider is
 * started their spans are no-ops.
 */
export function registerInstrumentations(): void {
  if (instrumentationsRegistered) return;
  instrumentationsRegistered = true;
  register({
    instrumentations: [
      new HttpInstrumentation(),
      new UndiciInstrumentation(),
      // The command's name only: its keys are intent keys, its arguments session tags and tokens. Like
      // pg's below, a span only under a parent: an unsampled gate answer has none (inGateSpan).
      new IORedisInstrumentation({ dbStatementSerializer: (command) => command, requireParentSpan: true }),
      new PgInstrumentation({ requireParentSpan: true }),
    ],
  });
}

/** What {@link startTracing} needs. */
export interface StartTracingOptions {
  /** `service.name` of this process's spans, unless `OTEL_SERVICE_NAME` names one. */
  serviceName: string;
  /**
   * Span processors to use instead of the environment's exporters (tests pass an in-memory one).
   * With them tracing starts whatever the environment says.
   */
  spanProcessors?: SpanProcessor[];
  env?: NodeJS.ProcessEnv;
}

/**
 * Starts tracing in this process when the environment asks for it (or `spanProcessors` are given):
 * registers the instrumentations (if not yet) and the OpenTelemetry Node SDK as the global tracer
 * provider. Returns undefined, and changes nothing, when tracing is off. A second call returns the
 * first one's tracing.
 */
export function startTracing(options: StartTracingOptions): Tracing | undefined {
  const running = activeTracing();
  if (running) return running;
  const env = options.env ?? process.env;
  if (!options.spanProcessors && !tracingRequested(env)) return undefined;
  registerInstrumentations();
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME?.trim() || options.serviceName,
    ...(options.spanProcessors ? { spanProcessors: options.spanProcessors } : {}),
    // Traces only: the project's metrics are Prometheus's (src/metrics), its logs JSON lines.
    logRecordProcessors: [],
  });
  sdk.start();
  const provider = registeredProvider();
  const tracing: Tracing = {
    workflowSpans: forwardingProcessor(() => provider.getActiveSpanProcessor()),
    resource: provider.resource,
    shutdown: async () => {
      if (activeTracing() === tracing) setActiveTracing(undefined);
      await sdk.shutdown();
      // The API keeps the first globals registered: unregister them, so a later start registers anew.
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
  setActiveTracing(tracing);
  return tracing;
}

/** The SDK's tracer provider, behind the API's global proxy. */
function registeredProvider(): { resource: Resource; getActiveSpanProcessor(): SpanProcessor } {
  const proxy = trace.getTracerProvider() as { getDelegate?: () => unknown };
  const provider = proxy.getDelegate?.() as { resource?: Resource; getActiveSpanProcessor?: () => SpanProcessor } | undefined;
  if (!provider?.resource || !provider.getActiveSpanProcessor) throw new Error('startTracing: the OpenTelemetry SDK registered no tracer provider');
  return provider as { resource: Resource; getActiveSpanProcessor(): SpanProcessor };
}

/** A span processor that hands ended spans to the provider's own processors (its exporters). */
function forwardingProcessor(target: () => SpanProcessor): SpanProcessor {
  return {
    onStart: () => undefined,
    onEnd: (span: ReadableSpan) => target().onEnd(span),
    forceFlush: () => target().forceFlush(),
    shutdown: () => Promise.resolve(),
  };
}
