/**
 * Imported first by a process's entry module (src/worker.ts): when the environment asks for traces,
 * the instrumentations are registered before ioredis and pg are loaded, so their calls are traced.
 * The SDK is loaded only then; the tracer provider itself is started by the entry's main
 * (`startTracing`).
 */
import { tracingRequested } from './env';
import type * as sdk from './sdk';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when tracing is on, and before anything else
if (tracingRequested()) (require('./sdk') as typeof sdk).registerInstrumentations();
