/** Safe SQL identifiers: validated against a strict pattern, then double-quoted. */
import { InvalidArgumentError } from './errors';

/**
 * Lower-case letters, digits and `_`, not starting with a digit, at most 63 bytes (PostgreSQL's
 * NAMEDATALEN - 1). Lower case only, so a quoted name means the same as the unquoted one.
 */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Returns `name` double-quoted for SQL.
 * @throws InvalidArgumentError when `name` is outside the strict identifier pattern.
 */
export function quoteIdentifier(name: unknown, argument: string): string {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new InvalidArgumentError(argument, `${JSON.stringify(name)} is not an identifier (lower-case letters, digits and _, at most 63)`);
  }
  // The pattern admits no double quote, so wrapping is enough.
  return `"${name}"`;
}

/**
 * Returns `table` or `schema.table` quoted part by part.
 * @throws InvalidArgumentError when a part is outside the strict identifier pattern.
 */
export function quoteQualifiedName(name: unknown, argument: string): string {
  if (typeof name !== 'string') throw new InvalidArgumentError(argument, `${JSON.stringify(name)} is not a table name`);
  const parts = name.split('.');
  if (parts.length > 2) throw new InvalidArgumentError(argument, `${JSON.stringify(name)} has more than schema.table`);
  return parts.map((part) => quoteIdentifier(part, argument)).join('.');
}
