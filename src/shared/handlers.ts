/**
 * The reservation saga's update and query. Apart from the rest of its contract (./saga) because
 * defining them loads the Temporal workflow library, which a client answering at the gate never needs.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { ReservationAnswer, ReservationRequest, SagaSignalReceipt, SagaState } from './saga';

/** Returns the reservation answer as soon as it is known. */
export const reservationUpdate = defineUpdate<ReservationAnswer, [ReservationRequest]>('reservation');

/**
 * Retries, once an operator fixed their cause, the compensations a saga waiting in NEEDS_ATTENTION
 * could not finish; answers the saga's state after that round: ended (its outcome) or waiting again
 * (NEEDS_ATTENTION). Refused (NOT_NEEDING_ATTENTION, nothing recorded) unless the saga waits.
 */
export const redriveUpdate = defineUpdate<SagaState, []>('redrive');

/**
 * A signal a wait of the saga's plan waits for (see `SagaStepPlan.wait`): recorded once (a repeat
 * changes nothing and says so), before or during its wait. Refused (NOT_WAITING, nothing recorded)
 * for a signal no wait of the plan names, one whose wait timed out, or by a saga that has ended.
 */
export const signalUpdate = defineUpdate<SagaSignalReceipt, [{ signal: string; payload?: unknown }]>('signal');

/** The saga's current state. */
export const stateQuery = defineQuery<SagaState>('state');
