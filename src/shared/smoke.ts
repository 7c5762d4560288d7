/** The smoke workflow's contract: proves worker → activity → Redis and PostgreSQL end to end. */

/** What the smoke activity saw. */
export interface SmokeResult {
  /** Value of the run's Redis counter after the activity incremented it. */
  redisCounter: number;
  /** Migrations recorded in PostgreSQL. */
  migrationsApplied: number;
}

/** How long the smoke counter lives after its last run: the check's keys never pile up in Redis. */
export const SMOKE_COUNTER_TTL_MS = 3_600_000;
