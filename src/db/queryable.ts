/** What the db layer runs statements on, and the one place that runs them. */
import type pg from 'pg';
import { translateDbError } from './errors';

/**
 * Anything a statement can run on: the pool (autocommit, one statement per transaction), or a
 * checked-out client (possibly inside the caller's open transaction).
 */
export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/**
 * Runs one parameterised statement on `q`; connection failures become `DbUnavailableError`,
 * everything else propagates unchanged. `what` names the operation in the error message.
 */
export async function runQuery<R extends pg.QueryResultRow>(
  q: Queryable,
  what: string,
  text: string,
  values: readonly unknown[],
): Promise<pg.QueryResult<R>> {
  try {
    // Pool and Client have the same query overloads; the union is not callable without a cast.
    return await (q as pg.Pool).query<R>(text, values as unknown[]);
  } catch (err) {
    return translateDbError(err, what);
  }
}

/** Like {@link runQuery}, with rows as arrays (column names cannot collide). */
export async function runArrayQuery(
  q: Queryable,
  what: string,
  text: string,
  values: readonly unknown[],
): Promise<pg.QueryArrayResult<unknown[]>> {
  try {
    return await (q as pg.Pool).query<unknown[]>({ text, values: values as unknown[], rowMode: 'array' });
  } catch (err) {
    return translateDbError(err, what);
  }
}
