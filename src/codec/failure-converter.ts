/**
 * The failure converter of every process that uses the encryption codec, named by path in the data
 * converter (`failureConverterPath`) because workflow code runs it inside the Temporal sandbox too.
 * It moves a failure's message and stack trace into an encoded payload, so the payload codec
 * encrypts them like any other data. Sandbox-safe: it imports nothing but `@temporalio/common`.
 */
import { DefaultFailureConverter } from '@temporalio/common';

/** The SDK's failure converter with `encodeCommonAttributes` on: messages and stack traces are payloads. */
export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
