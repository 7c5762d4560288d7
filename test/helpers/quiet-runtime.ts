// Workers in tests log warnings and errors only, one line each: expected activity failures (declined
// cards, short stock) would otherwise flood the output with stack traces. Runs once in each test
// process, before any worker starts.
import { DefaultLogger, Runtime, type LogEntry } from '@temporalio/worker';

function oneLine({ level, message, meta }: LogEntry): void {
  const where = [meta?.workflowType, meta?.activityType].filter((v) => typeof v === 'string').join(' ');
  const error = meta?.error instanceof Error ? `: ${meta.error.message}` : '';
  process.stderr.write(`[worker ${level}] ${message}${where ? ` (${where})` : ''}${error}\n`);
}

Runtime.install({ logger: new DefaultLogger('WARN', oneLine) });
