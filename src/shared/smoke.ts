/** The smoke workflow's contract: proves worker → activity → Redis and PostgreSQL end to end. */

/** What the smoke activity saw. */
export interface SmokeResult {
  /** Value of the run's Redis counter after the activity incremented it. */
  redisCounter: number;
  /** Migrations recorded in PostgreSQL. */
  migrationsApplied: number;
}
