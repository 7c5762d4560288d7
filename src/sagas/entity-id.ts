/**
 * The ids callers are handed for entities: a row's bigint id, encrypted. A caller can neither read
 * a row number off an id nor guess a valid id from another: the id is one AES-256 block (the row id
 * and eight zero bytes) under a key derived from INTENT_KEY_SECRET and the table's name, written in
 * base64url (22 characters). A random or altered id decrypts to nonzero check bytes, 2⁻⁶⁴ unlikely
 * otherwise, and names no entity.
 *
 * Ids of earlier versions were the row ids themselves; they are taken only for a table that opts in
 * (`legacy.numericIds`, see LegacyRows; their rows' owners are checked as for any id), and an
 * operation's result names its entity by its new id.
 */
import { createCipheriv, createDecipheriv, hkdfSync, type KeyObject, createSecretKey } from 'node:crypto';
import { isRowId } from '../db/fenced-table';

/**
 * What an entity id looks like: 22 base64url characters, or a row id as earlier versions handed
 * out. For an input schema's field that names an entity (`z.string().regex(ENTITY_ID_PATTERN)`).
 */
export const ENTITY_ID_PATTERN = /^(?:[A-Za-z0-9_-]{22}|[1-9][0-9]{0,18})$/;

const OPAQUE = /^[A-Za-z0-9_-]{22}$/;

const MAX_BIGINT = (1n << 63n) - 1n;
const keys = new WeakMap<Uint8Array, Map<string, KeyObject>>();

function keyOf(secret: Uint8Array, table: string): KeyObject {
  let byTable = keys.get(secret);
  if (!byTable) keys.set(secret, (byTable = new Map<string, KeyObject>()));
  let key = byTable.get(table);
  if (!key) {
    const bytes = hkdfSync('sha256', secret, new Uint8Array(0), `reservation-saga entity id v1\0${table}`, 32);
    byTable.set(table, (key = createSecretKey(Buffer.from(bytes))));
  }
  return key;
}

function block(key: KeyObject, input: Buffer, encrypt: boolean): Buffer {
  const cipher = encrypt ? createCipheriv('aes-256-ecb', key, null) : createDecipheriv('aes-256-ecb', key, null);
  cipher.setAutoPadding(false);
  return Buffer.concat([cipher.update(input), cipher.final()]);
}

/** The id callers are given for row `rowId` of `table` (a positive bigint as a decimal string). */
export function encodeEntityId(secret: Uint8Array, table: string, rowId: string): string {
  if (!isRowId(rowId)) throw new TypeError(`${JSON.stringify(String(rowId).slice(0, 40))} is not a row id`);
  const plain = Buffer.alloc(16);
  plain.writeBigUInt64BE(BigInt(rowId), 0);
  return block(keyOf(secret, table), plain, true).toString('base64url');
}

/**
 * The row id an entity id names in `table`, or undefined when it names none: not an id of this
 * table under this secret (altered, made up, or another table's), or not an id at all. A row id as
 * earlier versions handed out is taken as it is with `numericIds` (a table that opts in), and names
 * nothing without.
 */
export function decodeEntityId(secret: Uint8Array, table: string, id: string, options: { numericIds?: boolean } = {}): string | undefined {
  if (isRowId(id)) return options.numericIds === true ? id : undefined;
  if (typeof id !== 'string' || !OPAQUE.test(id)) return undefined;
  const bytes = Buffer.from(id, 'base64url');
  // base64url has 4 spare bits in 22 characters: an id with them set is not one this module wrote.
  if (bytes.length !== 16 || bytes.toString('base64url') !== id) return undefined;
  const plain = block(keyOf(secret, table), bytes, false);
  if (plain.readBigUInt64BE(8) !== 0n) return undefined;
  const row = plain.readBigUInt64BE(0);
  return row > 0n && row <= MAX_BIGINT ? row.toString() : undefined;
}

/**
 * What a caller is told of an entity it may not operate on: missing, undone, another owner's or not
 * an id at all, all in the same words.
 */
export function entityNotFound(scope: string, id: string, type: string): string {
  return `there is no ${scope} ${id} to run ${type} on (or its creating saga was undone, or it was released)`;
}
