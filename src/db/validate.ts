/** Input checks shared by the db modules. */
import { InvalidArgumentError } from './errors';

/**
 * Returns `value` when it is a non-empty string PostgreSQL text can hold (no NUL).
 * @throws InvalidArgumentError naming `argument` otherwise.
 */
export function checkText(value: unknown, argument: string): string {
  if (typeof value !== 'string' || value === '') throw new InvalidArgumentError(argument, 'must be a non-empty string');
  if (value.includes('\u0000')) throw new InvalidArgumentError(argument, 'may not contain NUL (U+0000)');
  return value;
}
