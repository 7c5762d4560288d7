// Prebundles the workflow code for production workers (dist/workflow-bundle.js), so a worker does
// not run webpack at start-up.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const { bundleWorkflowCode } = require('@temporalio/worker');
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
// With the encryption codec's failure converter (src/codec/failure-converter.ts), so workflow
// failures are encrypted too: the data converter of dist/src/worker.js names the same module.
// The interceptor that reports each saga's end to the worker (WORKFLOW_INTERCEPTOR_MODULES in src/worker.ts).
const interceptors = [path.join(root, 'src/workflows/interceptors.ts')];
// Two bundles: a worker that traces (OTEL_* set) runs the one with the OpenTelemetry workflow
// interceptors too (tracingWorkflowInterceptorModules, TRACED_WORKFLOW_BUNDLE_PATH in src/worker.ts); the
// package is a devDependency here, an optional peer dependency of an app (src/tracing/packages.ts).
const bundles = {
  'workflow-bundle.js': interceptors,
  'workflow-bundle-traced.js': [...interceptors, require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')],
};
for (const [file, workflowInterceptorModules] of Object.entries(bundles)) {
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(root, 'src/workflows/index.ts'),
    failureConverterPath: path.join(root, 'src/codec/failure-converter.ts'),
    workflowInterceptorModules,
  });
  writeFileSync(path.join(root, 'dist', file), code);
  console.log(`bundle-workflows: wrote dist/${file} (${code.length} bytes)`);
}
