/**
 * `saga setup`: makes a Temporal cluster ready for the sagas, idempotently. The namespace (made, with
 * a retention, only when asked), the saga search attributes, and the project's schedules (today the
 * purge of the step idempotency store). Each item says what was done to it; a second run against the
 * same cluster changes nothing and says so.
 */
import { Client, type Connection } from '@temporalio/client';
import { msNumberToTs, msToNumber } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import type { Config } from './config';
import { ensurePurgeSchedule } from './schedules';
import { SEARCH_ATTRIBUTES } from './shared/search-attributes';
import { connectClient, dataConverterOf } from './temporal';

const { IndexedValueType } = temporal.api.enums.v1;

/** gRPC's NOT_FOUND status code. */
const NOT_FOUND = 5;

/** Thrown when the cluster cannot be made ready: what is wrong, and what to do. */
export class SetupError extends Error {
  override readonly name = 'SetupError';
}

/** What `saga setup` may do besides the defaults. */
export interface SetupOptions {
  /** Register the namespace when it does not exist (with {@link retention}); otherwise a missing one is an error. */
  createNamespace?: boolean;
  /** The namespace's workflow retention, e.g. `7d` or `72h`: applied when the namespace is made, and to an existing one that differs. */
  retention?: string;
}

/** One thing setup looked at, and what it did. */
export interface SetupItem {
  kind: 'namespace' | 'search attribute' | 'schedule';
  name: string;
  /** `present`/`unchanged`: already as needed; anything else is a change. */
  action: 'created' | 'present' | 'retention updated' | 'added' | 'updated' | 'unchanged';
  detail?: string;
}

/** What a run of setup did: {@link changes} counts the items it changed. */
export interface SetupReport {
  namespace: string;
  items: SetupItem[];
  changes: number;
}

/** How long setup waits for a namespace it has just registered to answer (the server's namespace cache). */
const NAMESPACE_READY_MS = 30_000;

const KEYWORD: number = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

function grpcCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** `text` (`7d`, `72h`, `3600s`) as whole seconds, at least a day (Temporal's minimum retention). */
export function parseRetention(text: string): number {
  let ms: number;
  try {
    ms = msToNumber(text as Parameters<typeof msToNumber>[0]);
  } catch {
    throw new SetupError(`--retention ${JSON.stringify(text)}: not a duration (e.g. 7d, 72h)`);
  }
  if (!Number.isFinite(ms) || ms < 24 * 3600 * 1000) throw new SetupError(`--retention ${JSON.stringify(text)}: must be at least 1d (Temporal's minimum)`);
  return Math.round(ms / 1000);
}

/**
 * Runs `fn`, and while the namespace just registered is not yet known to every part of the server
 * (NOT_FOUND from its cache), again: a bounded wait, named in the error when it runs out.
 */
async function whenNamespaceAnswers<T>(namespace: string, fresh: boolean, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + (fresh ? NAMESPACE_READY_MS : 0);
  for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await fn();
    } catch (err) {
      if (grpcCode(err) !== NOT_FOUND || Date.now() + delay > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

async function ensureNamespace(
  connection: Connection,
  namespace: string,
  { createNamespace, retentionSeconds }: { createNamespace?: boolean; retentionSeconds?: number },
): Promise<SetupItem & { fresh: boolean }> {
  const service = connection.workflowService;
  let described: temporal.api.workflowservice.v1.DescribeNamespaceResponse | undefined;
  try {
    described = await service.describeNamespace({ namespace });
  } catch (err) {
    if (grpcCode(err) !== NOT_FOUND) throw err;
  }
  if (!described) {
    if (!createNamespace) {
      throw new SetupError(`namespace ${JSON.stringify(namespace)} does not exist: run with --create-namespace [--retention 7d], or create it with your cluster's tools (tcld on Temporal Cloud)`);
    }
    const seconds = retentionSeconds ?? 7 * 24 * 3600;
    await service.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msNumberToTs(seconds * 1000) });
    return { kind: 'namespace', name: namespace, action: 'created', detail: `retention ${formatSeconds(seconds)}`, fresh: true };
  }
  const current = Number(described.config?.workflowExecutionRetentionTtl?.seconds ?? 0);
  if (retentionSeconds !== undefined && current !== retentionSeconds) {
    await service.updateNamespace({ namespace, config: { workflowExecutionRetentionTtl: msNumberToTs(retentionSeconds * 1000) } });
    return { kind: 'namespace', name: namespace, action: 'retention updated', detail: `retention ${formatSeconds(current)} → ${formatSeconds(retentionSeconds)}`, fresh: false };
  }
  return { kind: 'namespace', name: namespace, action: 'present', detail: `retention ${formatSeconds(current)}`, fresh: false };
}

async function ensureSearchAttributes(connection: Connection, namespace: string, fresh: boolean): Promise<SetupItem[]> {
  const listed = await whenNamespaceAnswers(namespace, fresh, () => connection.operatorService.listSearchAttributes({ namespace }));
  const existing = new Map<string, number>([...Object.entries(listed.systemAttributes ?? {}), ...Object.entries(listed.customAttributes ?? {})].map(([k, v]) => [k, Number(v)]));
  const items: SetupItem[] = [];
  const missing: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const key of SEARCH_ATTRIBUTES) {
    const found = existing.get(key.name);
    if (found === undefined) missing[key.name] = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
    else if (found !== KEYWORD) {
      throw new SetupError(`search attribute ${key.name} exists as ${IndexedValueType[found] ?? found}; the sagas need it as Keyword (remove or rename it first)`);
    } else items.push({ kind: 'search attribute', name: key.name, action: 'present', detail: 'Keyword' });
  }
  if (Object.keys(missing).length > 0) {
    await whenNamespaceAnswers(namespace, fresh, () => connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing }));
    for (const name of Object.keys(missing)) items.push({ kind: 'search attribute', name, action: 'added', detail: 'Keyword' });
  }
  const order = SEARCH_ATTRIBUTES.map((k) => k.name);
  return items.sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
}

/**
 * Makes the cluster of `config` ready for the sagas: the namespace (made only with
 * `createNamespace`; its retention set when `retention` is given), the search attributes, the purge
 * schedule. Idempotent: a second run reports no change.
 * @throws SetupError when something cannot be made as needed (a missing namespace not asked to be made, a search attribute of another type).
 */
export async function setupCluster(config: Config, options: SetupOptions = {}): Promise<SetupReport> {
  const namespace = config.temporal.namespace;
  const retentionSeconds = options.retention === undefined ? undefined : parseRetention(options.retention);
  const connection = await connectClient(config.temporal);
  try {
    const { fresh, ...namespaceItem } = await ensureNamespace(connection, namespace, { createNamespace: options.createNamespace, retentionSeconds });
    const attributes = await ensureSearchAttributes(connection, namespace, fresh);
    const client = new Client({ connection, namespace, dataConverter: dataConverterOf(config) });
    const schedule = await whenNamespaceAnswers(namespace, fresh, () => ensurePurgeSchedule(client, config));
    const items: SetupItem[] = [
      namespaceItem,
      ...attributes,
      { kind: 'schedule', name: schedule.scheduleId, action: schedule.action, detail: `purges step idempotency records older than ${config.idempotencyRetentionMs} ms, hourly` },
    ];
    return { namespace, items, changes: items.filter((i) => i.action !== 'present' && i.action !== 'unchanged').length };
  } finally {
    await connection.close();
  }
}

function formatSeconds(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400}d`;
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  return `${seconds}s`;
}
