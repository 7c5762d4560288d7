/**
 * The one place where Lua replies become TypeScript values. Each script answers with an array whose
 * first element names the outcome (see the header of its file in `lua/`); anything else is refused
 * with {@link RmsReplyError}.
 */
import { RmsReplyError } from './errors';
import { SESSION_TAG_LENGTH } from './keys';
import type {
  AdmitResult,
  CountOutResult,
  EntityOwner,
  ExtendResult,
  FinalizeResult,
  FreeResult,
  IntentInspection,
  MarkExistsResult,
  RaiseResult,
  ReleaseResult,
  ReserveResult,
} from './types';

const TOKEN = /^[1-9][0-9]*$/;

/** Maps the reply of `reserve.lua`. `sessionId` is the caller's (echoed in `SUCCESS`). */
export function toReserveResult(reply: unknown, sessionId: string): ReserveResult {
  const [status, first, second, third, fourth] = asArray('reserve', reply);
  switch (status) {
    case 'SUCCESS':
      if (third !== 0 && third !== 1) return unexpected('reserve', reply);
      return {
        status,
        sessionId,
        fencingToken: asToken('reserve', first),
        expiresAt: asInteger('reserve', second),
        alreadyHeld: third === 1,
        endedCount: asInteger('reserve', fourth),
      };
    case 'ENDED':
      return { status };
    case 'DUPLICATE':
      return { status, owner: asOwner('reserve', first) };
    case 'CONFLICT':
      return { status, retryAfterMs: asInteger('reserve', first) };
    default:
      return unexpected('reserve', reply);
  }
}

/** Maps the reply of `remember-ended.lua`. */
export function toRememberEndedResult(reply: unknown): { endedCount: number } {
  const [status, count] = asArray('rememberEnded', reply);
  if (status === 'REMEMBERED') return { endedCount: asInteger('rememberEnded', count) };
  return unexpected('rememberEnded', reply);
}

/** Maps the reply of `extend.lua`. */
export function toExtendResult(reply: unknown): ExtendResult {
  const [status, expiresAt] = asArray('extend', reply);
  if (status === 'EXTENDED') return { status, expiresAt: asInteger('extend', expiresAt) };
  if (status === 'LOST') return { status };
  return unexpected('extend', reply);
}

/** Maps the reply of `raise.lua`. */
export function toRaiseResult(reply: unknown): RaiseResult {
  const [status, token] = asArray('raise', reply);
  if (status === 'RAISED') return { status, fencingToken: asToken('raise', token) };
  if (status === 'LOST') return { status };
  return unexpected('raise', reply);
}

/** Maps the reply of `finalize.lua`. */
export function toFinalizeResult(reply: unknown): FinalizeResult {
  const [status] = asArray('finalize', reply);
  if (status === 'FINALIZED' || status === 'LOST' || status === 'FREED') return { status };
  return unexpected('finalize', reply);
}

/** Maps the reply of `release.lua`. */
export function toReleaseResult(reply: unknown): ReleaseResult {
  const [status] = asArray('release', reply);
  if (status === 'RELEASED' || status === 'NOT_OWNER') return { status };
  return unexpected('release', reply);
}

/** Maps the reply of `free.lua`. */
export function toFreeResult(reply: unknown): FreeResult {
  const [status] = asArray('free', reply);
  if (status === 'FREED' || status === 'NOT_OWNER') return { status };
  return unexpected('free', reply);
}

/** Maps the reply of `mark-exists.lua`. */
export function toMarkExistsResult(reply: unknown): MarkExistsResult {
  const [status] = asArray('markExists', reply);
  if (status === 'MARKED' || status === 'FREED') return { status };
  return unexpected('markExists', reply);
}

/** Maps the reply of `inspect.lua`: `{processing, pttl, entity_exists, pttl}`, nil values as null. */
export function toIntentInspection(intent: string, reply: unknown): IntentInspection {
  const [processing, pttl, marker, markerPttl] = asArray('inspect', reply, 4);
  const inspection: IntentInspection = { intent, exists: marker !== null };
  if (processing !== null) {
    const match = typeof processing === 'string' ? /^([^:]+):([1-9][0-9]*)$/.exec(processing) : null;
    const remainingMs = asInteger('inspect', pttl);
    if (match === null || remainingMs < 0) return unexpected('inspect', reply);
    inspection.holder = { sessionId: match[1]!, fencingToken: match[2]!, remainingMs };
  }
  const freed = typeof marker === 'string' ? /^\{freed\}:([1-9][0-9]*)$/.exec(marker) : null;
  if (freed) {
    inspection.exists = false;
    inspection.freedToken = freed[1]!;
  } else if (marker !== null) {
    const owner = asOwner('inspect', marker);
    inspection.existsToken = owner.fencingToken;
    if (owner.sessionTag !== undefined) inspection.existsSessionTag = owner.sessionTag;
  }
  if (marker !== null) {
    const remainingMs = asInteger('inspect', markerPttl);
    if (remainingMs >= 0) inspection.markerRemainingMs = remainingMs;
    else if (remainingMs !== -1) return unexpected('inspect', reply);
  }
  return inspection;
}

/** Maps the reply of `admit.lua`. */
export function toAdmitResult(reply: unknown): AdmitResult {
  const [status, first, second] = asArray('admit', reply);
  if (status === 'ADMITTED' && (first === 0 || first === 1)) return { status, alreadyCounted: first === 1 };
  if (status === 'LIMITED' && (second === 'IN_FLIGHT' || second === 'RATE')) return { status, retryAfterMs: asInteger('admit', first), limit: second };
  return unexpected('admit', reply);
}

/** Maps the reply of `count-out.lua`. */
export function toCountOutResult(reply: unknown): CountOutResult {
  const [status] = asArray('countOut', reply);
  if (status === 'COUNTED_OUT' || status === 'NOT_COUNTED') return { status };
  return unexpected('countOut', reply);
}

/**
 * An `entity_exists` value: `<session tag>:<token>` (a whole session id on markers written before tags),
 * or a bare token written before owners were kept.
 */
function asOwner(command: string, value: unknown): EntityOwner {
  if (typeof value === 'string') {
    if (TOKEN.test(value)) return { fencingToken: value };
    const match = /^([^:]+):([1-9][0-9]*)$/.exec(value);
    if (match) return { sessionTag: match[1]!.slice(0, SESSION_TAG_LENGTH), fencingToken: match[2]! };
  }
  return unexpected(command, value);
}

function asArray(command: string, reply: unknown, length?: number): unknown[] {
  if (!Array.isArray(reply) || reply.length === 0 || (length !== undefined && reply.length !== length)) {
    return unexpected(command, reply);
  }
  return reply as unknown[];
}

function asToken(command: string, value: unknown): string {
  if (typeof value !== 'string' || !TOKEN.test(value)) return unexpected(command, value);
  return value;
}

function asInteger(command: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) return unexpected(command, value);
  return value;
}

function unexpected(command: string, reply: unknown): never {
  let shown: string;
  try {
    shown = JSON.stringify(reply) ?? String(reply);
  } catch {
    shown = String(reply);
  }
  throw new RmsReplyError(command, shown.length > 200 ? `${shown.slice(0, 200)}…` : shown);
}
