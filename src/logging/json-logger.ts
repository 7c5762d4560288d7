/**
 * The worker's log: the Temporal SDK's Runtime logger (which the SDK, the workflow `log` and the
 * activity `log` all write to) with each entry written as one JSON line, at the level LOG_LEVEL sets.
 */
import { DefaultLogger, type LogEntry, type LogLevel } from '@temporalio/worker';

/** Attributes the SDK adds that say nothing to an operator (an opaque token). */
const DROPPED: ReadonlySet<string> = new Set(['taskToken']);

/** One log entry as a JSON object: time, level, msg, then its attributes (an Error as its name and message). */
export function jsonLogLine({ level, message, meta, timestampNanos }: LogEntry): string {
  const line: Record<string, unknown> = { time: new Date(Number(timestampNanos / 1_000_000n)).toISOString(), level, msg: message };
  for (const [key, value] of Object.entries(meta ?? {})) {
    if (DROPPED.has(key) || key in line) continue;
    line[key] = value instanceof Error ? { name: value.name, message: value.message } : value;
  }
  return JSON.stringify(line, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value));
}

/** A Runtime logger writing JSON lines of `level` and above to `write` (standard output by default). */
export function jsonLogger(level: LogLevel, write: (line: string) => void = (line) => process.stdout.write(line)): DefaultLogger {
  return new DefaultLogger(level, (entry) => write(`${jsonLogLine(entry)}\n`));
}
