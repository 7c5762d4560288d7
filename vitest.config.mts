import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // TEST_REPORT_JSON: another report file, so make test-stack keeps make test's report.
    reporters: ['default', ['json', { outputFile: process.env.TEST_REPORT_JSON ?? 'test-results/vitest.json' }]],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/workflows/**/*.test.ts'],
          environment: 'node',
          // Temporal workers run native code: one process per test file.
          pool: 'forks',
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
          globalSetup: ['test/helpers/global-setup.ts'],
          setupFiles: ['test/helpers/quiet-runtime.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
