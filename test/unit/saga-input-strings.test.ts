/**
 * Strings PostgreSQL (and most other systems) refuse: a NUL character or an unpaired UTF-16 surrogate
 * in any string of a saga's input, or in any object key, is refused with INVALID_INPUT when the
 * request is prepared, before a reservation or any other side effect, for every saga type.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { defineSagaTypes, planSaga, prepareSaga, type SagaDefinition } from '../../src/sagas';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { blobTypes } from '../fixtures/blob-saga';
import { ordersTable, sagaTypes, type OrderInput } from '../fixtures/orders';

const timings = { leaseMs: 30_000, heartbeatIntervalMs: 5_000, heartbeatTimeoutMs: 15_000, compensationAttempts: 5 };
const cart: OrderInput = {
  customer: 'ada',
  items: [{ sku: 'jam', quantity: 2, priceCents: 250 }],
  payment: { card: '4242424242424242' },
};

/** A saga type with free-form strings at every depth: in an object, in an array, as record keys and values. */
const noteSchema = z
  .object({
    title: z.string().min(1),
    meta: z.object({ tags: z.array(z.string()), labels: z.record(z.string(), z.string()) }).strict(),
  })
  .strict();
type Note = z.infer<typeof noteSchema>;
const noteSaga: SagaDefinition<Note> = {
  type: 'note',
  scope: 'note',
  schema: noteSchema,
  intent: (note) => ({ title: note.title }),
  table: ordersTable,
  row: (note) => ({ title: note.title }),
  steps: [],
  handlers: {},
  compensation: { parallel: false, continueOnError: true, freeIntent: true },
};
const types = defineSagaTypes(noteSaga);
const note: Note = { title: 'hello', meta: { tags: ['a', 'b'], labels: { colour: 'blue' } } };

/** The SagaInputError `fn` throws (fails the test when it throws none). */
function refusal(fn: () => unknown): { name: string; code: string; message: string } {
  try {
    fn();
  } catch (err) {
    return err as { name: string; code: string; message: string };
  }
  throw new Error('expected the input to be refused, and it was accepted');
}

const HIGH = '\uD800';
const LOW = '\uDC00';

describe('hostile strings in a saga input', () => {
  it.each([
    ['a NUL character', `ada${'\u0000'}`, /NUL character/],
    ['a lone high surrogate', `ada${HIGH}`, /unpaired surrogate/],
    ['a lone low surrogate', `${LOW}ada`, /unpaired surrogate/],
    ['a surrogate pair in the wrong order', `a${LOW}${HIGH}a`, /unpaired surrogate/],
  ])('refuses an order whose customer holds %s with INVALID_INPUT naming the field, and not echoing the value', (_, customer, what) => {
    const err = refusal(() => prepareSaga('order', { ...cart, customer }, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }));

    expect(err).toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
    expect(err.message).toMatch(/^invalid order input at customer: /);
    expect(err.message).toMatch(what);
    expect(err.message).not.toContain('ada');
  });

  it.each([
    ['a NUL in a string nested in an array', { ...note, meta: { ...note.meta, tags: ['a', `b${'\u0000'}`] } }, /^invalid note input at meta\.tags\.1: .*NUL/],
    ['a lone surrogate in a record value', { ...note, meta: { ...note.meta, labels: { colour: `bl${HIGH}ue` } } }, /^invalid note input at meta\.labels\.colour: .*unpaired surrogate/],
    ['a NUL in an object key', { ...note, meta: { ...note.meta, labels: { [`col${'\u0000'}our`]: 'blue' } } }, /^invalid note input at meta\.labels: a key .*NUL/],
    ['a lone surrogate in an object key', { ...note, meta: { ...note.meta, labels: { [`${LOW}colour`]: 'blue' } } }, /^invalid note input at meta\.labels: a key .*unpaired surrogate/],
  ])('refuses, for any saga type, %s with INVALID_INPUT naming where', (_, data, message) => {
    const err = refusal(() => prepareSaga('note', data, { timings, intentSecret: TEST_INTENT_SECRET, types }));

    expect(err).toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
    expect(err.message).toMatch(message);
  });

  it('refuses them in a saga a plain Temporal client started, when the worker plans it', () => {
    const start = { type: 'note', idempotencyKey: 'k1', data: { ...note, meta: { ...note.meta, tags: [`x${HIGH}`] } } };

    const err = refusal(() => planSaga(start, { workflowId: 'note-k1', namespace: 'default', timings, intentSecret: TEST_INTENT_SECRET, types }));

    expect(err).toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
    expect(err.message).toMatch(/^invalid note input at meta\.tags\.0: .*unpaired surrogate/);
  });

  describe('in a free-form field', () => {
    const nested = (depth: number, inner: unknown) => {
      let body = inner;
      for (let i = 0; i < depth; i++) body = [body];
      return body;
    };

    it('finds one at the deepest nesting accepted, and names where', () => {
      const err = refusal(() => prepareSaga('blob', { body: nested(62, `deep${'\u0000'}`) }, { timings, intentSecret: TEST_INTENT_SECRET, types: blobTypes }));

      expect(err).toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
      expect(err.message).toBe(`invalid blob input at body${'.0'.repeat(62)}: contains a NUL character (U+0000)`);
    });

    it('refuses deeper nesting with INVALID_INPUT, not a stack overflow, and names where in short', () => {
      const err = refusal(() => prepareSaga('blob', { body: nested(20_000, 'deep') }, { timings, intentSecret: TEST_INTENT_SECRET, types: blobTypes }));

      expect(err).toMatchObject({ name: 'SagaInputError', code: 'INVALID_INPUT' });
      expect(err.message).toMatch(/^invalid blob input at body(\.0)+: nested deeper than 64 levels$/);
    });
  });

  it('accepts well-formed text beyond ASCII: surrogate pairs, other control characters, any script', () => {
    const friendly = { ...note, title: 'héllo 😀 世界', meta: { tags: ['tab\there', 'Ω'], labels: { 'ключ 🔑': 'значение' } } };

    expect(prepareSaga('note', friendly, { timings, intentSecret: TEST_INTENT_SECRET, types }).payload).toEqual(friendly);
    expect(prepareSaga('order', { ...cart, customer: 'Zoë 😀' }, { timings, intentSecret: TEST_INTENT_SECRET, types: sagaTypes }).payload).toMatchObject({ customer: 'Zoë 😀' });
  });
});
