/**
 * Custom search attributes of sagas, so they can be found in the Temporal UI and by `saga list`
 * (e.g. `SagaOutcome = "COMPENSATED"`). `make dev` and the test setup register them on the server.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** The saga type, e.g. `order`. */
export const SAGA_TYPE = defineSearchAttributeKey('SagaType', SearchAttributeType.KEYWORD);
/** The current phase (RESERVING, WRITING, ...). */
export const SAGA_PHASE = defineSearchAttributeKey('SagaPhase', SearchAttributeType.KEYWORD);
/** The terminal outcome once there is one (COMPLETED, REJECTED, COMPENSATED, COMPENSATION_FAILED, EXPIRED). */
export const SAGA_OUTCOME = defineSearchAttributeKey('SagaOutcome', SearchAttributeType.KEYWORD);
/** The intent key (`<scope>:<hash>`): never raw intent data. */
export const INTENT_KEY = defineSearchAttributeKey('IntentKey', SearchAttributeType.KEYWORD);

/** Every custom search attribute, for registration. */
export const SEARCH_ATTRIBUTES = [SAGA_TYPE, SAGA_PHASE, SAGA_OUTCOME, INTENT_KEY] as const;
