/** Activities of the bench worker: they do nothing, so a workflow of them measures Temporal alone. */

/** Builds the bench activities. */
export function createBenchActivities() {
  return {
    /** Returns at once. */
    async noop(): Promise<void> {},
  };
}

/** The bench activities' type, for `proxyActivities`. */
export type BenchActivities = ReturnType<typeof createBenchActivities>;
