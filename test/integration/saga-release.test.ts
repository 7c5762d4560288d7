/**
 * Releasing an entity so its intent can be taken again: a copy of a book is lent (`loan`, which
 * creates the entity), returned (`loan-return`, an operation that releases it) and lent again as a
 * new entity. Against the real Temporal dev server, PostgreSQL and Redis; the loans live in a schema
 * of this file's own, created as an app creates its table (`fencedTableSql`).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPool } from '../../src/db';
import { fencedTableSql } from '../../src/db/fenced-schema';
import { defineOperation, defineSaga, ENTITY_ID_PATTERN, fencedTable, SagaInputError, sagaTypesOf, type SagaTypes, type StepHandler } from '../../src/sagas';
import { testConfig } from '../helpers/context';
import { wipeKeys } from '../helpers/redis-backends';
import { startHarness, type SagaHarness } from '../helpers/saga-harness';

const schema = `release_${randomBytes(4).toString('hex')}`;
const loans = fencedTable(`${schema}.loans`, ['copy', 'borrower'], {});

const loanSchema = z.object({ copy: z.string().min(1), borrower: z.string().min(1) }).strict();
type Loan = z.infer<typeof loanSchema>;
const byId = z.object({ loan: z.string().regex(ENTITY_ID_PATTERN) }).strict();
type ById = z.infer<typeof byId>;

/** Each lend and return is written to the ledger, keyed by its saga: the effects a test counts. */
const record =
  (what: string): StepHandler<unknown> =>
  async (tx, ctx) => {
    const entity = ctx.operation?.entityId ?? ctx.entity?.id;
    await tx.query(`INSERT INTO ${schema}.ledger (saga_key, entity_id, what) VALUES ($1, $2, $3) ON CONFLICT (saga_key, what) DO NOTHING`, [ctx.sagaKey, entity, what]);
    return { entity };
  };

const types: SagaTypes = sagaTypesOf([
  defineSaga<Loan>({
    type: 'loan',
    scope: 'loan',
    schema: loanSchema,
    // One loan per copy at a time: who borrows it is not part of the intent.
    intent: (input) => ({ copy: input.copy }),
    table: loans,
    row: (input) => ({ copy: input.copy, borrower: input.borrower }),
    steps: [{ step: 'lend', compensation: 'unlend' }],
    handlers: { lend: record('lent'), unlend: record('unlent') },
  }),
  defineOperation<ById>({
    type: 'loan-return',
    scope: 'loan',
    schema: byId,
    entity: (input) => input.loan,
    table: loans,
    releases: true,
    steps: [{ step: 'takeBack', compensation: 'handBack' }],
    handlers: { takeBack: record('returned'), handBack: record('handed back') },
  }),
  defineOperation<ById>({
    type: 'loan-renew',
    scope: 'loan',
    schema: byId,
    entity: (input) => input.loan,
    table: loans,
    steps: [{ step: 'renew' }],
    handlers: { renew: record('renewed') },
  }),
]);

let h: SagaHarness;
let setup: Pool;
beforeAll(async () => {
  // The table exists before the worker starts: it checks that the table can hold released rows.
  setup = createPool(testConfig('saga release').db);
  await setup.query(`CREATE SCHEMA ${schema}`);
  await setup.query(fencedTableSql(`${schema}.loans`, 'copy text NOT NULL, borrower text NOT NULL', { operations: true }));
  await setup.query(`CREATE TABLE ${schema}.ledger (saga_key text NOT NULL, entity_id bigint NOT NULL, what text NOT NULL, PRIMARY KEY (saga_key, what))`);
  h = await startHarness('saga release', { sagaTypes: types });
});
afterAll(async () => {
  await h?.stop();
  await setup?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await setup?.end();
});

const copy = () => `copy-${randomUUID()}`;

async function lend(loan: Loan, key = `lend-${randomUUID()}`) {
  return h.client.start('loan', loan, { idempotencyKey: key, waitMs: 30_000 });
}

async function giveBack(entityId: string, key = `return-${randomUUID()}`) {
  return h.client.start('loan-return', { loan: entityId }, { idempotencyKey: key, waitMs: 30_000 });
}

async function rowsOf(copyId: string): Promise<{ id: string; status: string; token: string; borrower: string }[]> {
  const { rows } = await h.pool.query<{ id: string; status: string; token: string; borrower: string }>(
    `SELECT id, status, last_fencing_token::text AS token, borrower FROM ${schema}.loans WHERE copy = $1 ORDER BY id`,
    [copyId],
  );
  return rows;
}

describe('a released entity', () => {
  it('frees its intent: the copy is lent again as a new entity with a higher token, the returned loan kept as RELEASED', async () => {
    const c = copy();
    const first = await lend({ copy: c, borrower: 'ada' });
    expect(first).toMatchObject({ reservation: { status: 'SUCCESS' }, outcome: 'COMPLETED' });
    // Lent: the same copy cannot be lent to anyone else.
    expect((await lend({ copy: c, borrower: 'bob' })).reservation).toEqual({ status: 'DUPLICATE' });

    const returned = await giveBack(first.final!.entityId!);
    expect(returned).toMatchObject({ reservation: { status: 'SUCCESS' }, outcome: 'COMPLETED' });

    const second = await lend({ copy: c, borrower: 'bob' });
    expect(second).toMatchObject({ reservation: { status: 'SUCCESS' }, outcome: 'COMPLETED' });
    expect(second.final!.entityId).not.toBe(first.final!.entityId);
    const rows = await rowsOf(c);
    expect(rows.map((r) => [r.status, r.borrower])).toEqual([
      ['RELEASED', 'ada'],
      ['COMPLETED', 'bob'],
    ]);
    expect(BigInt(rows[1]!.token)).toBeGreaterThan(BigInt(rows[0]!.token));
    expect(BigInt(second.final!.fencingToken!)).toBeGreaterThan(BigInt(first.final!.fencingToken!));
  });

  it("answers a retry of each key from its own saga: the first loan, the return, and not the copy's new loan", async () => {
    const c = copy();
    const firstKey = `lend-${randomUUID()}`;
    const returnKey = `return-${randomUUID()}`;
    const first = await lend({ copy: c, borrower: 'ada' }, firstKey);
    await giveBack(first.final!.entityId!, returnKey);
    const second = await lend({ copy: c, borrower: 'bob' });

    const firstAgain = await lend({ copy: c, borrower: 'ada' }, firstKey);
    const returnAgain = await giveBack(first.final!.entityId!, returnKey);

    expect(firstAgain).toMatchObject({ workflowId: first.workflowId, replayed: true, reservation: { status: 'SUCCESS' }, outcome: 'COMPLETED' });
    expect(firstAgain.final?.entityId ?? (await h.client.result(first.workflowId)).entityId).toBe(first.final!.entityId);
    expect(returnAgain).toMatchObject({ replayed: true, outcome: 'COMPLETED' });
    expect((await h.client.result(second.workflowId)).entityId).not.toBe(first.final!.entityId);
    // Nothing ran twice: one lend per loan, one return.
    const { rows } = await h.pool.query<{ what: string; n: string }>(
      `SELECT what, count(*)::text AS n FROM ${schema}.ledger WHERE saga_key IN ($1, $2, $3) GROUP BY what ORDER BY what`,
      [first.workflowId, second.workflowId, `loan-return-${returnKey}`],
    );
    expect(rows).toEqual([
      { what: 'lent', n: '2' },
      { what: 'returned', n: '1' },
    ]);
  });

  it('is found by no operation again: a renewal of the returned loan is refused as a missing entity', async () => {
    const first = await lend({ copy: copy(), borrower: 'ada' });
    await giveBack(first.final!.entityId!);

    const renewal = h.client.start('loan-renew', { loan: first.final!.entityId! }, { idempotencyKey: `renew-${randomUUID()}` });

    await expect(renewal).rejects.toThrow(SagaInputError);
    await expect(renewal).rejects.toMatchObject({ code: 'ENTITY_NOT_FOUND' });
    // The lock the refusal took was given back: a return of the new loan is not held up.
  });

  it('is never live again after Redis lost its data: the copy is lent as a new entity, and the first key still gets its own loan', async () => {
    const c = copy();
    const firstKey = `lend-${randomUUID()}`;
    const first = await lend({ copy: c, borrower: 'ada' }, firstKey);
    await giveBack(first.final!.entityId!);
    // Every key of this harness's prefix gone: markers, tombstones, ended records.
    await wipeKeys(h.redis, h.config.redis.keyPrefix);

    const firstAgain = await lend({ copy: c, borrower: 'ada' }, firstKey);
    const second = await lend({ copy: c, borrower: 'bob' });

    expect(firstAgain).toMatchObject({ workflowId: first.workflowId, replayed: true, outcome: 'COMPLETED' });
    expect(second).toMatchObject({ reservation: { status: 'SUCCESS' }, outcome: 'COMPLETED' });
    expect((await rowsOf(c)).map((r) => r.status)).toEqual(['RELEASED', 'COMPLETED']);
  });

  it('is lent once when 12 requests for the returned copy race: one SUCCESS, the others wait or are told it is lent', async () => {
    const c = copy();
    const first = await lend({ copy: c, borrower: 'ada' });
    await giveBack(first.final!.entityId!);

    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => h.newClient().start('loan', { copy: c, borrower: `b${i}` }, { idempotencyKey: `race-${randomUUID()}` })));

    expect(answers.filter((a) => a.reservation.status === 'SUCCESS')).toHaveLength(1);
    expect(answers.every((a) => a.reservation.status !== 'SUCCESS' || a.started)).toBe(true);
    const winner = answers.find((a) => a.reservation.status === 'SUCCESS')!;
    expect((await h.client.result(winner.workflowId)).outcome).toBe('COMPLETED');
    expect((await rowsOf(c)).map((r) => r.status)).toEqual(['RELEASED', 'COMPLETED']);
  });

  it('never has two live loans of a copy while it is returned and requested at once', async () => {
    const c = copy();
    const first = await lend({ copy: c, borrower: 'ada' });
    let returned = false;
    const returning = giveBack(first.final!.entityId!).finally(() => (returned = true));
    // Requests for the copy while the return runs: DUPLICATE until its release, then one loan; and
    // once the return completed, the next request is that loan, however long the return took.
    const answers: string[] = [];
    let lentAgain: Awaited<ReturnType<typeof lend>> | undefined;
    while (!lentAgain) {
      const last = returned;
      const answer = await h.newClient().start('loan', { copy: c, borrower: 'bob' }, { idempotencyKey: `during-${randomUUID()}` });
      answers.push(answer.reservation.status);
      if (answer.reservation.status === 'SUCCESS') lentAgain = answer;
      else if (last) break;
    }
    expect((await returning).outcome).toBe('COMPLETED');

    expect(lentAgain).toBeDefined();
    expect(answers.slice(0, -1).every((s) => s === 'DUPLICATE' || s === 'CONFLICT')).toBe(true);
    expect((await h.client.result(lentAgain!.workflowId)).outcome).toBe('COMPLETED');
    expect((await rowsOf(c)).map((r) => r.status)).toEqual(['RELEASED', 'COMPLETED']);
  });
});
