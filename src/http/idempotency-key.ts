/**
 * The `Idempotency-Key` header (IETF draft "The Idempotency-Key HTTP Header Field") and the client
 * namespaces of the keys. The key SagaClient.start gets is `<client id>.<header key>`, so two clients
 * sending the same key never share a saga; the workflow id is then `<type>-<client id>.<header key>`,
 * which is how the API tells whose saga an id names.
 */
import { IDEMPOTENCY_KEY_PATTERN, sagaWorkflowId } from '../shared/saga';

/** Longest header key: a 32-character client id, the dot and this fill SagaClient's 128 characters. */
export const MAX_HEADER_KEY_LENGTH = 95;

/** What a header key may hold: SagaClient's key characters (UUIDs, ULIDs and most tokens fit). */
export const HEADER_KEY_PATTERN = new RegExp(`^[A-Za-z0-9._:-]{1,${MAX_HEADER_KEY_LENGTH}}$`);

/**
 * The key of an `Idempotency-Key` header: the draft's Structured Field string (`"…"`), or the same
 * characters unquoted, as most clients send them. `missing` when there is none, `invalid` when it is
 * not a key SagaClient accepts.
 */
export function readHeaderKey(value: string | string[] | undefined): { key: string } | 'missing' | 'invalid' {
  if (value === undefined) return 'missing';
  // Several headers, or one list, are not one key.
  if (Array.isArray(value)) return 'invalid';
  const text = value.trim();
  if (text === '') return 'missing';
  const key = /^"[^"\\]*"$/.test(text) ? text.slice(1, -1) : text;
  return HEADER_KEY_PATTERN.test(key) ? { key } : 'invalid';
}

/** Who an HTTP client's sagas run for (SagaClient's `owner`): its entities are its own. */
export function httpOwner(clientId: string): string {
  return `http:${clientId}`;
}

/** The idempotency key SagaClient gets for `clientId`'s header key. */
export function namespacedKey(clientId: string, headerKey: string): string {
  const key = `${clientId}.${headerKey}`;
  // Client ids and header keys are checked on the way in; this only guards against a change of either rule.
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) throw new TypeError(`namespaced idempotency key of client ${clientId} does not fit SagaClient's key rules`);
  return key;
}

/**
 * Whether the workflow id `workflowId` names a saga of `clientId` (of one of `types`). Client ids
 * hold no `-` or `.`, and the header key follows the first `.` after the client id, so an id names
 * at most one client whatever the type names.
 */
export function ownsWorkflow(clientId: string, workflowId: string, types: readonly string[]): boolean {
  return types.some((type) => workflowId.startsWith(sagaWorkflowId(type, `${clientId}.`)) && workflowId.length > type.length + clientId.length + 2);
}
