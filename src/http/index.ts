/** The HTTP API of the gate (`saga serve`). */
export { BearerTokens, CLIENT_ID_PATTERN, type ApiClient } from './auth';
export { classifyError } from './errors';
export { HEADER_KEY_PATTERN, MAX_HEADER_KEY_LENGTH, httpOwner, namespacedKey, ownsWorkflow, readHeaderKey } from './idempotency-key';
export { LIST_LIMIT, LIST_QUERY_SCHEMA, openApiDocument } from './openapi';
export { problem, ProblemType, type Problem } from './problems';
export { runSagaServer, type RunningSagaServer, type RunSagaServerOptions } from './run';
export { createSagaServer, type ReadinessProbe, type SagaBackend, type SagaServerOptions, type SagaServerStats } from './server';
