/**
 * The app's saga types: what its worker runs and its clients accept. The `saga` CLI finds this
 * module through package.json's "reservation-saga".sagas.
 *
 * `signup` creates a sign-up. Its intent is the email: the same email twice is answered DUPLICATE at
 * the gate, whatever the plan or the idempotency key. The fenced row goes into `signups`; then the
 * step `activate` runs in the app's database, undone by `deactivate` if a later step fails.
 */
import { z } from 'zod';
import { defineSaga, fencedTable, StepRejectedError } from 'reservation-saga';

const signupSchema = z
  .object({
    email: z.string().trim().toLowerCase().max(254).regex(/^[^\s@]+@[^\s@]+$/, 'must be an email address'),
    plan: z.enum(['free', 'pro']),
  })
  .strict();

export type SignupInput = z.infer<typeof signupSchema>;

/** The sign-ups' fenced table (src/migrate.ts creates it) and the data columns a saga's row fills. */
export const signupsTable = fencedTable('signups', ['email', 'plan']);

export const signupSaga = defineSaga<SignupInput>({
  type: 'signup',
  scope: 'signup',
  schema: signupSchema,
  intent: (input) => ({ email: input.email }),
  table: signupsTable,
  row: (input) => ({ email: input.email, plan: input.plan }),
  steps: [{ step: 'activate', compensation: 'deactivate' }],
  handlers: {
    // Each handler runs in the transaction that records its idempotency key: its effect happens once.
    // The fencing token keeps a stale saga off a row that a newer one has taken over.
    activate: async (tx, { intentKey, fencingToken }) => {
      const { rowCount } = await tx.query('UPDATE signups SET activated_at = now() WHERE intent_key = $1 AND last_fencing_token = $2', [intentKey, fencingToken]);
      if (rowCount !== 1) throw new StepRejectedError('the sign-up is no longer this saga\'s', 'FENCED_OUT');
      return { activated: true };
    },
    deactivate: async (tx, { intentKey, fencingToken }) => {
      await tx.query('UPDATE signups SET activated_at = NULL WHERE intent_key = $1 AND last_fencing_token = $2', [intentKey, fencingToken]);
      return { deactivated: true };
    },
  },
});

/** What the worker runs and the clients accept. */
export const sagas = [signupSaga];
