/**
 * The saga types an app declares, and the one place a request becomes a saga input: validated
 * against the type's schema, reduced to its intent key, hashed for the idempotency check.
 */
import { hash, randomUUID, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { keyedHash, keyedRequestHash, requestHash } from '../db/canonical-json';
import { intentKey, intentKeyIfNfc, limitTag, MAX_FENCING_TOKEN, MAX_LEASE_MS, RmsValidationError, scopeValueDigest } from '../rms';
import {
  DEFAULT_COMPENSATION_RETRY,
  DEFAULT_OWNER,
  ErrorType,
  IDEMPOTENCY_KEY_PATTERN,
  MAX_DEADLINE_MS,
  OWNER_PATTERN,
  sagaWorkflowId,
  type GateReservation,
  type SagaInput,
  type SagaLimitCounters,
  type SagaPlan,
  type SagaTimings,
} from '../shared/saga';
import { isEntityOperation, limitsOf, SagaInputError, type SagaType } from './definition';
import { decodeEntityId, encodeEntityId, entityNotFound } from './entity-id';
export { decodeEntityId, encodeEntityId, entityNotFound, ENTITY_ID_PATTERN } from './entity-id';
export * from './definition';
export * from './define';
import { sagaTypesOf } from './define';

/** Largest accepted payload (its JSON), so a hostile request cannot bloat workflow history. */
export const MAX_PAYLOAD_BYTES = 64 * 1024;

/** Deepest nesting of objects and arrays accepted in a payload (a cycle counts as too deep). */
export const MAX_PAYLOAD_DEPTH = 64;

/** Saga types by name: what a worker runs and a client accepts. */
export type SagaTypes = Readonly<Record<string, SagaType<unknown>>>;

/** Saga types by name, from their definitions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each definition has its own input type
export function defineSagaTypes(...definitions: SagaType<any>[]): SagaTypes {
  return sagaTypesOf(definitions);
}

/** The definition of `type`, or a SagaInputError naming the known ones. */
export function sagaDefinition(type: string, types: SagaTypes): SagaType<unknown> {
  const def = Object.hasOwn(types, type) ? types[type] : undefined;
  if (!def) {
    throw new SagaInputError(`unknown saga type ${JSON.stringify(type)} (known: ${Object.keys(types).join(', ')})`, ErrorType.UNKNOWN_SAGA_TYPE);
  }
  return def;
}

/**
 * Validates `data` against the type's schema, and refuses any string or object key in it holding a
 * NUL character or an unpaired surrogate; a SagaInputError says what is wrong and where.
 */
export function parseSagaData(def: SagaType<unknown>, data: unknown): unknown {
  // Before anything walks it recursively (JSON.stringify, the schema, the canonical JSON). Plain
  // data within the depth whose JSON cannot be too long is let through by one walk; anything else
  // (too deep, long, or not plain) is measured exactly, and refused as it always was.
  if (jsonBytesBound(data, 0) > MAX_PAYLOAD_BYTES) {
    const deep = pathDeeperThan(data, MAX_PAYLOAD_DEPTH);
    if (deep) {
      throw new SagaInputError(`invalid ${def.type} input at ${fieldPath(deep)}: nested deeper than ${MAX_PAYLOAD_DEPTH} levels`, ErrorType.INVALID_INPUT);
    }
    const size = Buffer.byteLength(JSON.stringify(data) ?? '', 'utf8');
    if (size > MAX_PAYLOAD_BYTES) {
      throw new SagaInputError(`payload is ${size} bytes; at most ${MAX_PAYLOAD_BYTES} are accepted`, ErrorType.INVALID_INPUT);
    }
  }
  const parsed = def.schema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new SagaInputError(`invalid ${def.type} input at ${fieldPath(issue.path)}: ${issue.message}`, ErrorType.INVALID_INPUT);
  }
  const hostile = mayHoldHostileString(parsed.data, 0) ? findHostileString(parsed.data) : undefined;
  if (hostile) throw new SagaInputError(`invalid ${def.type} input at ${fieldPath(hostile.path)}: ${hostile.problem}`, ErrorType.INVALID_INPUT);
  return parsed.data;
}

/** Most characters JSON.stringify writes for a number (`-0.000001234567890123456` is 24). */
const MAX_NUMBER_JSON = 32;

/**
 * An upper bound of the UTF-8 bytes of `JSON.stringify(value)`, in one walk that allocates nothing;
 * Infinity where none is known cheaply: a value nested {@link MAX_PAYLOAD_DEPTH} levels deep or more
 * (or a cycle), and anything JSON.stringify may treat in its own way (functions, symbols, BigInt,
 * `toJSON`, objects that are not plain), for which the caller measures exactly. A UTF-16 code unit
 * takes at most 6 bytes (`\uXXXX`); a missing value (`undefined`) is counted as `null`.
 */
function jsonBytesBound(value: unknown, depth: number): number {
  switch (typeof value) {
    case 'string':
      return 2 + 6 * value.length;
    case 'number':
      return MAX_NUMBER_JSON;
    case 'boolean':
    case 'undefined':
      return 5;
    case 'object': {
      if (value === null) return 4;
      if (depth >= MAX_PAYLOAD_DEPTH || 'toJSON' in value) return Infinity;
      let bytes = 2;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length && bytes <= MAX_PAYLOAD_BYTES; i++) bytes += 1 + jsonBytesBound(value[i], depth + 1);
        return bytes;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return Infinity;
      for (const key in value) {
        if (bytes > MAX_PAYLOAD_BYTES) break;
        if (Object.hasOwn(value, key)) bytes += 4 + 6 * key.length + jsonBytesBound((value as Record<string, unknown>)[key], depth + 1);
      }
      return bytes;
    }
    default:
      return Infinity;
  }
}

/**
 * Where `def`'s schema refuses an input a saga of it recorded when it was planned (under the schema
 * of then), as the worker about to run it tells: the field's path and what is wrong, never a value
 * (an unknown field is named: the schema of then declared it); undefined when the schema accepts it.
 */
export function recordedInputRefusal(def: SagaType<unknown>, payload: unknown): string | undefined {
  const parsed = def.schema.safeParse(payload);
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0]!;
  const what = issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}` : issue.code;
  return `at ${fieldPath(issue.path)}: ${what}`;
}

/** A field's path as an error shows it: `items.0.sku`, at most 200 characters (nesting may be deep). */
function fieldPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  const where = path.map(String).join('.');
  return where.length > 200 ? `${where.slice(0, 200)}…` : where;
}

/**
 * The path to the first object or array nested deeper than `max` levels, without recursion. Each
 * node links to its parent: a path is built only for the one returned (every request is walked).
 */
function pathDeeperThan(value: unknown, max: number): (string | number)[] | undefined {
  const pending: (WalkNode & { depth: number })[] = [{ value, depth: 0 }];
  for (let node = pending.pop(); node; node = pending.pop()) {
    const v = node.value;
    if (typeof v !== 'object' || v === null) continue;
    if (node.depth >= max) return pathOf(node);
    const depth = node.depth + 1;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) pending.push({ value: v[i], depth, key: i, parent: node });
    } else {
      for (const key in v) if (Object.hasOwn(v, key)) pending.push({ value: (v as Record<string, unknown>)[key], depth, key, parent: node });
    }
  }
  return undefined;
}

/** A value met in a walk of a request, linked to its parent (a path is built only when one is reported). */
interface WalkNode {
  value: unknown;
  key?: string | number;
  parent?: WalkNode;
}

/** The keys from the root to `node`. */
function pathOf(node: WalkNode): (string | number)[] {
  const path: (string | number)[] = [];
  for (let n: WalkNode | undefined = node; n?.key !== undefined; n = n.parent) path.push(n.key);
  return path.reverse();
}

/** A lone high surrogate (no low one after it) or a lone low one (no high one before it). */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Whether `value` may hold a string or an object key {@link findHostileString} refuses: false only
 * when a walk that allocates nothing (no path, no node) found none within {@link MAX_PAYLOAD_DEPTH}
 * levels; what it cannot tell (deeper nesting) is left to findHostileString, which says where.
 */
function mayHoldHostileString(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return stringProblem(value) !== undefined;
  if (typeof value !== 'object' || value === null) return false;
  if (depth >= MAX_PAYLOAD_DEPTH) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (mayHoldHostileString(value[i], depth + 1)) return true;
    return false;
  }
  // The own enumerable string keys, as Object.entries gives them to findHostileString.
  for (const key in value) {
    if (Object.hasOwn(value, key) && (stringProblem(key) !== undefined || mayHoldHostileString((value as Record<string, unknown>)[key], depth + 1))) return true;
  }
  return false;
}

/** What is wrong with `text` for the systems a saga writes to, or undefined when nothing is. */
function stringProblem(text: string): string | undefined {
  // PostgreSQL refuses U+0000 in text and jsonb; an unpaired surrogate is no Unicode text at all
  // (PostgreSQL refuses its \u escape in jsonb, and UTF-8 encoding turns every one into U+FFFD, so
  // two different inputs would hash to one intent).
  if (text.includes('\u0000')) return 'contains a NUL character (U+0000)';
  if (UNPAIRED_SURROGATE.test(text)) return 'contains an unpaired surrogate (not valid Unicode text)';
  return undefined;
}

/**
 * The first string or object key in a validated input that PostgreSQL, or UTF-8, cannot carry, with
 * where it is; checked for every saga type, whatever its schema, before any side effect. The value
 * itself is never quoted back: it may be personal data. Walks without recursion and without copying
 * paths, so no nesting depth overflows the stack or costs more than linear time.
 */
function findHostileString(value: unknown): { path: (string | number)[]; problem: string } | undefined {
  const pending: WalkNode[] = [{ value }];
  for (let node = pending.pop(); node; node = pending.pop()) {
    const v = node.value;
    if (typeof v === 'string') {
      const problem = stringProblem(v);
      if (problem) return { path: pathOf(node), problem };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) pending.push({ value: v[i], key: i, parent: node });
    } else if (typeof v === 'object' && v !== null) {
      const entries = Object.entries(v);
      for (const [key] of entries) {
        const problem = stringProblem(key);
        if (problem) return { path: pathOf(node), problem: `a key ${problem}` };
      }
      for (let i = entries.length - 1; i >= 0; i--) pending.push({ value: entries[i]![1], key: entries[i]![0], parent: node });
    }
  }
  return undefined;
}

/** What {@link prepareSagaRequest} and {@link prepareSaga} take besides the type and its data. */
export interface PrepareOptions {
  idempotencyKey?: string;
  timings: SagaTimings;
  types: SagaTypes;
  intentSecret: Uint8Array;
  owner?: string;
  deadlineMs?: number | undefined;
}

/**
 * A request as the gate takes it: the workflow input but for the request hash and the limit counters,
 * which only an answer that starts a saga (or answers from one) needs, so that a DUPLICATE or a
 * CONFLICT pays for neither (see sagaRequestHash, sagaLimitCounters), and the plan of its steps,
 * which only the worker's plan holds.
 */
export type SagaRequest = Omit<SagaInput, 'requestHash' | 'limits' | 'steps' | 'compensation'>;

/** Builds the workflow input of a request; throws SagaInputError before any side effect. */
export function prepareSaga(type: string, data: unknown, options: PrepareOptions): SagaInput {
  const request = prepareSagaRequest(type, data, options);
  const limits = sagaLimitCounters(request, options.types, options.intentSecret);
  const def = sagaDefinition(type, options.types);
  const { type: _type, idempotencyKey, intentKey: key, legacyIntentKey, payload, ...rest } = request;
  // The fields in the order plans always had (a worker's plan is its planSaga activity's recorded result).
  return {
    type,
    idempotencyKey,
    requestHash: sagaRequestHash(request, options.intentSecret),
    intentKey: key,
    ...(legacyIntentKey === undefined ? {} : { legacyIntentKey }),
    payload,
    // With their retry policies: a running saga keeps the ones it was planned with.
    steps: def.steps.map((s) => (s.compensation === undefined || s.compensationRetry !== undefined ? { ...s } : { ...s, compensationRetry: { ...DEFAULT_COMPENSATION_RETRY } })),
    compensation: { ...def.compensation },
    ...rest,
    ...(limits === undefined ? {} : { limits }),
  };
}

/**
 * Validates a request and keys its intent (see {@link SagaRequest}); throws SagaInputError before any
 * side effect, for everything {@link prepareSaga} would refuse (the scope values of limits included).
 */
export function prepareSagaRequest(type: string, data: unknown, options: PrepareOptions): SagaRequest {
  const def = sagaDefinition(type, options.types);
  const deadlineMs = deadlineOf(def, options.deadlineMs);
  const idempotencyKey = options.idempotencyKey ?? randomUUID();
  if (!IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey)) {
    throw new SagaInputError(
      'idempotency key must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)',
      ErrorType.INVALID_INPUT,
    );
  }
  // The workflow id is `<type>-<key>`: an `order` key `cancel-x` would name the `order-cancel` saga of
  // key `x`. Such a key is refused, so that an id names one saga of one type.
  let shadowed: string | undefined;
  for (const [other, prefix] of shadowingTypes(options.types, type)) {
    if (idempotencyKey.startsWith(prefix)) {
      shadowed = other;
      break;
    }
  }
  if (shadowed !== undefined) {
    throw new SagaInputError(
      `a ${type} saga's idempotency key may not begin with "${shadowed.slice(type.length + 1)}-": ${JSON.stringify(sagaWorkflowId(type, idempotencyKey))} is the workflow id of the ${shadowed} saga of key ${JSON.stringify(idempotencyKey.slice(shadowed.length - type.length))}`,
      ErrorType.INVALID_INPUT,
    );
  }
  const payload = parseSagaData(def, data);
  let key: string | undefined;
  let legacyKey: string | undefined;
  let operation: SagaInput['operation'];
  try {
    if (isEntityOperation(def)) {
      // The entity's lock: one per entity, shared by every operation type of its scope.
      // Callers name the entity by the id they were handed; the lock and the steps take its row id.
      const given = def.entity(payload);
      const rowId = decodeEntityId(options.intentSecret, def.table.table, given, { numericIds: def.table.legacy.numericIds });
      if (rowId === undefined) throw new SagaInputError(entityNotFound(def.scope, given, type), ErrorType.ENTITY_NOT_FOUND);
      operation = { entityId: rowId, publicId: encodeEntityId(options.intentSecret, def.table.table, rowId), ...(def.releases === true ? { releases: true } : {}) };
      key = intentKey(`${def.scope}-lock`, { entity: rowId }, options.intentSecret);
    } else {
      // One intent however its text is spelt in Unicode: NFC and NFD of a name are one name. Text
      // already in NFC (the common case) is keyed in one walk; any other is normalised first.
      const intent = def.intent(payload);
      key = intentKeyIfNfc(def.scope, intent, options.intentSecret);
      if (key === undefined) {
        const normalized = normalizeText(intent);
        key = intentKey(def.scope, normalized.value, options.intentSecret);
        // Sagas of earlier versions keyed the text as it came: the gate checks that key too.
        if (normalized.changed) legacyKey = intentKey(def.scope, intent, options.intentSecret);
      }
    }
  } catch (err) {
    if (err instanceof RmsValidationError) throw new SagaInputError(`invalid ${type} intent: ${err.message}`, ErrorType.INVALID_INPUT);
    throw err;
  }
  // Checked here, counted only for a start (sagaLimitCounters).
  if (def.limits !== undefined) scopeValuesOf(def, payload);
  // The fields in the order requests always had (prepareSaga keeps it in the plan); optional ones
  // are present only when set.
  const request: SagaRequest =
    legacyKey === undefined
      ? { type, idempotencyKey, intentKey: key, payload, timings: options.timings }
      : { type, idempotencyKey, intentKey: key, legacyIntentKey: legacyKey, payload, timings: options.timings };
  if (operation) request.operation = operation;
  if (options.owner !== undefined) request.owner = options.owner;
  if (deadlineMs !== undefined) request.deadlineMs = deadlineMs;
  return request;
}

/** {@link shadowingTypes} of each frozen set of types (as sagaTypesOf makes them), by type. */
const shadowingOf = new WeakMap<SagaTypes, Map<string, readonly (readonly [string, string])[]>>();

/**
 * The other types of `types` whose workflow ids a key of `type` could spell (`order-cancel` for
 * `order`), each with the start of such a key (`cancel-`), in the order of `types`' keys; worked out
 * once per type of a frozen set of types.
 */
function shadowingTypes(types: SagaTypes, type: string): readonly (readonly [string, string])[] {
  let byType = shadowingOf.get(types);
  let found = byType?.get(type);
  if (found) return found;
  found = Object.keys(types)
    .filter((other) => other.startsWith(`${type}-`))
    .map((other) => [other, `${other.slice(type.length + 1)}-`] as const);
  if (Object.isFrozen(types)) {
    if (!byType) shadowingOf.set(types, (byType = new Map<string, readonly (readonly [string, string])[]>()));
    byType.set(type, found);
  }
  return found;
}

/** The keyed hash of a request (SagaInput.requestHash): a retry with the same key must carry the same. */
export function sagaRequestHash(request: Pick<SagaRequest, 'type' | 'payload'>, intentSecret: Uint8Array): string {
  return keyedRequestHash({ type: request.type, payload: request.payload }, intentSecret);
}

/** How long a saga counts against its caller's limits past its deadline: time to compensate. */
export const LIMIT_GRACE_MS = 5 * 60 * 1000;

/** How long a saga of a type without a deadline counts at most, if it never counts itself out. */
export const DEFAULT_LIMIT_HOLD_MS = 60 * 60 * 1000;

/** Longest scope value (`SagaLimit.per`) accepted, in characters. */
const MAX_SCOPE_VALUE_LENGTH = 1024;

/**
 * The scope value of each limit `def` declares for `payload` (undefined for a limit of the whole
 * caller). @throws SagaInputError when a `per` function gives no string of 1 to 1024 characters.
 */
function scopeValuesOf(def: SagaType<unknown>, payload: unknown): (string | undefined)[] {
  return limitsOf(def).map((limit, i) => {
    if (limit.per === undefined) return undefined;
    const value = limit.per(payload);
    if (typeof value !== 'string' || value.length === 0 || value.length > MAX_SCOPE_VALUE_LENGTH) {
      throw new SagaInputError(`invalid ${def.type} input: the scope value of limits[${i}] must be a string of 1 to ${MAX_SCOPE_VALUE_LENGTH} characters`, ErrorType.INVALID_INPUT);
    }
    return value.normalize('NFC');
  });
}

/**
 * The counters of `owner`'s limits a saga of `def` counts in: one per declared limit, a limit `per`
 * scope value keyed by the keyed digest of its value; undefined when the type declares none.
 */
function limitCountersOf(def: SagaType<unknown>, owner: string, scopeValues: (string | undefined)[], deadlineMs: number | undefined, secret: Uint8Array): SagaLimitCounters | undefined {
  if (scopeValues.length === 0) return undefined;
  const counters = scopeValues.map((value, i) => (value === undefined ? String(i) : `${i}:${scopeValueDigest(value, secret)}`));
  return { tag: limitTag(def.type, owner), counters, holdMs: deadlineMs === undefined ? DEFAULT_LIMIT_HOLD_MS : deadlineMs + LIMIT_GRACE_MS };
}

/**
 * The counters of its owner's limits `input` counts in: undefined when its type declares none, or it
 * has no owner (a plain Temporal client's start passed no gate: it counts nowhere).
 */
export function sagaLimitCounters(input: SagaRequest, types: SagaTypes, intentSecret: Uint8Array): SagaLimitCounters | undefined {
  if (input.owner === undefined) return undefined;
  const def = sagaDefinition(input.type, types);
  return limitCountersOf(def, input.owner, scopeValuesOf(def, input.payload), input.deadlineMs, intentSecret);
}

/**
 * The deadline of a saga of `def` whose start asks for `asked` ms: at most the type's, which it
 * defaults to. @throws SagaInputError for one that is no whole number of ms from 1 to 30 days, or
 * above the type's.
 */
function deadlineOf(def: SagaType<unknown>, asked: number | undefined): number | undefined {
  if (asked === undefined) return def.deadlineMs;
  if (!Number.isInteger(asked) || asked < 1 || asked > MAX_DEADLINE_MS) {
    throw new SagaInputError(`invalid deadline ${asked}: a whole number of ms from 1 to ${MAX_DEADLINE_MS} (30 days)`, ErrorType.INVALID_INPUT);
  }
  if (def.deadlineMs !== undefined && asked > def.deadlineMs) {
    throw new SagaInputError(`invalid deadline ${asked}: a ${def.type} saga may take at most ${def.deadlineMs} ms`, ErrorType.INVALID_INPUT);
  }
  return asked;
}

/**
 * `value` with every string and object key in Unicode Normalization Form C, and whether that changed
 * anything. Other values are kept as they are (intentKey refuses what JSON cannot hold).
 */
export function normalizeText(value: unknown): { value: unknown; changed: boolean } {
  let changed = false;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const nfc = v.normalize('NFC');
      if (nfc !== v) changed = true;
      return nfc;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      const out: Record<string, unknown> = {};
      for (const [k, child] of Object.entries(v)) {
        const nfcKey = k.normalize('NFC');
        if (nfcKey !== k) changed = true;
        if (Object.hasOwn(out, nfcKey)) throw new SagaInputError(`two fields of the intent are one name in Unicode (${JSON.stringify(nfcKey)})`, ErrorType.INVALID_INPUT);
        out[nfcKey] = walk(child);
      }
      return out;
    }
    return v;
  };
  const normalized = walk(value);
  return { value: normalized, changed };
}

/**
 * The request hash of sagas started before it was keyed: the plain SHA-256 of the same canonical
 * request. A saga of then holds it in its memo and plan, and a retry of its key is still its request.
 */
export function unkeyedRequestHash(input: Pick<SagaInput, 'type' | 'payload'>): string {
  return requestHash({ type: input.type, payload: input.payload });
}

/**
 * The reservation session of the saga `workflowId` in `namespace`: a digest of the two, so a retry
 * with the same idempotency key (the same workflow id) is the same session, before and after the
 * workflow exists, and a `temporal workflow reset` (a new run id) keeps it. 22 base64url characters
 * (132 bits): two sagas of one intent never share a session by chance.
 */
export function sagaSessionId(namespace: string, workflowId: string): string {
  return hash('sha256', `${namespace}\u0000${workflowId}`, 'base64url').slice(0, 22);
}

/** Bounds of the timings a saga may be started with. */
export const TIMING_BOUNDS = {
  minLeaseMs: 500,
  maxLeaseMs: MAX_LEASE_MS,
  minHeartbeatIntervalMs: 50,
  maxCompensationAttempts: 20,
} as const;

const whole = (min: number, max: number) => z.number().int().min(min).max(max);

const timingFields = z
  .object({
    leaseMs: whole(TIMING_BOUNDS.minLeaseMs, TIMING_BOUNDS.maxLeaseMs),
    heartbeatIntervalMs: whole(TIMING_BOUNDS.minHeartbeatIntervalMs, TIMING_BOUNDS.maxLeaseMs),
    heartbeatTimeoutMs: whole(TIMING_BOUNDS.minHeartbeatIntervalMs, TIMING_BOUNDS.maxLeaseMs),
    compensationAttempts: whole(1, TIMING_BOUNDS.maxCompensationAttempts),
  })
  .strict();

const timingsSchema = timingFields.refine((t) => t.heartbeatIntervalMs < t.heartbeatTimeoutMs && t.heartbeatTimeoutMs < t.leaseMs, {
    message: 'must keep heartbeatIntervalMs < heartbeatTimeoutMs < leaseMs (the lease outlives a missed beat)',
  });

/**
 * Checks timings a client starts sagas with against what a worker accepts (see planSaga), so that a
 * saga the worker would refuse is refused before the gate takes a lease for it.
 * @throws TypeError naming the timing at fault.
 */
export function checkSagaTimings(timings: SagaTimings): void {
  const parsed = timingsSchema.safeParse(timings);
  if (parsed.success) return;
  const issue = parsed.error.issues[0]!;
  throw new TypeError(`saga timings${issue.path.length ? ` ${issue.path.join('.')}` : ''}: ${issue.message} (a worker refuses such a saga)`);
}

const reservationSchema = z
  .object({
    sessionId: z.string(),
    fencingToken: z.string().regex(/^[1-9][0-9]{0,18}$/).refine((t) => BigInt(t) <= MAX_FENCING_TOKEN, 'must fit a bigint'),
    expiresAt: z.number().int().nonnegative(),
    mac: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 hex digits').optional(),
  })
  .strict();

/**
 * The MAC that SagaClient puts in a gate reservation it starts a saga with (`SealedReservation.mac`):
 * a keyed hash, under a key derived from INTENT_KEY_SECRET for this purpose alone, of the
 * reservation, the workflow it was taken for and the request's hash. Anyone can compute a saga's
 * session from its workflow id; only a holder of the secret can seal a reservation, and a seal holds
 * for its request alone.
 */
export function reservationMac(reservation: GateReservation, saga: { workflowId: string; requestHash: string }, intentSecret: Uint8Array): string {
  const { sessionId, fencingToken, expiresAt } = reservation;
  return keyedHash('reservation-saga gate reservation', { workflowId: saga.workflowId, requestHash: saga.requestHash, sessionId, fencingToken, expiresAt }, intentSecret);
}

/**
 * Whether `start` carries the gate reservation of `plan` (its plan) sealed by a holder of the intent
 * secret: SagaClient, which seals only a start it sends through an encrypting Temporal client. False
 * for a start with no reservation, one of the older shape (its reservation is not planned), and one
 * whose MAC does not hold.
 */
export function isSealedStart(start: unknown, plan: SagaPlan, intentSecret: Uint8Array): boolean {
  const mac = isObject(start) && isObject(start.reservation) ? start.reservation.mac : undefined;
  if (plan.reservation === undefined || typeof mac !== 'string') return false;
  const expected = Buffer.from(reservationMac(plan.reservation, { workflowId: sagaWorkflowId(plan.type, plan.idempotencyKey), requestHash: plan.requestHash }, intentSecret), 'hex');
  const given = Buffer.from(mac, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** What a plain Temporal client may start a saga with (see SagaStart). */
const sagaStartSchema = z
  .object({
    type: z.string(),
    idempotencyKey: z.string(),
    data: z.unknown(),
    timings: timingFields.partial().optional(),
    reservation: reservationSchema.optional(),
    owner: z.string().regex(OWNER_PATTERN, 'must be 1-64 letters, digits and . _ : - (starting with a letter or digit)').optional(),
    // Checked against the type's bound by prepareSaga.
    deadlineMs: z.number().optional(),
  })
  .strict();

/**
 * Derives a saga's plan from what it was started with, trusting nothing computed by the caller:
 * `{type, idempotencyKey, data}` (plus optional timings and the gate's reservation), or the older
 * full SagaInput, whose derived fields are ignored and derived again. The workflow id must be the
 * one the type and key name, and a reservation must be this saga's session's.
 * @throws SagaInputError naming the problem.
 */
export function planSaga(
  start: unknown,
  ctx: { workflowId: string; namespace: string; timings: SagaTimings; types: SagaTypes; intentSecret: Uint8Array },
): SagaPlan {
  if (typeof start !== 'object' || start === null || Array.isArray(start)) {
    throw new SagaInputError('the saga input must be an object {type, idempotencyKey, data}', ErrorType.INVALID_INPUT);
  }
  const raw = start as Record<string, unknown>;
  // Started by a client from before the gate: the same request, with fields it computed itself.
  const legacy = 'requestHash' in raw && 'payload' in raw && !('data' in raw);
  const candidate: Record<string, unknown> = legacy
    ? { type: raw.type, idempotencyKey: raw.idempotencyKey, data: raw.payload, ...(raw.timings === undefined ? {} : { timings: raw.timings }) }
    : raw;
  const unknown = Object.keys(candidate).filter((k) => !Object.hasOwn(sagaStartSchema.shape, k));
  if (unknown.length > 0) {
    throw new SagaInputError(
      `invalid saga input: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')} (a saga is started with {type, idempotencyKey, data}, optionally timings, owner and deadlineMs)`,
      ErrorType.INVALID_INPUT,
    );
  }
  const missing = ['type', 'idempotencyKey', 'data'].filter((k) => candidate[k] === undefined);
  if (missing.length > 0) throw new SagaInputError(`invalid saga input: missing field ${missing.join(', ')}`, ErrorType.INVALID_INPUT);
  const parsed = sagaStartSchema.safeParse(candidate);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? issue.path.join('.') : '(root)';
    throw new SagaInputError(`invalid saga input at ${where}: ${issue.message}`, ErrorType.INVALID_INPUT);
  }
  const { type, idempotencyKey, data, reservation, owner, deadlineMs } = parsed.data;
  const timingsParsed = timingsSchema.safeParse({ ...ctx.timings, ...parsed.data.timings });
  if (!timingsParsed.success) {
    const issue = timingsParsed.error.issues[0]!;
    throw new SagaInputError(`invalid saga timings${issue.path.length ? ` at ${issue.path.join('.')}` : ''}: ${issue.message}`, ErrorType.INVALID_INPUT);
  }
  const input = prepareSaga(type, data, { idempotencyKey, timings: timingsParsed.data, types: ctx.types, intentSecret: ctx.intentSecret, owner, deadlineMs });
  const expected = sagaWorkflowId(type, idempotencyKey);
  if (ctx.workflowId !== expected) {
    throw new SagaInputError(
      `inconsistent saga input: a ${type} saga with idempotency key ${idempotencyKey} must run as workflow id ${JSON.stringify(expected)}, not ${JSON.stringify(ctx.workflowId)}`,
      ErrorType.INVALID_INPUT,
    );
  }
  const sessionId = sagaSessionId(ctx.namespace, ctx.workflowId);
  if (reservation && reservation.sessionId !== sessionId) {
    throw new SagaInputError('inconsistent saga input: the reservation was not taken for this saga\'s session', ErrorType.INVALID_INPUT);
  }
  // The MAC stays out of the plan: the plan a saga records has the shape it always had. A start that
  // names no owner runs for the default owner, as a SagaClient's would: its entity is that owner's,
  // not open to every owner. It still counts in no limits (computed above): it passed no gate.
  return {
    ...input,
    owner: owner ?? DEFAULT_OWNER,
    sessionId,
    ...(reservation ? { reservation: { sessionId: reservation.sessionId, fencingToken: reservation.fencingToken, expiresAt: reservation.expiresAt } } : {}),
  };
}
