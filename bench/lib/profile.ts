/**
 * Where one answer's CPU goes in this process: a load run under V8's sampling profiler (node:inspector),
 * each sample's time given to the part of the answer it was spent for, and those shares turned into µs
 * per answer with the process's CPU time over the same run. A sample belongs to the nearest frame,
 * from the leaf up, that names a part: the HMAC's native code to the intent key that asked for it, a
 * socket write to ioredis. The profiler costs the run some speed; the shares are what it is for.
 */
import { Session } from 'node:inspector/promises';
import type { Profiler } from 'node:inspector';
import { formatNumber } from './report';

const OTHER = 'the rest (V8 and libuv outside JavaScript)';
/** The profiler's own work: not the answer's. */
const INSPECTOR = 'inspector';
/** Node's own JavaScript (promise jobs, timers, events) where no part of ours called it. */
const NODE = 'Node internals (promise jobs, events)';

/** Frames of the Redis call: Rms (checks, keys, reply), ioredis and the socket under it. */
const REDIS_CALL = /\/src\/rms\/(rms|replies|validation|keys|scripts|errors)\.[jt]s$|\/node_modules\/(ioredis|redis-parser|standard-as-callback|denque|cluster-key-slot)\/|^node:(net|internal\/stream_base_commons|internal\/net|internal\/streams\/)/;

/**
 * The parts of an answer, in print order, and which frames are theirs. A sample belongs to the
 * nearest frame, from the leaf up, that one of them owns; a frame's url is a `file://` URL under
 * tsx (`…/src/client/gate.ts`) and a path once compiled (`…/src/client/gate.js`), so both forms match.
 */
const PARTS: { name: string; owns: (fn: string, url: string) => boolean }[] = [
  { name: INSPECTOR, owns: (fn, url) => url === 'node:inspector' || url === 'node:inspector/promises' },
  // Named functions first: a frame belongs to the first part that owns it (sagaSessionId is in src/sagas/).
  { name: 'session id (SHA-256)', owns: (fn) => fn === 'sagaSessionId' },
  { name: 'key tag (SHA-256)', owns: (fn) => fn === 'intentTag' },
  { name: 'input checks (schema, request checks)', owns: (fn, url) => /\/node_modules\/zod\/|\/src\/sagas\/|\/src\/client\/core\.[jt]s$/.test(url) },
  { name: 'intent key (canonical JSON, HMAC-SHA-256)', owns: (fn, url) => /\/src\/rms\/intent-key\.[jt]s$/.test(url) },
  { name: 'Redis call (Rms.reserve, ioredis, socket)', owns: (fn, url) => REDIS_CALL.test(url) },
  { name: 'gate and SagaClient.start', owns: (fn, url) => /\/src\/(gate|client|shared\/saga)(\/|\.[jt]s$)/.test(url) },
  { name: 'tracing hooks', owns: (fn, url) => url.includes('/@opentelemetry/') || /\/src\/tracing\//.test(url) },
  { name: 'garbage collection', owns: (fn) => fn === '(garbage collector)' },
  { name: 'the bench loop', owns: (fn, url) => /\/bench\//.test(url) },
];

/** The parts as an answer goes through them, then what is not the answer's own. */
const PRINT_ORDER = [
  'input checks (schema, request checks)',
  'intent key (canonical JSON, HMAC-SHA-256)',
  'session id (SHA-256)',
  'key tag (SHA-256)',
  ...PARTS.slice(5).map((p) => p.name),
  NODE,
  OTHER,
];

/** µs of CPU per answer in each part, and the run it was read from. */
export interface AnswerProfile {
  answers: number;
  cpuUsPerAnswer: number;
  /** Part name → µs per answer, OTHER last. */
  parts: Record<string, number>;
  /** Samples the profiler took (idle ones left out). */
  samples: number;
}

/** Runs `load` (it returns how many answers it gave) under the profiler, and splits its CPU by part. */
export async function profileAnswers(load: () => Promise<number>, samplingIntervalUs = 200): Promise<AnswerProfile> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: samplingIntervalUs });
    await session.post('Profiler.start');
    const cpu0 = process.cpuUsage();
    let answers = 0;
    let cpu: NodeJS.CpuUsage;
    let profile: Profiler.Profile;
    try {
      answers = await load();
    } finally {
      // Read before stopping: making the profile costs CPU, and its samples are left out below.
      cpu = process.cpuUsage(cpu0);
      ({ profile } = await session.post('Profiler.stop'));
    }
    const cpuUsPerAnswer = (cpu.user + cpu.system) / Math.max(answers, 1);
    const { shares, samples } = sharesOf(profile);
    const parts = Object.fromEntries(PRINT_ORDER.map((name) => [name, (shares.get(name) ?? 0) * cpuUsPerAnswer]));
    return { answers, cpuUsPerAnswer, parts, samples };
  } finally {
    session.disconnect();
  }
}

/** Each part's share of the profile's busy time (idle samples left out). */
function sharesOf(profile: Profiler.Profile): { shares: Map<string, number>; samples: number } {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  /** The part of a node: its own frame's, or its nearest ancestor's (memoized: one walk per node). */
  const partOf = new Map<number, string | null>();
  const part = (id: number): string | undefined => {
    const known = partOf.get(id);
    if (known !== undefined) return known ?? undefined;
    const { functionName, url } = nodes.get(id)!.callFrame;
    const owner = PARTS.find((p) => p.owns(functionName, url))?.name;
    const up = parent.get(id);
    const found = owner ?? (up === undefined ? undefined : part(up));
    partOf.set(id, found ?? null);
    return found;
  };
  /** A sample no part owns: Node's own JavaScript (a promise job, an event) or the rest. */
  const partOfSample = (id: number): string => part(id) ?? (nodes.get(id)!.callFrame.url.startsWith('node:') ? NODE : OTHER);
  const time = new Map<string, number>();
  let busy = 0;
  let samples = 0;
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id, i) => {
    // Waiting, or the profiler making the profile (the inspector's dispatch of Profiler.stop).
    const name = partOfSample(id);
    if (name === INSPECTOR || nodes.get(id)!.callFrame.functionName === '(idle)') return;
    const dt = deltas[i] ?? 0;
    time.set(name, (time.get(name) ?? 0) + dt);
    busy += dt;
    samples++;
  });
  return { shares: new Map([...time].map(([name, t]) => [name, busy > 0 ? t / busy : 0])), samples };
}

/** `profile` as one line: CPU µs per answer, then each part's. */
export function profileText(who: string, profile: AnswerProfile): string {
  const parts = Object.entries(profile.parts)
    .filter(([, us]) => us > 0)
    .map(([name, us]) => `${name} ${formatNumber(us, 1)}`);
  return `${who}: ${formatNumber(profile.cpuUsPerAnswer, 1)} µs of CPU per answer (${profile.answers.toLocaleString('en-US')} answers, ${profile.samples.toLocaleString('en-US')} samples): ${parts.join(', ')}`;
}
