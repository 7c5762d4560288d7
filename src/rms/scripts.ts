/**
 * The Lua scripts of the RMS, read once from `lua/` and registered on a client through ioredis
 * `defineCommand`: each call is an EVALSHA, with EVAL as the fallback when a server answers NOSCRIPT
 * (after a restart, or on a cluster node that has not seen the script yet).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import { PROJECT_ROOT } from '../paths';

/** `lua/` at the repository root, from the sources and from dist/src/ alike. */
const LUA_DIR = path.join(PROJECT_ROOT, 'lua');

/** Each script: its file, its key count (null: the call's first argument says), and whether it only reads. */
const SCRIPTS = {
  rmsReserve: { file: 'reserve.lua', numberOfKeys: 3, readOnly: false },
  rmsRaise: { file: 'raise.lua', numberOfKeys: 1, readOnly: false },
  rmsExtend: { file: 'extend.lua', numberOfKeys: 1, readOnly: false },
  rmsFinalize: { file: 'finalize.lua', numberOfKeys: 2, readOnly: false },
  rmsRelease: { file: 'release.lua', numberOfKeys: 2, readOnly: false },
  rmsFree: { file: 'free.lua', numberOfKeys: 2, readOnly: false },
  rmsMarkExists: { file: 'mark-exists.lua', numberOfKeys: 1, readOnly: false },
  rmsRememberEnded: { file: 'remember-ended.lua', numberOfKeys: 1, readOnly: false },
  rmsInspect: { file: 'inspect.lua', numberOfKeys: 2, readOnly: true },
  // A saga's counters: one caller's, and one per declared scope value (see admit.lua).
  rmsAdmit: { file: 'admit.lua', numberOfKeys: null, readOnly: false },
  rmsCountOut: { file: 'count-out.lua', numberOfKeys: null, readOnly: false },
} as const;

type ScriptName = keyof typeof SCRIPTS;

/** A client with the RMS scripts registered: one method per script, arguments = KEYS then ARGV (the key count first, where the script's is null). */
export type RmsClient = (Redis | Cluster) & Record<ScriptName, (...keysThenArgs: string[]) => Promise<unknown>>;

let sources: Record<ScriptName, string> | undefined;

/**
 * The source Redis runs for `file` of `lua/`: the shared helpers of `lua/lib/tokens.lua` (a script
 * cannot import), then the script itself.
 */
export function scriptSource(file: string): string {
  return `${readFileSync(path.join(LUA_DIR, 'lib/tokens.lua'), 'utf8')}\n${readFileSync(path.join(LUA_DIR, file), 'utf8')}`;
}

function loadSources(): Record<ScriptName, string> {
  sources ??= Object.fromEntries(Object.entries(SCRIPTS).map(([name, { file }]) => [name, scriptSource(file)])) as Record<ScriptName, string>;
  return sources;
}

/** Registers the RMS scripts on `redis` (once per client; later calls find them in place). */
export function registerScripts(redis: Redis | Cluster): RmsClient {
  const lua = loadSources();
  const client = redis as RmsClient;
  for (const [name, { numberOfKeys, readOnly }] of Object.entries(SCRIPTS) as [ScriptName, (typeof SCRIPTS)[ScriptName]][]) {
    if (typeof client[name] !== 'function') redis.defineCommand(name, { lua: lua[name], ...(numberOfKeys === null ? {} : { numberOfKeys }), readOnly });
  }
  return client;
}
