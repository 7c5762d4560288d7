/**
 * The Reservation Management System: a plain Node library over ioredis (no Temporal imports), usable
 * with one Redis instance or a Redis Cluster.
 */
export { createRedis, type RedisOptions } from './connection';
export { RmsError, RmsReplyError, RmsUnavailableError, RmsValidationError, isRedisUnavailable } from './errors';
export { MAX_CANONICAL_JSON_BYTES, MAX_CANONICAL_JSON_DEPTH, MIN_INTENT_SECRET_BYTES, canonicalJson, canonicalJsonIfNfc, intentKey, intentKeyIfNfc, scopeValueDigest } from './intent-key';
export { SESSION_TAG_LENGTH, intentKeys, intentTag, limitKeys, limitTag, sessionTag, type IntentKeys, type LimitKeys } from './keys';
export { Rms } from './rms';
export type {
  AdmitResult,
  CountOutResult,
  EntityOwner,
  ExtendResult,
  FinalizeResult,
  FreeResult,
  IntentInspection,
  LimitCounter,
  MarkExistsResult,
  RaiseResult,
  ReleaseResult,
  ReserveResult,
  RmsOptions,
  SessionEnded,
} from './types';
export { isSessionId, INTENT_KEY_PATTERN, LIMIT_COUNTER_PATTERN, MAX_LIMIT_COUNTERS, MAX_LIMIT_IN_FLIGHT, MAX_LIMIT_PER_SECOND, KEY_PREFIX_PATTERN, MAX_FENCING_TOKEN, MAX_LEASE_MS, MAX_SESSION_ID_LENGTH, SCOPE_PATTERN } from './validation';
