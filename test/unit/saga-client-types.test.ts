/**
 * The types an app's saga list gives its client: `SagaClient.connect({ sagas })` narrows `start` to
 * the declared names, each with its own input. These are compile-time checks: `make typecheck`
 * fails when a line marked @ts-expect-error compiles, or when an asserted type differs.
 */
import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import type { SagaClient } from '../../src/client';
import { defineOperation, defineSaga, ENTITY_ID_PATTERN, fencedTable, type SagaInputOf, type SagaNameOf, type SagaTypes } from '../../src/sagas';

const noop = async (): Promise<null> => null;
const loans = fencedTable('loans', ['copy']);
const loan = defineSaga({
  type: 'loan',
  scope: 'loan',
  schema: z.object({ copy: z.string(), weeks: z.number().int() }).strict(),
  intent: (input) => ({ copy: input.copy }),
  table: loans,
  row: (input) => ({ copy: input.copy }),
  steps: [{ step: 'lend', compensation: 'unlend' }],
  handlers: { lend: noop, unlend: noop },
});
const loanReturn = defineOperation({
  type: 'loan-return',
  scope: 'loan',
  schema: z.object({ loan: z.string().regex(ENTITY_ID_PATTERN) }).strict(),
  entity: (input) => input.loan,
  table: loans,
  releases: true,
  steps: [{ step: 'takeBack' }],
  handlers: { takeBack: noop },
});
const sagas = [loan, loanReturn];
expectTypeOf(sagas).toBeArray();

describe('a client typed by its saga list', () => {
  it('knows the declared names, and the input of each', () => {
    expectTypeOf(loan.type).toEqualTypeOf<'loan'>();
    expectTypeOf<SagaNameOf<typeof sagas>>().toEqualTypeOf<'loan' | 'loan-return'>();
    expectTypeOf<SagaInputOf<typeof sagas, 'loan'>>().toEqualTypeOf<{ copy: string; weeks: number }>();
    expectTypeOf<SagaInputOf<typeof sagas, 'loan-return'>>().toEqualTypeOf<{ loan: string }>();
    // An object of declarations, as a saga module may export them.
    expectTypeOf<SagaNameOf<{ readonly loan: typeof loan; readonly ret: typeof loanReturn }>>().toEqualTypeOf<'loan' | 'loan-return'>();
  });

  it('refuses a misspelt name and an input of another type at compile time', () => {
    // Typed, never called: the checks are the compiler's.
    const starts = async (client: SagaClient<typeof sagas>) => {
      await client.start('loan', { copy: 'c-1', weeks: 3 });
      await client.start('loan-return', { loan: 'AAAAAAAAAAAAAAAAAAAAAA' });
      // @ts-expect-error -- no saga type 'lone'
      await client.start('lone', { copy: 'c-1', weeks: 3 });
      // @ts-expect-error -- weeks is a number
      await client.start('loan', { copy: 'c-1', weeks: '3' });
      // @ts-expect-error -- the return's input is not the loan's
      await client.start('loan-return', { copy: 'c-1', weeks: 3 });
    };
    expectTypeOf(starts).toBeFunction();
  });

  it('takes any name and input when made without declarations (a CLI, the HTTP server)', () => {
    const untyped = async (client: SagaClient, types: SagaTypes) => {
      await client.start('anything', { any: 'input' });
      return types;
    };
    expectTypeOf(untyped).toBeFunction();
    expectTypeOf<SagaNameOf<SagaTypes>>().toEqualTypeOf<string>();
  });
});
