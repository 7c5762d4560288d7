/**
 * `reservation-saga/http`: the HTTP front door for an app's saga types (`POST /v1/sagas/{type}`,
 * reads, lists and cancels, RFC 9457 problems, an OpenAPI document of the app's types).
 */
export { createSagaServer, runSagaServer, openApiDocument, type RunningSagaServer, type RunSagaServerOptions, type SagaServerOptions, type SagaBackend, type ReadinessProbe, type ApiClient } from '../http';
