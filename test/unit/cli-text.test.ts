/**
 * What `saga list` and `saga status` print for a person (without --json): the list with its column
 * headers, aligned; a saga still being planned says so instead of showing an empty intent key.
 */
import { describe, expect, it } from 'vitest';
import { sagaListText, sagaStatusText } from '../../src/cli-text';
import type { SagaState } from '../../src/shared';

describe('saga list', () => {
  it('prints column headers and aligns the columns; "no sagas" when there are none', () => {
    const text = sagaListText([
      { workflowId: 'order-cart-ada-1', status: 'COMPLETED', phase: 'COMPENSATED', outcome: 'COMPENSATED' },
      { workflowId: 'order-2', status: 'RUNNING', phase: 'RUNNING_STEPS' },
    ]);

    expect(text.split('\n')).toEqual([
      'WORKFLOW ID       STATUS     PHASE          OUTCOME',
      'order-cart-ada-1  COMPLETED  COMPENSATED    COMPENSATED',
      'order-2           RUNNING    RUNNING_STEPS  -',
    ]);
    expect(sagaListText([])).toBe('no sagas');
  });
});

describe('saga status', () => {
  const planning: SagaState = { type: 'order', idempotencyKey: 'cart-1', requestHash: '', intentKey: '', phase: 'RESERVING', stepsDone: [], compensationsRun: [], errors: [] };
  const view = (status: string, state: SagaState) => ({ workflowId: 'order-cart-1', status, state, url: 'http://ui/order-cart-1' });

  it('says a running saga without an intent key yet is being planned, and one that ended so was never planned', () => {
    expect(sagaStatusText(view('RUNNING', planning)).split('\n')[1]).toBe('intent: planning (the worker has not derived it yet)');
    expect(sagaStatusText(view('FAILED', planning)).split('\n')[1]).toBe('intent: none (the saga ended before it was planned)');
  });

  it('prints the intent, fencing token and entity once planned', () => {
    const written: SagaState = { ...planning, intentKey: 'order:abc', fencingToken: '7', entityId: 'NG9e', phase: 'RUNNING_STEPS', stepsDone: ['chargePayment'] };
    expect(sagaStatusText(view('RUNNING', written)).split('\n')).toEqual([
      'order-cart-1: RUNNING, phase RUNNING_STEPS',
      'intent order:abc, fencing token 7, entity NG9e',
      'steps done: chargePayment; compensations run: -',
      'UI: http://ui/order-cart-1',
    ]);
  });
});
