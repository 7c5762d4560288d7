/**
 * The gate's span (inGateSpan), with the real OpenTelemetry SDK in this process: a span no sampler
 * records is never made active, so the gate's own calls carry no context, yet what runs through
 * `underSpan` (the workflow start) carries the decision on, and a recorded span is the parent of
 * everything under it.
 */
import { context, trace, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, ParentBasedSampler, SamplingDecision, SimpleSpanProcessor, type Sampler } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { inGateSpan, tracer } from '../../src/tracing';

/** Records every root span but those named `drop`: a sampler that left the gate's answer out. */
function rootsBut(drop: string): Sampler {
  return {
    shouldSample: (_context, _traceId, name) => ({ decision: name === drop ? SamplingDecision.NOT_RECORD : SamplingDecision.RECORD_AND_SAMPLED }),
    toString: () => `roots but ${drop}`,
  };
}

const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  const provider = new BasicTracerProvider({ sampler: new ParentBasedSampler({ root: rootsBut('unsampled.start') }) });
  provider.addSpanProcessor(new SimpleSpanProcessor(exporter));
  provider.register({ contextManager });
});

afterAll(() => {
  trace.disable();
  context.disable();
});

beforeEach(() => exporter.reset());

/** A child span as an instrumentation makes one (under the active context), ended at once. */
function child(name: string): void {
  tracer().startSpan(name).end();
}

describe('inGateSpan', () => {
  it('leaves an unsampled answer inactive, and carries it on to what runs under it: nothing of that trace is recorded', async () => {
    let activeInGate: Span | undefined;
    await inGateSpan('unsampled.start', {}, async (span, underSpan) => {
      expect(span.isRecording()).toBe(false);
      activeInGate = trace.getSpan(context.active());
      await Promise.resolve();
      underSpan(() => child('StartWorkflow'));
    });
    // No context was set for the gate's calls...
    expect(activeInGate).toBeUndefined();
    // ...and the workflow start followed the unsampled answer: left out too, not recorded as a trace of its own.
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual([]);
  });

  it('makes a recorded answer the active parent of every call under it, and ends it with the error it throws', async () => {
    const failure = new Error('redis is away');
    await expect(
      inGateSpan('saga.start', { 'saga.type': 'order' }, async (span, underSpan) => {
        expect(span.isRecording()).toBe(true);
        child('EVALSHA');
        await Promise.resolve();
        underSpan(() => child('StartWorkflow'));
        throw failure;
      }),
    ).rejects.toBe(failure);
    const spans = exporter.getFinishedSpans();
    const root = spans.find((s) => s.name === 'saga.start')!;
    expect(root.status.message).toBe('Error');
    expect(root.events.map((e) => e.name)).toEqual(['exception']);
    expect(spans.filter((s) => s !== root).map((s) => [s.name, s.parentSpanId])).toEqual([
      ['EVALSHA', root.spanContext().spanId],
      ['StartWorkflow', root.spanContext().spanId],
    ]);
  });
});
