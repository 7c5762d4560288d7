/**
 * The fault run (DESIGN.md, "Faults the tests inject"): order requests over fewer intents than keys
 * (so keys collide: DUPLICATE and CONFLICT happen, and compensated intents are taken again), with
 * good and declined cards and carts whose stock runs short after the card was charged (the charge
 * must be refunded), and returns of orders completed meanwhile (`order-return`: the order released,
 * so its cart is ordered again as a new order), sent to real worker processes while a fault loop kills a worker every few
 * seconds, pauses one past its lease (the others killed, so no worker takes its writes over in
 * time), wipes the run's Redis keys twice and kills the payment provider's process twice. Then every
 * saga is let end, every key used is retried (same key, same body), and the real state is counted:
 * answers that differ from their key's saga, effects done twice (two live orders of one intent
 * among them), effects left without their saga
 * completing or being compensated, SUCCESS answers that ended REJECTED (other than by a write that
 * outlived its lease, counted apart), sagas stuck. docs/operations.md ("The fault run") shows a run's
 * figures.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import type { SagaClient, StartedSaga } from '../../src/client';
import { DEFAULT_PICKUP_LEASE_MS } from '../../src/config';
import { sessionTag } from '../../src/rms';
import { sagaSessionId } from '../../src/sagas';
import { DEFAULT_COMPENSATION_ATTEMPTS, ErrorType, SagaOutcome, sagaWorkflowId, type SagaState } from '../../src/shared';
import { killProviderProcesses, startProviderProcess, type ProviderProcess } from '../helpers/provider-process';
import { killWorkerProcesses, startWorkerProcess, type WorkerProcess } from '../helpers/processes';
import { wipeKeys } from '../helpers/redis-backends';
import { freePort } from '../helpers/redis-servers';
import { startHarness, type SagaHarness } from '../helpers/saga-harness';
import { DECLINED_CARD, sagaTypesFor, type SimulatedOrderInput } from '../fixtures/orders';
import { seededRandom } from '../helpers/seeded-random';

/** Requests the driver sends, over {@link DRIVE_MS}; some are a client's retry of an earlier key. */
const REQUESTS = 300;
/** Distinct intents (customer and cart) the requests are spread over. */
const INTENTS = 110;
/** Share of requests that resend an earlier request (same key, same body). */
const RESEND_SHARE = 0.15;
/**
 * Share of the driver's sends that return an order completed during the run (`order-return`: the
 * stock given back, the charge refunded, the order released, so its cart may be ordered again),
 * when one has completed; the same order may be picked twice.
 */
const RETURN_SHARE = 0.1;
/** Share of requests with a card the provider declines (compensated at the charge). */
const DECLINED_SHARE = 0.2;
/** How long the driver sends for; the faults happen within it. */
const DRIVE_MS = 100_000;
/** Worker processes kept running (one is killed every {@link KILL_EVERY_MS}, and another started). */
const WORKERS = 3;
const KILL_EVERY_MS = 10_000;
/** When (as shares of DRIVE_MS) Redis loses the run's keys, the provider is killed, a worker is paused. */
const REDIS_WIPES_AT = [0.3, 0.7];
const PROVIDER_KILLS_AT = [0.2, 0.6];
const PAUSE_AT = 0.45;
/** How long the provider stays down before it is started again on its port. */
const PROVIDER_DOWN_MS = 1_500;
/** Lease 4 s, a beat every 400 ms, heartbeat timeout 2 s: a killed write is retried within its lease. */
const TIMINGS = { LEASE_MS: '4000', HEARTBEAT_INTERVAL_MS: '400', HEARTBEAT_TIMEOUT_MS: '2000' };
const LEASE_MS = Number(TIMINGS.LEASE_MS);
/** The pause: 4 s past the lease, so the paused worker's writes lose theirs. */
const PAUSE_MS = LEASE_MS + 4_000;
/** Bound on every saga's end, once the driver is done (a compensation on a killed worker waits out its 60 s start-to-close). */
const SETTLE_MS = 150_000;
/** Stock of the scarce SKU: the first orders of it complete, later ones are refunded. */
const SCARCE_STOCK = 8;

type CartKind = 'plenty' | 'short' | 'scarce';
interface Intent {
  index: number;
  kind: CartKind;
  customer: string;
  intentKey: string;
}
interface Answer {
  /** ms since the run began: sent, answered. */
  sentAt: number;
  at: number;
  pass: 'run' | 'retry';
  status?: StartedSaga['reservation']['status'];
  started?: boolean;
  replayed?: boolean;
  outcome?: string;
  runId?: string;
  fencingToken?: string;
  error?: string;
}
interface Request {
  key: string;
  workflowId: string;
  intent: Intent;
  body: SimulatedOrderInput;
  answers: Answer[];
}
/** An order completed during the run (its saga's result said so), which a return may pick. */
interface CompletedOrder {
  request: Request;
  runId: string;
  entityId: string;
}
/** An `order-return` request. */
interface Return {
  key: string;
  workflowId: string;
  order: CompletedOrder;
  answers: ReturnAnswer[];
}
/** A return's answer: the gate's, or ENTITY_NOT_FOUND (the order is released already). */
type ReturnAnswer = Answer & { notFound?: true };
/** One run of a key's saga, as it ended. */
interface Run {
  workflowId: string;
  runId: string;
  status: string;
  startTime: number;
  closeTime?: number;
  state?: SagaState;
}

const tag = randomBytes(4).toString('hex');
const SKUS = { plenty: `fault-${tag}-plenty`, short: `fault-${tag}-short`, scarce: `fault-${tag}-scarce` };
const INITIAL_STOCK: Record<string, number> = { [SKUS.plenty]: 1_000_000, [SKUS.short]: 0, [SKUS.scarce]: SCARCE_STOCK };

let h: SagaHarness;
let client: SagaClient;
let providerPort: number;
let provider: ProviderProcess;

beforeAll(async () => {
  providerPort = await freePort();
  provider = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port: providerPort });
  h = await startHarness('fault run', { worker: false, env: TIMINGS, sagaTypes: (config) => sagaTypesFor(config, `http://127.0.0.1:${providerPort}`) });
  // The library's defaults: a refund that meets the provider's outage (down PROVIDER_DOWN_MS, then its
  // process's start, up to 40 s on a loaded machine) rides it out under DEFAULT_COMPENSATION_RETRY.
  client = h.newClient({ compensationAttempts: DEFAULT_COMPENSATION_ATTEMPTS });
  for (const [sku, available] of Object.entries(INITIAL_STOCK)) await h.pool.query('INSERT INTO stock (sku, available) VALUES ($1, $2)', [sku, available]);
});
afterAll(async () => {
  killWorkerProcesses();
  killProviderProcesses();
  await h?.stop();
});


function itemsOf(kind: CartKind): SimulatedOrderInput['items'] {
  if (kind === 'plenty') return [{ sku: SKUS.plenty, quantity: 2, priceCents: 1250 }];
  // Locked in SKU order: plenty first, so the short one fails after another row was touched (rolled back).
  if (kind === 'short') return [{ sku: SKUS.plenty, quantity: 1, priceCents: 900 }, { sku: SKUS.short, quantity: 1, priceCents: 100 }];
  return [{ sku: SKUS.scarce, quantity: 1, priceCents: 4999 }];
}

it('answers every key as its saga ended, does each effect once, and leaves no effect undone or saga stuck', { timeout: 600_000 }, async () => {
  const seed = Number(process.env.FAULT_RUN_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const random = seededRandom(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const began = Date.now();
  const now = () => Date.now() - began;
  const log = (line: string) => console.log(`fault run +${(now() / 1000).toFixed(1)}s: ${line}`);
  const providerUrl = `http://127.0.0.1:${providerPort}`;
  const tq = h.config.temporal.taskQueue;

  // The intents, and the requests over them.
  const intents: Intent[] = Array.from({ length: INTENTS }, (_, index) => {
    const kind: CartKind = index % 10 < 6 ? 'plenty' : index % 10 < 9 ? 'short' : 'scarce';
    const customer = `fault-${tag}-customer-${index}`;
    return { index, kind, customer, intentKey: client.prepare('order', { customer, items: itemsOf(kind), payment: { card: '4242424242424242' } }).intentKey };
  });
  const requests: Request[] = [];
  const newRequest = (): Request => {
    const intent = pick(intents);
    const roll = random();
    // A long write (a kill or the pause finds it mid-write), or slow steps (mid-charge), or neither.
    const simulate = roll < 0.35 ? { writeDelayMs: 1500 + Math.floor(random() * 1500) } : roll < 0.5 ? { stepDelayMs: 300 + Math.floor(random() * 700) } : undefined;
    const key = `fault-${tag}-${requests.length}`;
    const body: SimulatedOrderInput = {
      customer: intent.customer,
      items: itemsOf(intent.kind),
      payment: { card: random() < DECLINED_SHARE ? DECLINED_CARD : '4242424242424242' },
      ...(simulate ? { simulate } : {}),
    };
    const request = { key, workflowId: sagaWorkflowId('order', key), intent, body, answers: [] };
    requests.push(request);
    return request;
  };
  const send = async (request: Request, pass: Answer['pass']): Promise<Answer> => {
    const sentAt = now();
    let answer: Answer;
    try {
      const started = await client.start('order', request.body, { idempotencyKey: request.key });
      answer = {
        sentAt,
        at: now(),
        pass,
        status: started.reservation.status,
        started: started.started,
        ...(started.replayed ? { replayed: true } : {}),
        ...(started.outcome ? { outcome: started.outcome } : {}),
        ...(started.runId ? { runId: started.runId } : {}),
        ...(started.reservation.status === 'SUCCESS' ? { fencingToken: started.reservation.fencingToken } : {}),
      };
    } catch (err) {
      answer = { sentAt, at: now(), pass, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    request.answers.push(answer);
    if (answer.status === 'SUCCESS' && answer.started && answer.runId && !watched.has(answer.runId)) {
      watched.add(answer.runId);
      // Told once it ends: a completed order is one a return may pick.
      void client.result(request.workflowId).then(
        (final) => {
          if (final.outcome === SagaOutcome.COMPLETED && final.entityId && final.fencingToken === answer.fencingToken) completedOrders.push({ request, runId: answer.runId!, entityId: final.entityId });
        },
        () => undefined,
      );
    }
    return answer;
  };
  const watched = new Set<string>();
  const completedOrders: CompletedOrder[] = [];
  const returns: Return[] = [];
  const newReturn = (order: CompletedOrder): Return => {
    const key = `fault-${tag}-r${returns.length}`;
    const ret = { key, workflowId: sagaWorkflowId('order-return', key), order, answers: [] };
    returns.push(ret);
    return ret;
  };
  const sendReturn = async (ret: Return, pass: Answer['pass']): Promise<ReturnAnswer> => {
    const sentAt = now();
    let answer: ReturnAnswer;
    try {
      const started = await client.start('order-return', { order: ret.order.entityId }, { idempotencyKey: ret.key });
      answer = {
        sentAt,
        at: now(),
        pass,
        status: started.reservation.status,
        started: started.started,
        ...(started.replayed ? { replayed: true } : {}),
        ...(started.outcome ? { outcome: started.outcome } : {}),
        ...(started.runId ? { runId: started.runId } : {}),
      };
    } catch (err) {
      const notFound = err instanceof Error && (err as Error & { code?: string }).code === ErrorType.ENTITY_NOT_FOUND;
      answer = notFound ? { sentAt, at: now(), pass, notFound: true } : { sentAt, at: now(), pass, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    ret.answers.push(answer);
    return answer;
  };

  // Workers: WORKERS of them; a killed one is replaced at once (its start takes a while).
  const live = new Set<WorkerProcess>();
  const starting = new Set<Promise<void>>();
  const workerEnv = { PAYMENT_PROVIDER_URL: providerUrl };
  const startOne = () => {
    const begun = Date.now();
    const p = startWorkerProcess(h.config, workerEnv, { prebundled: true }).then(
      (w) => {
        live.add(w);
        void w.exited.then(() => live.delete(w));
        log(`worker ${w.child.pid} polling (started in ${((Date.now() - begun) / 1000).toFixed(1)} s)`);
      },
      (err: unknown) => log(`a worker failed to start: ${String(err).slice(0, 300)}`),
    );
    starting.add(p);
    void p.finally(() => starting.delete(p));
    return p;
  };
  await Promise.all(Array.from({ length: WORKERS }, startOne));
  expect(live.size).toBe(WORKERS);

  /** How many fenced writes run on each worker now (by pid), as visibility and each saga's pending write show them. */
  const writesByWorker = async (): Promise<Map<number, number>> => {
    const counts = new Map<number, number>();
    try {
      for await (const wf of h.client.temporal.workflow.list({ query: `TaskQueue = "${tq}" AND ExecutionStatus = "Running" AND SagaPhase = "WRITING"` })) {
        const described = await h.client.temporal.workflow.getHandle(wf.workflowId, wf.runId).describe();
        const write = described.raw.pendingActivities?.find((a) => a.activityType?.name === 'writeEntity');
        const pid = Number(/^(\d+)@/.exec(write?.lastWorkerIdentity ?? '')?.[1] ?? 0);
        if (pid) counts.set(pid, (counts.get(pid) ?? 0) + 1);
      }
    } catch {
      // A figure only: a visibility hiccup under load does not stop the run.
    }
    return counts;
  };
  /** Of the workers polling, the one with the most writes running on it (and how many). */
  const busiest = async (): Promise<{ worker: WorkerProcess; writes: number } | undefined> => {
    const writes = await writesByWorker();
    const ranked = [...live].map((worker) => ({ worker, writes: writes.get(worker.child.pid ?? 0) ?? 0 })).sort((a, b) => b.writes - a.writes);
    return ranked[0];
  };

  const faults = { kills: 0, killedMidWrite: 0, pausedWrites: 0, wipes: [] as number[], providerKills: 0, skippedKills: 0 };
  const killOne = async () => {
    const victim = live.size >= 2 ? await busiest() : undefined;
    if (!victim || live.size < 2) {
      faults.skippedKills++;
      return;
    }
    victim.worker.child.kill('SIGKILL');
    await victim.worker.exited;
    faults.kills++;
    faults.killedMidWrite += victim.writes;
    log(`killed worker ${victim.worker.child.pid} (${victim.writes} writes on it); ${live.size} left`);
    void startOne();
  };
  const pauseOne = async () => {
    // The worker with writes running on it (waiting a little for one), the others killed, so that no
    // worker takes its writes over before their lease ends.
    let victim = await busiest();
    for (const until = Date.now() + 15_000; victim && victim.writes === 0 && Date.now() < until; victim = await busiest()) await delay(500);
    if (!victim) return;
    const others = [...live].filter((w) => w !== victim.worker);
    for (const other of others) {
      other.child.kill('SIGKILL');
      await other.exited;
      void startOne();
    }
    faults.pausedWrites = victim.writes;
    victim.worker.child.kill('SIGSTOP');
    log(`paused worker ${victim.worker.child.pid} for ${PAUSE_MS} ms (${victim.writes} writes on it), killed ${others.length} others`);
    await delay(PAUSE_MS);
    victim.worker.child.kill('SIGCONT');
    log(`worker ${victim.worker.child.pid} resumed`);
  };
  const wipedAt: number[] = [];
  /** Says so when Redis lost the run's keys between `from` and `to` (ms since the run began). */
  const wipedNear = (from: number, to = from) => {
    const at = wipedAt.filter((w) => w >= from - 2 * LEASE_MS && w <= to);
    return at.length > 0 ? ` (Redis lost its keys at +${at.join(', +')} ms)` : '';
  };
  const wipeRedis = async () => {
    wipedAt.push(now());
    const deleted = await wipeKeys(h.redis, h.config.redis.keyPrefix);
    faults.wipes.push(deleted);
    log(`Redis lost the run's ${deleted} keys`);
  };
  // The provider comes back on its port PROVIDER_DOWN_MS after a kill, plus its process's start.
  let providerBack = Promise.resolve();
  const killProvider = async () => {
    await providerBack;
    provider.child.kill('SIGKILL');
    await provider.exited;
    faults.providerKills++;
    const killedAt = Date.now();
    log('provider killed');
    providerBack = delay(PROVIDER_DOWN_MS).then(async () => {
      provider = await startProviderProcess({ databaseUrl: inject('databaseUrl'), port: providerPort });
      log(`provider back after ${((Date.now() - killedAt) / 1000).toFixed(1)} s`);
    });
  };
  const events: { at: number; run: () => Promise<void> }[] = [
    ...Array.from({ length: Math.floor(DRIVE_MS / KILL_EVERY_MS) }, (_, i) => ({ at: 6_000 + i * KILL_EVERY_MS, run: killOne })),
    ...REDIS_WIPES_AT.map((share) => ({ at: share * DRIVE_MS, run: wipeRedis })),
    ...PROVIDER_KILLS_AT.map((share) => ({ at: share * DRIVE_MS, run: killProvider })),
    { at: PAUSE_AT * DRIVE_MS, run: pauseOne },
  ].sort((a, b) => a.at - b.at);

  // Act: the driver and the fault loop, side by side.
  const driveStart = Date.now();
  const faultLoop = (async () => {
    for (const event of events) {
      await delay(Math.max(0, driveStart + event.at - Date.now()));
      await event.run();
    }
  })();
  const sent: Promise<Answer>[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    await delay(Math.max(0, driveStart + (i * DRIVE_MS) / REQUESTS - Date.now()));
    if (random() < RETURN_SHARE && completedOrders.length > 0) {
      sent.push(sendReturn(newReturn(pick(completedOrders)), 'run'));
      continue;
    }
    const request = requests.length > 10 && random() < RESEND_SHARE ? pick(requests) : newRequest();
    sent.push(send(request, 'run'));
  }
  await Promise.all(sent);
  await faultLoop;
  await providerBack;
  await Promise.all(starting);
  log(`driver done: ${REQUESTS} requests, ${requests.length} keys and ${returns.length} returns; ${live.size} workers polling`);

  // Every saga ends (bounded).
  const countRunning = async () => (await h.client.temporal.workflow.count(`TaskQueue = "${tq}" AND ExecutionStatus = "Running"`)).count;
  const settleBy = Date.now() + SETTLE_MS;
  while ((await countRunning()) > 0 && Date.now() < settleBy) await delay(1000);
  log(`sagas settled (${await countRunning()} still running)`);

  /** A run as it ended (or runs still), with its final state. */
  const readRun = async (workflowId: string, runId: string): Promise<Run | undefined> => {
    const handle = h.client.temporal.workflow.getHandle(workflowId, runId, { followRuns: false });
    const described = await handle.describe().catch((err: unknown) => {
      // A run an answer named that does not exist: counted below.
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    });
    if (!described) return undefined;
    const run: Run = { workflowId, runId, status: described.status.name, startTime: described.startTime.getTime(), ...(described.closeTime ? { closeTime: described.closeTime.getTime() } : {}) };
    if (run.status === 'RUNNING') return run;
    try {
      run.state = (await handle.result()) as SagaState;
    } catch (err) {
      const cause = err instanceof WorkflowFailedError ? err.cause : undefined;
      if (cause instanceof ApplicationFailure && cause.type === ErrorType.SAGA_REJECTED) run.state = cause.details?.[0] as SagaState;
    }
    return run;
  };
  /**
   * Every run of the task queue (visibility, and every run an answer named, should visibility lag),
   * read as it ended; runs by workflow id, oldest first.
   */
  const readRuns = async (): Promise<Map<string, Run[]>> => {
    const ids = new Map<string, { workflowId: string; runId: string }>();
    for await (const info of h.client.temporal.workflow.list({ query: `TaskQueue = "${tq}"` })) ids.set(info.runId, info);
    for (const r of [...requests, ...returns]) for (const a of r.answers) if (a.runId) ids.set(a.runId, { workflowId: r.workflowId, runId: a.runId });
    const infos = [...ids.values()];
    const runs: Run[] = [];
    for (let i = 0; i < infos.length; i += 16) {
      for (const run of await Promise.all(infos.slice(i, i + 16).map((info) => readRun(info.workflowId, info.runId)))) if (run) runs.push(run);
    }
    const byKey = new Map<string, Run[]>();
    for (const run of runs.sort((a, b) => a.startTime - b.startTime)) byKey.set(run.workflowId, [...(byKey.get(run.workflowId) ?? []), run]);
    return byKey;
  };
  const runsAfterDrive = await readRuns();
  const outcomeOf = (run: Run | undefined): string | undefined => (run?.status === 'RUNNING' ? undefined : (run?.state?.outcome ?? run?.status));
  /** A run that answers its key (running, or ended in an outcome that holds it); a REJECTED or failed one does not. */
  const holdsAnswer = (run: Run): boolean => outcomeOf(run) !== SagaOutcome.REJECTED && outcomeOf(run) !== 'FAILED';

  // Every key used is retried, same key and body: per intent, the keys whose saga holds its answer
  // first, then the others, one at a time (a new saga they start is let end before the next key).
  const differing: string[] = [];
  const retryRuns = new Map<string, string>();
  const byIntent = new Map<Intent, Request[]>();
  for (const request of requests) byIntent.set(request.intent, [...(byIntent.get(request.intent) ?? []), request]);
  const retryIntent = async (keys: Request[]) => {
    const latest = (r: Request) => runsAfterDrive.get(r.workflowId)?.at(-1);
    const answers = (r: Request) => {
      const run = latest(r);
      return run !== undefined && holdsAnswer(run);
    };
    const ordered = [...keys].sort((a, b) => Number(!answers(a)) - Number(!answers(b)));
    for (const request of ordered) {
      const run = latest(request);
      if (run && holdsAnswer(run)) {
        const answer = await send(request, 'retry');
        const expected = { status: 'SUCCESS', started: true, replayed: true, runId: run.runId, outcome: outcomeOf(run), fencingToken: run.state?.fencingToken };
        const got = { status: answer.status, started: answer.started, replayed: answer.replayed, runId: answer.runId, outcome: answer.outcome, fencingToken: answer.fencingToken };
        if (JSON.stringify(got) !== JSON.stringify(expected)) differing.push(`${request.key}: retry answered ${JSON.stringify(answer)}, its saga ${JSON.stringify(expected)}`);
        continue;
      }
      // No saga holds this key's answer (none started, or it ended REJECTED): a fresh answer for the intent.
      const row = await h.pool.query<{ status: string }>("SELECT status FROM orders WHERE intent_key = $1 AND status <> 'RELEASED'", [request.intent.intentKey]);
      const entity = ['REGISTERED', 'COMPLETED'].includes(row.rows[0]?.status ?? '');
      const answer = await send(request, 'retry');
      const fresh = answer.status === 'SUCCESS' && answer.started === true && answer.replayed === undefined;
      if (entity ? answer.status !== 'DUPLICATE' : !fresh) {
        differing.push(`${request.key}: retry answered ${JSON.stringify(answer)}, expected ${entity ? 'DUPLICATE (the intent\'s entity exists)' : 'a new saga (SUCCESS): the intent is free'}`);
      }
      if (fresh && answer.runId) {
        retryRuns.set(request.workflowId, answer.runId);
        // Bounded: a saga that does not end in time is counted stuck below.
        await h.client.temporal.withAbortSignal(AbortSignal.timeout(SETTLE_MS / 2), () => h.client.result(request.workflowId)).catch(() => undefined);
      }
    }
  };
  const queue = [...byIntent.values()];
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let keys = queue.shift(); keys; keys = queue.shift()) await retryIntent(keys);
  }));
  log(`retried ${requests.length} keys (${retryRuns.size} started a new saga)`);

  // Every return key is retried too: one whose saga holds its answer gets that saga's; one the order
  // was released for already gets ENTITY_NOT_FOUND again; one that never ran (CONFLICT) may run now.
  for (const ret of returns) {
    const run = runsAfterDrive.get(ret.workflowId)?.at(-1);
    const answer = await sendReturn(ret, 'retry');
    if (run && holdsAnswer(run)) {
      const expected = { status: 'SUCCESS', started: true, replayed: true, runId: run.runId, outcome: outcomeOf(run) };
      const got = { status: answer.status, started: answer.started, replayed: answer.replayed, runId: answer.runId, outcome: answer.outcome };
      if (JSON.stringify(got) !== JSON.stringify(expected)) differing.push(`${ret.key}: retry answered ${JSON.stringify(answer)}, its saga ${JSON.stringify(expected)}`);
    } else if (ret.answers.some((a) => a.pass === 'run' && a.notFound) && !answer.notFound) {
      differing.push(`${ret.key}: answered ENTITY_NOT_FOUND during the run, its retry ${JSON.stringify(answer)}`);
    } else if (!answer.notFound && !(answer.status === 'SUCCESS' && answer.started && answer.replayed === undefined)) {
      differing.push(`${ret.key}: retry answered ${JSON.stringify(answer)}, expected a new saga or ENTITY_NOT_FOUND`);
    } else if (answer.runId) {
      await h.client.temporal.withAbortSignal(AbortSignal.timeout(SETTLE_MS / 2), () => h.client.result(ret.workflowId)).catch(() => undefined);
    }
  }
  log(`retried ${returns.length} return keys`);

  // The state as it is now: every run, every row, charge, stock movement and lease of the run.
  const runs = await readRuns();
  const allRuns = [...runs.values()].flat();
  const { rows: orderRows } = await h.pool.query<{ intent_key: string; status: string; token: string; cancelled_by: string | null }>(
    'SELECT intent_key, status, last_fencing_token::text AS token, cancelled_by FROM orders WHERE intent_key = ANY($1)',
    [intents.map((i) => i.intentKey)],
  );
  const { rows: charges } = await h.pool.query<{ reference: string; key: string; status: string; refunded: boolean; refund_key: string | null }>(
    `SELECT reference, idempotency_key AS key, status, refunded_at IS NOT NULL AS refunded, refund_idempotency_key AS refund_key
     FROM payment_provider.charges WHERE reference LIKE $1`,
    [`order-fault-${tag}-%`],
  );
  const { rows: reservations } = await h.pool.query<{ saga_key: string; sku: string; quantity: string; status: string }>(
    'SELECT saga_key, sku, quantity::text, status FROM stock_reservations WHERE sku = ANY($1)',
    [Object.values(SKUS)],
  );
  const { rows: stock } = await h.pool.query<{ sku: string; available: string }>('SELECT sku, available::text FROM stock WHERE sku = ANY($1)', [Object.values(SKUS)]);
  const leases = await Promise.all(intents.map((i) => h.rms.inspect(i.intentKey)));

  // 1. Answers that differ from the key's saga: the retries' (above); an answer that names a run that
  // does not exist, or an outcome its run did not end with; a DUPLICATE or CONFLICT during the run for
  // a key whose saga had answered SUCCESS before it was asked, while that saga still ran (told apart
  // in the figures) or after it ended holding its answer (one that ended REJECTED leaves its key to a
  // new attempt).
  const whileRunning: string[] = [];
  for (const request of requests) {
    const keyRuns = runs.get(request.workflowId) ?? [];
    for (const answer of request.answers) {
      if (answer.error !== undefined) differing.push(`${request.key}: answered an error at +${answer.at} ms: ${answer.error}`);
      if (!answer.started) {
        if (answer.pass === 'retry') continue; // checked above
        const earlier = request.answers.findLast((a) => a.started && a.runId !== undefined && a.at < answer.sentAt);
        const run = keyRuns.find((r) => r.runId === earlier?.runId);
        if (!run) continue;
        const endedBefore = (run.closeTime ?? Infinity) - began < answer.sentAt;
        const line = `${request.key}: answered ${answer.status} at +${answer.at} ms (sent +${answer.sentAt} ms), its saga ${run.runId} (SUCCESS at +${earlier!.at} ms) ended ${outcomeOf(run)} ${run.state?.reason ?? ''} at +${(run.closeTime ?? 0) - began} ms${wipedNear(answer.sentAt)}`;
        if (!endedBefore) whileRunning.push(line);
        else if (holdsAnswer(run)) differing.push(line);
        continue;
      }
      const run = keyRuns.find((r) => r.runId === answer.runId);
      if (!run) differing.push(`${request.key}: answered run ${answer.runId}, which does not exist`);
      else if (answer.outcome !== undefined && answer.outcome !== outcomeOf(run)) differing.push(`${request.key}: answered outcome ${answer.outcome}, its run ended ${outcomeOf(run)}`);
    }
  }

  for (const ret of returns) {
    const keyRuns = runs.get(ret.workflowId) ?? [];
    for (const answer of ret.answers) {
      if (answer.error !== undefined) differing.push(`${ret.key}: answered an error at +${answer.at} ms: ${answer.error}`);
      if (!answer.started) continue;
      const run = keyRuns.find((r) => r.runId === answer.runId);
      if (!run) differing.push(`${ret.key}: answered run ${answer.runId}, which does not exist`);
      else if (answer.outcome !== undefined && answer.outcome !== outcomeOf(run)) differing.push(`${ret.key}: answered outcome ${answer.outcome}, its run ended ${outcomeOf(run)}`);
    }
  }

  // The creations' runs and the returns' (one task queue holds both).
  const returnIds = new Set(returns.map((r) => r.workflowId));
  const creationRuns = allRuns.filter((r) => !returnIds.has(r.workflowId));
  /** The row a creation's run wrote (its intent, its token). */
  const rowOf = (run: Run) => orderRows.find((r) => r.intent_key === run.state?.intentKey && run.state?.fencingToken !== undefined && r.token === run.state.fencingToken);
  /** The returns of the order a creation's run made, whose latest run COMPLETED: at most one may. */
  const completedReturnsOf = (run: Run) =>
    returns.filter((ret) => ret.order.request.workflowId === run.workflowId && ret.order.runId === run.runId && outcomeOf(runs.get(ret.workflowId)?.at(-1)) === SagaOutcome.COMPLETED);

  // 2. Effects done twice: a saga's second charge, a run of a key after one that held its answer,
  // a second entity of an intent (two sagas completed), a refund made by another saga's key.
  const twice: string[] = [];
  const chargesOf = (workflowId: string) => charges.filter((c) => c.reference === workflowId);
  for (const [workflowId, keyRuns] of runs) {
    const succeeded = chargesOf(workflowId).filter((c) => c.status === 'succeeded');
    if (succeeded.length > 1) twice.push(`${workflowId}: ${succeeded.length} charges`);
    if (keyRuns.filter((r) => outcomeOf(r) !== SagaOutcome.REJECTED).length > 1) twice.push(`${workflowId}: ${keyRuns.length} runs that did not end REJECTED`);
    const ownReturns = keyRuns.flatMap(completedReturnsOf).map((ret) => `${ret.workflowId}:refundOrder`);
    for (const c of succeeded) if (c.refunded && c.refund_key !== `${workflowId}:refundPayment` && !ownReturns.includes(c.refund_key ?? '')) twice.push(`${workflowId}: charge refunded by ${c.refund_key}`);
  }
  for (const run of creationRuns) if (completedReturnsOf(run).length > 1) twice.push(`${run.workflowId}: returned by ${completedReturnsOf(run).map((r) => r.workflowId).join(' and ')}`);
  for (const intent of intents) {
    // Orders of one intent one after another: each completed one but the last was returned (its row RELEASED) first.
    const completed = creationRuns
      .filter((r) => r.state?.intentKey === intent.intentKey && outcomeOf(r) === SagaOutcome.COMPLETED)
      .sort((a, b) => Number(BigInt(a.state?.fencingToken ?? '0') - BigInt(b.state?.fencingToken ?? '0')));
    const live = completed.filter((r) => rowOf(r)?.status !== 'RELEASED');
    if (live.length > 1 || (live.length === 1 && live[0] !== completed.at(-1))) {
      twice.push(`intent ${intent.index}: ${completed.length} sagas completed, ${live.length} not returned (${completed.map((r) => `${r.workflowId} ${rowOf(r)?.status}`).join(', ')})`);
    }
  }
  const liveRows = new Map<string, number>();
  for (const row of orderRows) if (row.status !== 'RELEASED') liveRows.set(row.intent_key, (liveRows.get(row.intent_key) ?? 0) + 1);
  for (const [intentKey, n] of liveRows) if (n > 1) twice.push(`intent ${intentKey}: ${n} live rows`);

  // 3. Effects left without their saga completing or being compensated (and a completed saga's
  // effect missing or undone): charges, stock, rows, per saga; stock taken against completed orders.
  const left: string[] = [];
  const latestRuns = [...runs.values()].map((keyRuns) => keyRuns.at(-1)!).filter((run) => !returnIds.has(run.workflowId));
  const bodyOf = new Map(requests.map((r) => [r.workflowId, r.body]));
  for (const run of latestRuns) {
    const outcome = outcomeOf(run);
    const own = chargesOf(run.workflowId).filter((c) => c.status === 'succeeded');
    const liveCharges = own.filter((c) => !c.refunded).length;
    const reserved = reservations.filter((r) => r.saga_key === run.workflowId && r.status === 'RESERVED');
    const row = rowOf(run);
    const ownRow = row !== undefined;
    if (outcome === SagaOutcome.COMPLETED) {
      const items = bodyOf.get(run.workflowId)?.items ?? [];
      // Returned: its charge refunded by the return, its row RELEASED; its stock reservations stay, the stock given back.
      const returned = completedReturnsOf(run).length === 1;
      if (own.length !== 1 || liveCharges !== (returned ? 0 : 1)) left.push(`${run.workflowId} COMPLETED${returned ? ', returned' : ''}: ${own.length} charges, ${liveCharges} not refunded`);
      if (reserved.length !== items.length) left.push(`${run.workflowId} COMPLETED: ${reserved.length} of ${items.length} SKUs reserved`);
      if (row?.status !== (returned ? 'RELEASED' : 'COMPLETED')) left.push(`${run.workflowId} COMPLETED${returned ? ', returned' : ''}: its row is ${JSON.stringify(row)}`);
    } else if (outcome === SagaOutcome.COMPENSATED || outcome === SagaOutcome.EXPIRED || outcome === SagaOutcome.REJECTED) {
      if (liveCharges > 0) left.push(`${run.workflowId} ${outcome}: ${liveCharges} charges not refunded`);
      if (reserved.length > 0) left.push(`${run.workflowId} ${outcome}: ${reserved.length} SKUs still reserved`);
      if (ownRow && row.status !== 'COMPENSATED' && row.status !== 'FAILED') left.push(`${run.workflowId} ${outcome}: its row is ${row.status}`);
      if (outcome === SagaOutcome.REJECTED && (own.length > 0 || ownRow)) left.push(`${run.workflowId} REJECTED: it charged or wrote`);
    } else {
      left.push(`${run.workflowId} ended ${outcome}: its effects are an operator's`);
    }
  }
  for (const c of charges) if (!runs.has(c.reference)) left.push(`a charge of ${c.reference}, a saga that does not exist`);
  for (const ret of returns) {
    const run = runs.get(ret.workflowId)?.at(-1);
    if (!run || outcomeOf(run) === SagaOutcome.COMPLETED) continue;
    // A return that did not complete left the order as it was: not cancelled by it, not refunded by it.
    if (orderRows.some((r) => r.cancelled_by === ret.workflowId)) left.push(`${ret.workflowId} ${outcomeOf(run)}: the order is cancelled by it`);
    if (charges.some((c) => c.refunded && c.refund_key === `${ret.workflowId}:refundOrder`)) left.push(`${ret.workflowId} ${outcomeOf(run)}: it refunded the charge`);
  }
  for (const row of orderRows) {
    if (row.status !== 'REGISTERED' && row.status !== 'COMPLETED' && row.status !== 'RELEASED') continue;
    const owner = latestRuns.find((r) => r.state?.intentKey === row.intent_key && r.state.fencingToken === row.token);
    if (!owner || outcomeOf(owner) !== SagaOutcome.COMPLETED) left.push(`row of ${row.intent_key} is ${row.status}, its saga ${owner ? outcomeOf(owner) : 'unknown'}`);
    else if (row.status === 'RELEASED' && completedReturnsOf(owner).length !== 1) left.push(`row of ${row.intent_key} (${owner.workflowId}) is RELEASED, with no return completed`);
  }
  for (const sku of Object.values(SKUS)) {
    const taken = INITIAL_STOCK[sku]! - Number(stock.find((s) => s.sku === sku)?.available);
    const held = reservations.filter((r) => r.sku === sku && r.status === 'RESERVED').reduce((sum, r) => sum + Number(r.quantity), 0);
    const quantity = (runsOf: Run[]) =>
      runsOf
        .flatMap((r) => bodyOf.get(r.workflowId)?.items ?? [])
        .filter((i) => i.sku === sku)
        .reduce((sum, i) => sum + i.quantity, 0);
    const completed = latestRuns.filter((r) => outcomeOf(r) === SagaOutcome.COMPLETED);
    const ordered = quantity(completed);
    const kept = quantity(completed.filter((r) => rowOf(r)?.status !== 'RELEASED'));
    // A returned order gave its stock back (its reservations stay, as the order's history).
    if (taken !== kept || held !== ordered) left.push(`${sku}: ${taken} taken from stock, ${held} reserved, ${ordered} in completed orders, ${kept} of them not returned`);
  }

  // 4. SUCCESS answers whose saga ended REJECTED: apart when its pickup lease had ended (it ran past
  // PICKUP_LEASE_MS), when another saga's write outlived its lease (that saga registered the entity
  // with a token older than this one's: its lease had ended before this SUCCESS was answered), or
  // when Redis lost its data (the pickup lease with it) between its SUCCESS and its write: what
  // docs/http.md says still takes a SUCCESS back, with no second entity (PostgreSQL is the truth).
  const pickupLeaseMs = Math.max(DEFAULT_PICKUP_LEASE_MS, LEASE_MS);
  const rejectedApart: string[] = [];
  const rejectedOther: string[] = [];
  // A return's SUCCESS too: its lock on the order, taken back only as a creation's may be.
  const successRuns = new Set([...requests, ...returns].flatMap((r) => r.answers.filter((a) => a.status === 'SUCCESS' && a.runId).map((a) => `${r.workflowId}/${a.runId}`)));
  for (const run of allRuns) {
    if (outcomeOf(run) !== SagaOutcome.REJECTED || !successRuns.has(`${run.workflowId}/${run.runId}`)) continue;
    const state = run.state;
    const request = [...requests, ...returns].find((r) => r.workflowId === run.workflowId);
    // The token the SUCCESS answer gave (the saga's own state has none when its confirmation failed).
    const token = state?.fencingToken ?? request?.answers.find((a) => a.runId === run.runId && a.fencingToken !== undefined)?.fencingToken;
    const gateLeaseLost = state?.errors.some((e) => e.type === 'LEASE_EXPIRED') === true;
    // The saga whose entity this one found (in Redis, or at its write): an older token, whose lease
    // had ended before this one's SUCCESS, that registered its entity while this one waited or ran.
    const outlived = allRuns.find(
      (r) =>
        r !== run &&
        r.state?.intentKey === state?.intentKey &&
        r.state?.fencingToken !== undefined &&
        token !== undefined &&
        BigInt(r.state.fencingToken) < BigInt(token) &&
        (outcomeOf(r) === SagaOutcome.COMPLETED || r.state.stepsDone.length > 0 || r.state.errors.some((e) => e.at === 'RUNNING_STEPS')) &&
        (r.closeTime ?? Infinity) > run.startTime,
    );
    const described = `${run.workflowId} (run ${run.runId}) ended REJECTED ${state?.reason} at +${(run.closeTime ?? 0) - began} ms, started +${run.startTime - began} ms${wipedNear(run.startTime - began, (run.closeTime ?? 0) - began)}: errors ${JSON.stringify(state?.errors)}, token ${token}${outlived ? `; the entity is ${outlived.workflowId}'s (token ${outlived.state?.fencingToken}, ${outcomeOf(outlived)})` : ''}`;
    if (gateLeaseLost && state?.reason !== 'DUPLICATE' && (run.closeTime ?? 0) - run.startTime >= pickupLeaseMs) rejectedApart.push(`past the pickup lease: ${described}`);
    else if (state?.reason === 'DUPLICATE' && outlived) rejectedApart.push(`a write that outlived its lease: ${described}`);
    else if (wipedAt.some((w) => w >= run.startTime - began && w <= (run.closeTime ?? Infinity) - began)) rejectedApart.push(`Redis lost its data before its write: ${described}`);
    else rejectedOther.push(described);
  }

  // 5. Sagas stuck: runs not ended by the bound, or waiting for an operator; leases left held past LEASE_MS.
  const stuck: string[] = [];
  for (const run of allRuns) {
    if (run.status === 'RUNNING') stuck.push(`${run.workflowId} still running (${run.state?.phase ?? 'phase unknown'})`);
    else if (outcomeOf(run) === SagaOutcome.COMPENSATION_FAILED) stuck.push(`${run.workflowId} COMPENSATION_FAILED`);
  }
  const keyOfSession = new Map(requests.map((r) => [sagaSessionId(h.config.temporal.namespace, r.workflowId), r]));
  for (const lease of leases) {
    if (!lease.holder || lease.holder.remainingMs <= LEASE_MS) continue;
    const holder = keyOfSession.get(lease.holder.sessionId);
    const run = holder ? runs.get(holder.workflowId)?.at(-1) : undefined;
    stuck.push(`lease on ${lease.intent} (token ${lease.holder.fencingToken}) held for ${lease.holder.remainingMs} ms more by ${holder ? `${holder.key}, whose saga ended ${outcomeOf(run)} ${run?.state?.reason ?? ''}` : `session ${lease.holder.sessionId}`}`);
  }
  const leftToExpire = leases.filter((l) => l.holder && l.holder.remainingMs <= LEASE_MS).length;

  // The figures.
  const runAnswers = requests.flatMap((r) => r.answers.filter((a) => a.pass === 'run'));
  const retryAnswers = requests.flatMap((r) => r.answers.filter((a) => a.pass === 'retry'));
  const tally = (values: readonly (string | undefined)[]) =>
    Object.entries(values.reduce<Record<string, number>>((acc, v) => ({ ...acc, [v ?? '?']: (acc[v ?? '?'] ?? 0) + 1 }), {}))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
  const answerKind = (a: Answer) => (a.error ? 'error' : a.replayed ? `replayed ${a.outcome ?? 'running'}` : a.status);
  const succeeded = charges.filter((c) => c.status === 'succeeded');
  const completedKeys = new Set(latestRuns.filter((r) => outcomeOf(r) === SagaOutcome.COMPLETED).map((r) => r.workflowId));
  const toRefund = succeeded.filter((c) => !completedKeys.has(c.reference));
  console.log(
    [
      `fault run (seed ${seed}): ${REQUESTS} requests, ${requests.length} keys, ${INTENTS} intents, in ${(now() / 1000).toFixed(0)} s`,
      `faults: ${faults.kills} workers killed (${faults.killedMidWrite} writes on them, ${faults.skippedKills} kills skipped: one worker left), 1 paused ${PAUSE_MS} ms past its ${LEASE_MS} ms lease (${faults.pausedWrites} writes on it), Redis lost ${faults.wipes.join(' and ')} keys, provider killed ${faults.providerKills} times`,
      `answers during the run: ${tally(runAnswers.map(answerKind))}`,
      `retries: ${tally(retryAnswers.map(answerKind))}`,
      `sagas: ${allRuns.length} runs: ${tally(allRuns.map((r) => `${returnIds.has(r.workflowId) ? 'order-return ' : ''}${outcomeOf(r)}${r.state?.reason ? ` (${r.state.reason})` : ''}`))}`,
      `returns: ${returns.length} keys over ${new Set(returns.map((r) => r.order.entityId)).size} orders; answers during the run: ${tally(returns.flatMap((r) => r.answers.filter((a) => a.pass === 'run')).map((a) => (a.notFound ? 'ENTITY_NOT_FOUND' : answerKind(a))))}; retries: ${tally(returns.flatMap((r) => r.answers.filter((a) => a.pass === 'retry')).map((a) => (a.notFound ? 'ENTITY_NOT_FOUND' : answerKind(a))))}; orders returned (row RELEASED) ${orderRows.filter((r) => r.status === 'RELEASED').length}`,
      `provider: ${succeeded.length} charges, ${succeeded.filter((c) => c.refunded).length} refunded, ${charges.length - succeeded.length} declined; of the charges of sagas that did not complete, ${toRefund.filter((c) => c.refunded && c.refund_key === `${c.reference}:refundPayment`).length} of ${toRefund.length} refunded once, by their own saga`,
      `counts: answers differing ${differing.length + whileRunning.length} (${whileRunning.length} of them during the run, the key's saga still running); effects twice ${twice.length}; effects left ${left.length}; SUCCESS ended REJECTED ${rejectedOther.length} (apart: ${rejectedApart.length}); stuck ${stuck.length} (leases left to expire: ${leftToExpire})`,
      ...[...differing, ...twice, ...left, ...rejectedApart, ...rejectedOther, ...stuck, ...whileRunning].slice(0, 40).map((line) => `  ${line}`),
    ].join('\n'),
  );
  // The intents behind the counts, told in full: what each key was answered, how each run went.
  const flagged = new Set<Intent>();
  for (const line of [...differing, ...twice, ...left, ...rejectedOther, ...stuck, ...whileRunning]) {
    const key = /fault-[0-9a-f]+-\d+/.exec(line)?.[0];
    const request = requests.find((r) => r.key === key || r.workflowId === key);
    if (request) flagged.add(request.intent);
  }
  for (const intent of [...flagged].slice(0, 6)) console.log(await explain(intent));

  /** One intent's story: its keys' answers, its runs (with their histories), its row, ended sessions and Redis keys. */
  async function explain(intent: Intent): Promise<string> {
    const lines = [`intent ${intent.index} (${intent.kind}, ${intent.intentKey}); Redis lost its keys at +${wipedAt.join(', +')} ms`];
    const keys = requests.filter((r) => r.intent === intent);
    for (const request of keys) {
      const tagOf = sessionTag(sagaSessionId(h.config.temporal.namespace, request.workflowId));
      lines.push(`  key ${request.key} (session tag ${tagOf}, card ${request.body.payment.card.slice(-4)}, ${JSON.stringify(request.body.simulate ?? {})}):`);
      for (const a of request.answers) lines.push(`    ${a.pass} sent +${a.sentAt} answered +${a.at}: ${a.error ?? `${a.status}${a.replayed ? ' replayed' : ''} ${a.outcome ?? ''} run ${a.runId ?? '-'} token ${a.fencingToken ?? '-'}`}`);
      for (const run of runs.get(request.workflowId) ?? []) {
        const st = run.state;
        lines.push(`    run ${run.runId} +${run.startTime - began}..+${(run.closeTime ?? 0) - began} ${outcomeOf(run)} ${st?.reason ?? ''} token ${st?.fencingToken ?? '-'} steps [${st?.stepsDone.join(',')}] undone [${st?.compensationsRun.join(',')}] errors ${JSON.stringify(st?.errors)}`);
        try {
          const history = await h.client.temporal.workflow.getHandle(run.workflowId, run.runId, { followRuns: false }).fetchHistory();
          const t0 = run.startTime;
          for (const e of history.events ?? []) {
            const at = e.eventTime?.seconds ? Number(e.eventTime.seconds) * 1000 + Math.floor((e.eventTime.nanos ?? 0) / 1e6) - t0 : 0;
            const attrs = e.activityTaskScheduledEventAttributes?.activityType?.name ?? e.markerRecordedEventAttributes?.markerName ?? '';
            const attempt = e.activityTaskStartedEventAttributes ? ` attempt ${e.activityTaskStartedEventAttributes.attempt} by ${e.activityTaskStartedEventAttributes.identity}` : '';
            const by = e.workflowTaskStartedEventAttributes?.identity ? ` by ${e.workflowTaskStartedEventAttributes.identity}` : '';
            lines.push(`      +${at} ${(temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType)).replace('EVENT_TYPE_', '')} ${attrs}${attempt}${by}`);
          }
        } catch (err) {
          lines.push(`      (history unavailable: ${String(err)})`);
        }
      }
    }
    const { rows: row } = await h.pool.query('SELECT status, last_fencing_token::text AS token, session_id, updated_at FROM orders WHERE intent_key = $1', [intent.intentKey]);
    const { rows: ended } = await h.pool.query('SELECT session_tag, ended_at FROM ended_sessions WHERE intent_key = $1', [intent.intentKey]);
    lines.push(`  row ${JSON.stringify(row)}`, `  ended sessions (PostgreSQL) ${JSON.stringify(ended)}`, `  Redis now ${JSON.stringify(await h.rms.inspect(intent.intentKey))}`);
    return lines.join('\n');
  }

  // The mix held returns: orders released, their intents free again.
  expect(orderRows.filter((r) => r.status === 'RELEASED').length).toBeGreaterThan(0);
  expect([...differing, ...whileRunning]).toEqual([]);
  expect(twice).toEqual([]);
  expect(left).toEqual([]);
  expect(rejectedOther).toEqual([]);
  expect(stuck).toEqual([]);
});
