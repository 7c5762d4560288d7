/**
 * The Redis keys of one intent. All three share the hash tag `{<intent>}`, so every script touches one
 * slot and runs unchanged on Redis Cluster.
 */

/** The keys of one intent under a prefix. */
export interface IntentKeys {
  /** `<prefix>processing:{<intent>}`: the lease, value `<sessionId>:<fencingToken>`, expires with the lease. */
  processing: string;
  /** `<prefix>entity_exists:{<intent>}`: the entity exists; value is `<sessionId>:<fencingToken>` of the saga that created it (or that read-repair found in PostgreSQL). */
  entityExists: string;
  /** `<prefix>fence:{<intent>}`: the last fencing token issued for the intent; kept without a TTL. */
  fence: string;
}

/**
 * The keys of `intent` under `prefix`. Callers validate both first (see `assertIntent`,
 * `assertKeyPrefix`): neither may contain a brace, or the hash tag would be wrong.
 */
export function intentKeys(prefix: string, intent: string): IntentKeys {
  const tag = `{${intent}}`;
  return {
    processing: `${prefix}processing:${tag}`,
    entityExists: `${prefix}entity_exists:${tag}`,
    fence: `${prefix}fence:${tag}`,
  };
}

/** The lock value stored in `processing`: `<sessionId>:<fencingToken>`. */
export function lockValue(sessionId: string, fencingToken: string): string {
  return `${sessionId}:${fencingToken}`;
}
