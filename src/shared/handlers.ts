/**
 * The reservation saga's update and query. Apart from the rest of its contract (./saga) because
 * defining them loads the Temporal workflow library, which a client answering at the gate never needs.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { ReservationAnswer, ReservationRequest, SagaState } from './saga';

/** Returns the reservation answer as soon as it is known. */
export const reservationUpdate = defineUpdate<ReservationAnswer, [ReservationRequest]>('reservation');

/**
 * Retries, once an operator fixed their cause, the compensations a saga waiting in NEEDS_ATTENTION
 * could not finish; answers the saga's state after that round: ended (its outcome) or waiting again
 * (NEEDS_ATTENTION). Refused (NOT_NEEDING_ATTENTION, nothing recorded) unless the saga waits.
 */
export const redriveUpdate = defineUpdate<SagaState, []>('redrive');

/** The saga's current state. */
export const stateQuery = defineQuery<SagaState>('state');
