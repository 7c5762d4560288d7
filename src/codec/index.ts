/**
 * Payload encryption for Temporal: codec keys from the environment, the AES-256-GCM payload codec and
 * the data converter built on it, and the codec server that lets the Web UI and CLI read the data.
 * Not for workflow code: it uses Node built-ins (workflows get the failure converter by path).
 */
export * from './keys';
export * from './encryption-codec';
export * from './server';
