/**
 * tracingOff: true while no tracer provider is registered with the OpenTelemetry API (the gate then
 * makes no span at all), false once one is (startTracing's, or an app's own), and true again after.
 */
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { runHere, tracingOff } from '../../src/tracing';

afterEach(() => trace.disable());

describe('tracingOff', () => {
  it('is true with no tracer provider registered, false with one, and true again once it is gone', () => {
    trace.disable();
    expect(tracingOff()).toBe(true);

    trace.setGlobalTracerProvider(new BasicTracerProvider());
    expect(tracingOff()).toBe(false);

    trace.disable();
    expect(tracingOff()).toBe(true);
  });

  it('runHere runs the function as it is', () => {
    expect(runHere(() => 42)).toBe(42);
  });
});
