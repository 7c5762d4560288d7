/**
 * Imported first by a process's entry module (src/worker.ts): when the environment asks for traces,
 * the instrumentations are registered before ioredis and pg are loaded, so their calls are traced.
 * The SDK is loaded only then (and a missing tracing package throws TracingPackagesMissingError
 * here, naming it); the tracer provider itself is started by the entry's main (`startTracing`).
 */
import { loadTracingSdk, tracingRequested } from './env';

if (tracingRequested()) loadTracingSdk().registerInstrumentations();
