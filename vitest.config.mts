import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (file: string) => fileURLToPath(new URL(`./src/public/${file}`, import.meta.url));

export default defineConfig({
  // The example apps import the package by name: here, its sources (tsconfig.json's paths say the same).
  resolve: {
    alias: [
      { find: /^reservation-saga$/, replacement: src('index.ts') },
      { find: /^reservation-saga\/worker$/, replacement: src('worker.ts') },
      { find: /^reservation-saga\/http$/, replacement: src('http.ts') },
      { find: /^reservation-saga\/testing$/, replacement: src('testing.ts') },
    ],
  },
  test: {
    // TEST_REPORT_JSON: another report file, so make test-stack keeps make test's report.
    reporters: ['default', ['json', { outputFile: process.env.TEST_REPORT_JSON ?? 'test-results/vitest.json' }]],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
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
