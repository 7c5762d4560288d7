/**
 * `reservation-saga`: what an app declares its saga types with, and the client that starts them.
 * Loads no part of `@temporalio/worker`: a web service that only starts sagas imports this entry.
 * Workers import `reservation-saga/worker`; the HTTP front door is `reservation-saga/http`.
 */
export {
  defineSaga,
  defineOperation,
  fencedTable,
  externalStep,
  isExternalStep,
  stepIdempotencyKey,
  sagaTypesOf,
  DEFAULT_COMPENSATION,
  DEFAULT_ATTENTION_MS,
  StepRejectedError,
  CompensationRefusedError,
  SagaInputError,
  SagaDeclarationError,
  MAX_PAYLOAD_BYTES,
  ENTITY_ID_PATTERN,
  type SagaDefinition,
  type SagaLimit,
  type EntityOperation,
  type SagaType,
  type SagaList,
  type SagaNameOf,
  type SagaInputOf,
  type SagaTypes,
  type SagaDeclaration,
  type OperationDeclaration,
  type StepContext,
  type StepHandler,
  type StepImplementation,
  type ExternalStep,
  type ExternalStepContext,
  type OperationContext,
  type EntityContext,
} from '../sagas';
export { FencedTable, type FencedRow, type FencedStatus, type ClaimableRow, type ClaimResult, type ReleaseResult, type FencedTableOptions, type LegacyRows } from '../db/fenced-table';
export { SagaClient, SagaEndedError, SettleError, RedriveError, SignalError, DEFAULT_OWNER, type SagaClientConnectOptions, type OwnerScope, type StartOptions, type StartedSaga, type SagaSummary, type ListFilter, type GateCounts } from '../client';
export { loadConfig, ConfigError, CONFIG_VARIABLES, type Config } from '../config';
export { TracingPackagesMissingError } from '../tracing/packages';
export {
  SagaOutcome,
  SagaAbort,
  SagaPhase,
  ErrorType,
  sagaWorkflowId,
  type ReservationAnswer,
  type SagaState,
  type SagaAttention,
  type SagaEnd,
  type SagaError,
  type SagaStepPlan,
  type SagaWait,
  type SagaSignalReceipt,
  type StepRetryPolicy,
  DEFAULT_COMPENSATION_ATTEMPTS,
  DEFAULT_COMPENSATION_RETRY,
  type CompensationPolicy,
  type SagaTimings,
  type SagaStart,
} from '../shared/saga';
