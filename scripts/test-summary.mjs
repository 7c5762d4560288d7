// Prints `N passed, N failed` from vitest's JSON report. A test file that failed before any of its
// tests could fail (an import error, a failing hook) counts as one failure, and so does a run that
// vitest failed for an unhandled error, so neither is hidden.
import { existsSync, readFileSync } from 'node:fs';

const file = process.argv[2] ?? 'test-results/vitest.json';
let passed = 0;
let failed = 0;
if (existsSync(file)) {
  const report = JSON.parse(readFileSync(file, 'utf8'));
  passed = report.numPassedTests ?? 0;
  failed = report.numFailedTests ?? 0;
  for (const result of report.testResults ?? []) {
    const testsFailed = (result.assertionResults ?? []).some((a) => a.status === 'failed');
    if (result.status === 'failed' && !testsFailed) failed += 1;
  }
  // An unhandled error fails the run even when every test passed.
  if (report.success === false && failed === 0) failed = 1;
} else {
  console.error(`no test report at ${file}: the run stopped before the tests`);
}
console.log(`${passed} passed, ${failed} failed`);
