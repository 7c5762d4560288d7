/**
 * A model-based test of the reservation pattern, "a net for the next ones": fast-check drives the
 * real RMS (Lua scripts on the run's Redis, under this test's own key prefix) and the real fenced
 * `orders` table (the run's PostgreSQL) through the application's own code, for twelve sagas (sessions)
 * over two intents at once (six per intent: contention is the point): SagaClient's gate (`reserveIntent` in src/gate.ts), then the workflow's
 * activities (`reserveIntent` to confirm, `writeEntity`, `finalizeEntity`, `completeEntity`, and on
 * any failure `undoEntity`), run in the SDK's activity test environment. Nothing is faked: the code
 * gets the real Rms, table and pool, each wrapped so that every RMS or table call first waits until
 * `fc.scheduler` lets it go. The interleaving of in-flight calls is thus random and reproducible: a
 * read-repair's read of PostgreSQL and its write to Redis are two calls, and anything may come between
 * them. (A transaction that holds a row lock runs on to its COMMIT or ROLLBACK: parked, it would
 * only block the others.)
 *
 * The commands (fc.commands, run by fc.asyncModelRun):
 * - arrive: a saga's request comes in; from then on its workflow goes on by itself, as the real one
 *   does (gate → confirm → write → finalize → complete, or, for every other saga, the write that
 *   registers its row and promotes the reservation in one activity, as sagas since write-registers
 *   do, then complete; a write or finalize that fails, or a later
 *   step that fails, leads to undo = markCompensated, then free, then release; completing is only
 *   ever retried);
 * - step: the scheduler lets one parked call go;
 * - timeout: the workflow stops waiting for a running attempt (start-to-close timeout) and retries
 *   the activity or gives up on it; the attempt goes on as a zombie, a slow one: its calls wait for
 *   a late command;
 * - late: lets a zombie's waiting call go, however long after its saga moved on;
 * - crash: a zombie's worker dies (SIGKILL): the attempt never takes another step;
 * - expireLease: the intent's `processing` key goes, as at the end of a lease;
 * - loseRedis: the intent's keys (processing, entity_exists) go, as in a flush or a restart.
 * arrive, timeout, late and crash pick among what they can act on (`waiting[k]`, `busy[k]`, `zombie[k]`:
 * the k-th, modulo their number, in order), so few commands are wasted.
 * After the commands every attempt still in flight (but a crashed one) is let go, one call at a time;
 * then the run's keys and rows are deleted.
 *
 * The reference model follows every answer and checks, after every command and every call:
 * - oneEntity: at most one saga at a time has finalised the intent's entity and not undone it, and
 *   PostgreSQL's row is live (REGISTERED/COMPLETED) exactly under that token;
 * - noStaleWrite: a write or transition with a token below the row's is refused and changes nothing;
 *   the row's token never goes down; a row is committed only under its writer's lease; an extend,
 *   finalize or release of a lease that is not the caller's changes neither lease nor marker;
 * - risingTokens: every new reservation's token is above every token issued before for its intent,
 *   across Redis data loss; the holding session, reserving again, gets its own token back;
 * - noResurrection: `entity_exists` names only the token of a live row, or of a row whose own undo
 *   is between its markCompensated and its free, or whose read-repair is between its write and the
 *   re-read that takes a stale marker back: a marker freed by its saga never comes back through a
 *   late read-repair or a late finalize. (It found three: a tombstone lost with Redis's data between
 *   an undo and a late repair, so markEntityExists now reads the row again after writing; a late
 *   finalize of a saga undone while it still held its lease, which marked over the tombstone, so
 *   finalize.lua now answers FREED there; and a free that left an earlier saga's tombstone in place,
 *   so the same late finalize found nothing to stop it, so free.lua now replaces an older tombstone.)
 * Each property is a test of its own over the same generated runs, so one that breaks fails alone;
 * each run reads only what its property needs.
 *
 * Seeded and bounded. RMS_MODEL_SEED (default 20261122), RMS_MODEL_RUNS (default 40 runs per
 * property), RMS_MODEL_COMMANDS (default at most 250 commands per run), RMS_MODEL_TIME_LIMIT_MS (the
 * property stops there and passes with the runs done, unless one failed; default max(30 s, 400 ms per run)). A longer hunt:
 *   RMS_MODEL_RUNS=2000 RMS_MODEL_SEED=7 npx vitest run --project integration test/integration/rms-model.test.ts
 * On failure fast-check prints the seed, the path and the shrunk counterexample (the scheduler's
 * releases, the commands, then `replayPath`), and the violation with every call in the order it
 * really went (a zombie's calls go at their `late` command, not when the scheduler released them). Replay exactly that case with
 * RMS_MODEL_SEED=<seed> RMS_MODEL_PATH=<path> RMS_MODEL_REPLAY_PATH=<replayPath> and RMS_MODEL_RUNS
 * above the path's first number.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createSagaActivities } from '../../src/activities/saga';
import { reserveIntent } from '../../src/gate';
import { type FencedRow, type FencedTable, type Queryable } from '../../src/db';
import { Rms, createRedis, intentKey, intentKeys, type IntentInspection } from '../../src/rms';
import { defineSagaTypes } from '../../src/sagas';
import { testConfig } from '../helpers/context';
import { testPool } from '../helpers/db-fixtures';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { ordersTable, orderSaga } from '../fixtures/orders';

const SEED = envInt('RMS_MODEL_SEED', 20261122);
const RUNS = envInt('RMS_MODEL_RUNS', 40);
const MAX_COMMANDS = envInt('RMS_MODEL_COMMANDS', 250);
const PATH = process.env.RMS_MODEL_PATH || undefined;
const REPLAY_PATH = process.env.RMS_MODEL_REPLAY_PATH || undefined;
/**
 * After this long a test runs nothing more: it bounds shrinking once a run has failed (fast-check then
 * reports the smallest counterexample found so far). Far above what the runs themselves need.
 */
const TIME_LIMIT_MS = envInt('RMS_MODEL_TIME_LIMIT_MS', Math.max(30_000, RUNS * 400));

const INTENTS = 2;
const SAGAS_PER_INTENT = 6;
/** No arrival and no timeout while this many attempts (current and zombie) are in flight. */
const MAX_ATTEMPTS = 8;
/** Leases never end by the clock within a run: expiry is the expireLease command. */
const LEASE_MS = 60_000;
/** The write's heartbeat timer never fires within a run (the model has no clock). */
const timings = { leaseMs: LEASE_MS, heartbeatIntervalMs: 3_600_000, heartbeatTimeoutMs: 7_200_000, compensationAttempts: 1 };
const payload = {
  customer: 'model',
  items: [{ sku: 'widget', quantity: 1, priceCents: 100 }],
  payment: { card: '4242424242424242' },
};

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${raw}`);
  return value;
}

/** The properties, each checked by a test of its own. */
const PROPERTIES = {
  oneEntity: 'at most one live entity per intent, owned by the one saga that finalised it',
  noStaleWrite: 'no write or transition of a stale holder, and no change to a newer holder’s lease',
  risingTokens: 'strictly rising tokens per intent, across Redis data loss',
  noResurrection: 'no marker for an entity whose saga undid it and freed the intent',
} as const;
type Property = keyof typeof PROPERTIES;

/** A failed check: of one property, or of the harness itself (an unexpected error; every test reports those). */
class Violation extends Error {
  override readonly name = 'Violation';
  constructor(
    readonly property: Property | 'harness',
    message: string,
  ) {
    super(`${property}: ${message}`);
  }
}

type Stage = 'new' | 'gated' | 'reserved' | 'written' | 'registered' | 'compensating' | 'done';
/** `gate` is SagaClient's reservation before the workflow starts; the rest are the workflow's activities. */
type ActivityName = 'gate' | 'reserveIntent' | 'writeEntity' | 'finalizeEntity' | 'completeEntity' | 'undoEntity';
const NEXT_ACTIVITY: Record<Exclude<Stage, 'done'>, ActivityName> = {
  new: 'gate',
  gated: 'reserveIntent',
  reserved: 'writeEntity',
  written: 'finalizeEntity',
  registered: 'completeEntity',
  compensating: 'undoEntity',
};

/** One saga as its workflow sees it. */
interface Saga {
  index: number;
  sessionId: string;
  intent: number;
  stage: Stage;
  /** Whether one of the remaining steps (after finalize) fails, so the saga compensates. */
  stepFails: boolean;
  /** Whether its write registers the row and promotes the reservation itself (write-registers): no finalizeEntity. */
  registers: boolean;
  /** Attempts started per activity, for the attempt number a retry runs as. */
  attempts: Partial<Record<ActivityName, number>>;
  token?: string;
  /** The attempt the workflow waits for. */
  attempt?: Attempt;
  outcome?: string;
}

/** One activity attempt in flight (or the client's gate call): the current one, or a zombie given up on. */
interface Attempt {
  id: number;
  saga: Saga;
  activity: ActivityName;
  token?: string;
  state: 'running' | 'parked' | 'done';
  zombie: boolean;
  /** Set while a zombie's call waits for a `late` command: lets it go. */
  late?: () => void;
  /** The worker died: the attempt never goes on (at cleanup its waiting call fails, so it ends). */
  crashed?: boolean;
  /** A transaction of this attempt may hold row locks: its calls run on, unparked, until it ends. */
  inTx: boolean;
  /** What the open transaction's writeFenced answered. */
  txWrite?: string;
  /** The token the open transaction's markRegistered said OK for: registered once it commits. */
  txRegistered?: string;
  /** An undo whose markCompensated said OK and whose free has not run yet: the token it will free. */
  freeing?: string;
}

/** What the model knows of one intent; nothing here is reset by Redis data loss. */
interface IntentModel {
  key: string;
  /** The highest token reserve ever issued. */
  maxIssued: bigint;
  /** Tokens whose markRegistered said OK, less those whose markCompensated (or markFailed) said OK since. */
  registered: Set<string>;
  /** Undo attempts between markCompensated OK and their free, by token. */
  freeing: Map<string, number>;
  /** The row's token at the last look. */
  rowToken: bigint;
}

interface Model {
  sagas: Saga[];
  intents: IntentModel[];
  attempts: Attempt[];
}

/** What every run shares: the real clients. */
interface Env {
  redis: Redis | Cluster;
  rms: Rms;
  pool: pg.Pool;
  prefix: string;
}

const quietLogger = new DefaultLogger('ERROR', () => {});
const LIVE = new Set(['REGISTERED', 'COMPLETED']);

/**
 * One run: the sagas and their attempts, the real parts behind scheduling wrappers, and the model.
 * Checks record a {@link Violation}; the command that ran throws the first one of the property
 * under test (or of the harness).
 */
class World {
  readonly model: Model;
  private readonly flow = new AsyncLocalStorage<Attempt>();
  private readonly activities: ReturnType<typeof createSagaActivities>;
  private readonly rmsProxy: Rms;
  private readonly tableProxy: FencedTable;
  private readonly poolProxy: pg.Pool;
  private readonly violations: Violation[] = [];
  /** Every call in the order it went, for the violation's message. */
  private readonly trace: string[] = [];
  private nextAttempt = 1;
  private closing = false;

  constructor(
    private readonly s: fc.Scheduler,
    private readonly env: Env,
    private readonly property: Property,
  ) {
    const nonce = randomBytes(6).toString('hex');
    this.model = {
      sagas: Array.from({ length: INTENTS * SAGAS_PER_INTENT }, (_, index) => ({
        index,
        sessionId: `saga-${index}-${nonce}`,
        intent: index % INTENTS,
        stage: 'new',
        stepFails: false,
        registers: Math.floor(index / INTENTS) % 2 === 1,
        attempts: {},
      })),
      intents: Array.from({ length: INTENTS }, (_, i) => ({
        key: intentKey(orderSaga.scope, { model: nonce, intent: i }, TEST_INTENT_SECRET),
        maxIssued: 0n,
        registered: new Set<string>(),
        freeing: new Map<string, number>(),
        rowToken: 0n,
      })),
      attempts: [],
    };
    this.rmsProxy = this.wrapRms();
    this.tableProxy = this.wrapTable();
    this.poolProxy = this.wrapPool();
    this.activities = createSagaActivities({
      rms: this.rmsProxy,
      pool: this.poolProxy,
      timings,
      types: defineSagaTypes({ ...orderSaga, table: this.tableProxy }),
      intentSecret: TEST_INTENT_SECRET,
    });
  }

  // ---- the commands' effects ----

  /** The saga's request arrives: its workflow starts, and goes on by itself from then on. */
  async arrive(saga: Saga, stepFails: boolean): Promise<void> {
    saga.stepFails = stepFails;
    this.proceed(saga);
    await this.settle();
  }

  /** Lets one parked call go (the scheduler picks which). */
  async step(): Promise<void> {
    await this.s.waitNext(1);
    await this.settle();
  }

  /** A zombie's worker dies (SIGKILL): its waiting call never goes, and the attempt never ends. */
  async crash(pick: number): Promise<void> {
    const zombies = this.model.attempts.filter((a) => a.late !== undefined && !a.crashed);
    const dead = zombies[pick % zombies.length]!;
    dead.crashed = true;
    this.trace.push(`crash: ${describeAttempt(dead)}`);
    await this.settle();
  }

  /** Lets a zombie's waiting call go: the `pick`-th of them, modulo their number, oldest first. */
  async late(pick: number): Promise<void> {
    const zombies = this.model.attempts.filter((a) => a.late !== undefined && !a.crashed);
    zombies[pick % zombies.length]!.late!();
    await this.settle();
  }

  /**
   * The workflow stops waiting for the saga's attempt: it retries the activity or gives up on it.
   * The reservation (the client's call, the workflow's local activity) is retried, and so is
   * completing: once every step has succeeded the saga only goes forward.
   */
  async timeout(saga: Saga, retry: boolean): Promise<void> {
    const attempt = saga.attempt!;
    attempt.zombie = true;
    saga.attempt = undefined;
    this.trace.push(`timeout: ${describeAttempt(attempt)}, ${retry ? 'retried' : 'given up'}`);
    if (retry || ['gate', 'reserveIntent', 'completeEntity'].includes(attempt.activity)) {
      this.launch(saga, attempt.activity);
    } else {
      this.fail(saga, attempt.activity, 'TIMEOUT');
      this.proceed(saga);
    }
    await this.settle();
  }

  async expireLease(intent: number): Promise<void> {
    this.trace.push(`expireLease(intent${intent})`);
    await this.env.redis.del(intentKeys(this.env.prefix, this.model.intents[intent]!.key).processing);
    await this.settle();
  }

  async loseRedis(intent: number): Promise<void> {
    this.trace.push(`loseRedis(intent${intent})`);
    const keys = intentKeys(this.env.prefix, this.model.intents[intent]!.key);
    await this.env.redis.del(keys.processing, keys.entityExists);
    await this.settle();
  }

  /** Lets every attempt still in flight finish, one call at a time, checking after each. */
  async drain(): Promise<void> {
    for (;;) {
      if (this.s.count() > 0) await this.step();
      else if (this.model.attempts.some((a) => a.late !== undefined && !a.crashed)) await this.late(0);
      else return;
    }
  }

  /** Ends every attempt (a parked one fails at its next call), then removes the run's keys and rows. */
  async cleanup(): Promise<void> {
    this.closing = true;
    for (let i = 0; i < 10_000; i++) {
      const zombie = this.model.attempts.find((a) => a.late !== undefined);
      if (zombie) zombie.late!();
      else if (this.s.count() > 0) await this.s.waitNext(1);
      else break;
      await this.waitQuiet().catch(() => undefined);
    }
    const keys = this.model.intents.flatMap((i) => {
      const { processing, entityExists } = intentKeys(this.env.prefix, i.key);
      return [processing, entityExists];
    });
    await this.env.redis.del(...keys);
    await this.env.pool.query('DELETE FROM orders WHERE intent_key = ANY($1)', [this.model.intents.map((i) => i.key)]);
  }

  // ---- attempts ----

  /** What the workflow does next: the next activity of the saga's stage, unless it is over. */
  private proceed(saga: Saga): void {
    if (saga.stage === 'done' || saga.attempt !== undefined) return;
    if (saga.stage === 'registered' && saga.stepFails) {
      saga.stage = 'compensating';
    }
    this.launch(saga, NEXT_ACTIVITY[saga.stage]);
  }

  private launch(saga: Saga, activity: ActivityName): void {
    const attempt: Attempt = { id: this.nextAttempt++, saga, activity, token: saga.token, state: 'running', zombie: false, inTx: false };
    saga.attempt = attempt;
    this.model.attempts.push(attempt);
    const owner = { type: orderSaga.type, intentKey: this.intentOf(saga).key, sessionId: saga.sessionId, fencingToken: saga.token ?? '' };
    const number = (saga.attempts[activity] ?? 0) + 1;
    saga.attempts[activity] = number;
    const env = new MockActivityEnvironment({ attempt: number }, { logger: quietLogger });
    const acts = this.activities;
    const run = (): Promise<unknown> => {
      switch (activity) {
        case 'gate':
          return reserveIntent(
            { rms: this.rmsProxy, pool: this.poolProxy },
            { table: this.tableProxy, intentKey: owner.intentKey, sessionId: owner.sessionId, leaseMs: LEASE_MS },
          );
        case 'reserveIntent':
          return env.run(() => acts.reserveIntent({ type: owner.type, intentKey: owner.intentKey, sessionId: owner.sessionId, leaseMs: LEASE_MS }));
        case 'writeEntity':
          return env.run(() => acts.writeEntity({ ...owner, payload, timings, ...(saga.registers ? { register: true } : {}) }));
        case 'finalizeEntity':
          return env.run(() => acts.finalizeEntity(owner));
        case 'completeEntity':
          return env.run(() => acts.completeEntity(owner));
        case 'undoEntity':
          return env.run(() => acts.undoEntity({ ...owner, freeIntent: orderSaga.compensation.freeIntent }));
      }
    };
    void this.flow.run(attempt, run).then(
      (value) => this.finish(attempt, { value }),
      (error: unknown) => this.finish(attempt, { error }),
    );
  }

  private finish(attempt: Attempt, result: { value: unknown } | { error: unknown }): void {
    attempt.state = 'done';
    this.model.attempts.splice(this.model.attempts.indexOf(attempt), 1);
    if (attempt.freeing !== undefined) this.freed(attempt);
    if (this.closing) return;
    if ('error' in result && !(result.error instanceof ApplicationFailure)) {
      this.violate('harness', `${describeAttempt(attempt)} failed unexpectedly: ${String(result.error)}`);
      return;
    }
    const { saga } = attempt;
    if (attempt.zombie || saga.attempt !== attempt) return;
    saga.attempt = undefined;
    this.advance(saga, attempt, result);
    this.proceed(saga);
  }

  /** The workflow's reading of an attempt's result. */
  private advance(saga: Saga, attempt: Attempt, result: { value: unknown } | { error: unknown }): void {
    if ('error' in result) {
      const failure = result.error as ApplicationFailure;
      if (failure.type === 'INVALID_INPUT' || failure.type === 'UNKNOWN_SAGA_TYPE') {
        this.violate('harness', `${describeAttempt(attempt)} refused the model's input: ${failure.message}`);
      }
      this.fail(saga, attempt.activity, failure.type ?? 'FAILED');
      return;
    }
    const value = result.value as { status?: string; fencingToken?: string } | undefined;
    switch (attempt.activity) {
      case 'gate':
        // SagaClient starts the workflow, with the reservation, only on SUCCESS.
        if (value?.status === 'SUCCESS') {
          saga.stage = 'gated';
          saga.token = value.fencingToken;
        } else {
          this.end(saga, `REJECTED at the gate: ${value?.status}`);
        }
        return;
      case 'reserveIntent':
        // The workflow confirms the gate's reservation: the same token while the lease holds, else a new one.
        if (value?.status === 'SUCCESS') {
          saga.stage = 'reserved';
          saga.token = value.fencingToken;
        } else {
          this.end(saga, `REJECTED ${value?.status}`);
        }
        return;
      case 'writeEntity':
        if (value?.status === 'WRITTEN') saga.stage = saga.registers ? 'registered' : 'written';
        else this.end(saga, 'REJECTED DUPLICATE');
        return;
      case 'finalizeEntity':
        saga.stage = 'registered';
        return;
      case 'completeEntity':
        this.end(saga, 'COMPLETED');
        return;
      case 'undoEntity':
        this.end(saga, 'COMPENSATED');
    }
  }

  /** The workflow's answer to a failed (or timed-out) activity. */
  private fail(saga: Saga, activity: ActivityName, reason: string): void {
    if (activity === 'gate' || activity === 'reserveIntent') this.end(saga, `REJECTED ${reason}`);
    else if (activity === 'undoEntity') this.end(saga, `COMPENSATION_FAILED ${reason}`);
    // Past its steps the saga never compensates: a refusal to complete fails the workflow.
    else if (activity === 'completeEntity') this.end(saga, `FAILED ${reason}`);
    else saga.stage = 'compensating';
  }

  private end(saga: Saga, outcome: string): void {
    saga.stage = 'done';
    saga.outcome = outcome;
  }

  /** Waits until every attempt is parked at the scheduler or done, then runs the checks. */
  private async settle(): Promise<void> {
    await this.waitQuiet();
    await this.checkState();
    this.throwViolation();
  }

  private async waitQuiet(): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (this.model.attempts.some((a) => a.state === 'running')) {
      if (Date.now() > deadline) {
        const stuck = this.model.attempts.filter((a) => a.state === 'running').map(describeAttempt);
        throw new Violation('harness', `attempts never reached their next call: ${stuck.join(', ')}`);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Parks the calling attempt until the scheduler lets this call go. A zombie is a slow attempt: its
   * calls go only when a `late` command lets them (also one the scheduler let go after it turned
   * into a zombie), so it can act long after its saga moved on.
   */
  private async gate(call: string): Promise<Attempt> {
    const attempt = this.flow.getStore();
    if (!attempt) throw new Violation('harness', `${call} was called outside an attempt`);
    if (!attempt.inTx) {
      attempt.state = 'parked';
      if (!attempt.zombie) {
        await this.s.schedule(Promise.resolve(), `${describeAttempt(attempt)} ${call}`, undefined, async (go) => {
          attempt.state = 'running';
          await go();
        });
      }
      if (attempt.zombie && !this.closing) {
        attempt.state = 'parked';
        await new Promise<void>((resolve) => {
          attempt.late = () => {
            attempt.late = undefined;
            attempt.state = 'running';
            resolve();
          };
        });
      }
      if (this.closing) throw new Error('the run is over');
    }
    this.trace.push(`${describeAttempt(attempt)} ${call}`);
    return attempt;
  }

  // ---- the wrappers: real calls, each let go by the scheduler, each checked ----

  private wrapRms(): Rms {
    const rms = this.env.rms;
    type Lease = { intent: string; sessionId: string; fencingToken: string };
    const leaseCall =
      <R extends { status: string }>(name: 'extend' | 'finalize' | 'release', call: (input: Lease) => Promise<R>) =>
      async (input: Lease): Promise<R> => {
        await this.gate(`rms.${name}(${input.fencingToken})`);
        if (!this.checks('noStaleWrite')) return call(input);
        const before = await rms.inspect(input.intent);
        const result = await call(input);
        const after = await rms.inspect(input.intent);
        const held = before.holder?.sessionId === input.sessionId && before.holder.fencingToken === input.fencingToken;
        if (!held) {
          if (holderOf(after) !== holderOf(before)) {
            this.violate('noStaleWrite', `${name} by ${input.fencingToken}, not the holder, changed the lease ${holderOf(before)} → ${holderOf(after)}`);
          }
          if (markerOf(after) !== markerOf(before)) {
            this.violate('noStaleWrite', `${name} by ${input.fencingToken}, not the holder, changed the marker ${markerOf(before)} → ${markerOf(after)}`);
          }
          if (name === 'extend' && result.status !== 'LOST') this.violate('noStaleWrite', `extend by ${input.fencingToken}, not the holder, answered ${result.status}`);
        }
        return result;
      };
    const wrapped: Record<string, unknown> = {
      reserve: async (input: Parameters<Rms['reserve']>[0]) => {
        await this.gate('rms.reserve');
        if (!this.checks('risingTokens')) return rms.reserve(input);
        const before = await rms.inspect(input.intent);
        const result = await rms.reserve(input);
        if (result.status === 'SUCCESS') {
          const intent = this.intentByKey(input.intent);
          const token = BigInt(result.fencingToken);
          if (result.alreadyHeld) {
            if (before.holder?.fencingToken !== result.fencingToken) {
              this.violate('risingTokens', `a retry of ${input.sessionId} got ${result.fencingToken}, but the lease held ${holderOf(before)}`);
            }
          } else {
            if (token <= intent.maxIssued) {
              this.violate('risingTokens', `reserve issued ${token}, not above the earlier token ${intent.maxIssued}`);
            }
            if (intent.maxIssued < token) intent.maxIssued = token;
          }
        }
        return result;
      },
      extend: leaseCall('extend', (input) => rms.extend({ ...input, leaseMs: LEASE_MS })),
      finalize: leaseCall('finalize', (input) => rms.finalize(input)),
      release: leaseCall('release', (input) => rms.release(input)),
      free: async (input: Parameters<Rms['free']>[0]) => {
        const attempt = await this.gate(`rms.free(${input.fencingToken})`);
        try {
          return await rms.free(input);
        } finally {
          if (attempt.freeing === input.fencingToken) this.freed(attempt);
        }
      },
      markExists: async (input: Parameters<Rms['markExists']>[0]) => {
        const attempt = await this.gate(`rms.markExists(${input.fencingToken})`);
        // A read-repair writes the marker, then reads the row again and frees the marker if the row
        // was undone meanwhile (markEntityExists): until it has, its marker is in flight like an undo's.
        if (attempt.freeing === undefined) {
          const intent = this.intentByKey(input.intent);
          attempt.freeing = input.fencingToken;
          intent.freeing.set(input.fencingToken, (intent.freeing.get(input.fencingToken) ?? 0) + 1);
        }
        return rms.markExists(input);
      },
    };
    return proxyWith(rms, wrapped);
  }

  private wrapTable(): FencedTable {
    const table = ordersTable;
    const pool = this.env.pool;
    type Input = { intentKey: string; fencingToken: string | bigint };
    const transition =
      (name: 'markRegistered' | 'markCompleted' | 'markFailed' | 'markCompensated') =>
      async (q: Queryable, input: Input) => {
        const attempt = await this.gate(`${name}(${input.fencingToken})`);
        const stale = this.checks('noStaleWrite');
        const before = stale ? await table.find(pool, input.intentKey) : undefined;
        const result = await table[name](q, input);
        const after = stale ? await table.find(pool, input.intentKey) : undefined;
        const token = String(input.fencingToken);
        if (before && BigInt(token) < BigInt(before.lastFencingToken)) {
          if (result.status !== 'FENCED_OUT') this.violate('noStaleWrite', `${name} by ${token} on a row of ${before.lastFencingToken} answered ${result.status}`);
          if (rowOf(after) !== rowOf(before)) this.violate('noStaleWrite', `${name} by ${token} changed a row of ${before.lastFencingToken}: ${rowOf(before)} → ${rowOf(after)}`);
        }
        if (result.status === 'OK') {
          const intent = this.intentByKey(input.intentKey);
          // Inside the write's transaction (write-registers): registered only once it commits.
          if (name === 'markRegistered' && attempt.inTx) attempt.txRegistered = token;
          else if (name === 'markRegistered') intent.registered.add(token);
          if (name === 'markCompensated' || name === 'markFailed') intent.registered.delete(token);
          if (name === 'markCompensated' && attempt.activity === 'undoEntity' && attempt.freeing === undefined) {
            attempt.freeing = token;
            intent.freeing.set(token, (intent.freeing.get(token) ?? 0) + 1);
          }
        }
        return result;
      };
    const wrapped: Record<string, unknown> = {
      writeFenced: async (q: Queryable, input: Parameters<FencedTable['writeFenced']>[1]) => {
        const attempt = await this.gate(`writeFenced(${String(input.fencingToken)})`);
        const before = this.checks('noStaleWrite') ? await table.find(pool, input.intentKey) : undefined;
        const result = await table.writeFenced(q, input);
        // In a transaction, the write is committed (or not) later: see the COMMIT check in wrapPool.
        if (attempt.inTx) attempt.txWrite = result.status;
        const token = String(input.fencingToken);
        if (before && BigInt(token) < BigInt(before.lastFencingToken) && result.status !== 'FENCED_OUT') {
          this.violate('noStaleWrite', `writeFenced by ${token} on a row of ${before.lastFencingToken} answered ${result.status}`);
        }
        return result;
      },
      markRegistered: transition('markRegistered'),
      markCompleted: transition('markCompleted'),
      markFailed: transition('markFailed'),
      markCompensated: transition('markCompensated'),
      find: async (q: Queryable, key: string) => {
        await this.gate('find');
        return table.find(q, key);
      },
      findWithEnded: async (q: Queryable, key: string) => {
        await this.gate('findWithEnded');
        return table.findWithEnded(q, key);
      },
    };
    return proxyWith(table, wrapped);
  }

  /**
   * The pool the activities get. A transaction that has run a statement may hold row locks: from
   * then on its attempt runs without parking until COMMIT or ROLLBACK (or the client's release), so
   * that no other attempt is let go into a lock it holds. Its COMMIT is checked.
   */
  private wrapPool(): pg.Pool {
    const pool = this.env.pool;
    const connect = async () => {
      const client = await pool.connect();
      let open = false;
      const end = (attempt: Attempt | undefined, committed = false) => {
        open = false;
        if (attempt) {
          if (committed && attempt.txRegistered !== undefined) this.intentOf(attempt.saga).registered.add(attempt.txRegistered);
          attempt.inTx = false;
          attempt.txWrite = undefined;
          attempt.txRegistered = undefined;
        }
      };
      const query = async (...args: unknown[]) => {
        const attempt = this.flow.getStore();
        const first: unknown = args[0];
        const sql = typeof first === 'string' ? first : typeof first === 'object' && first !== null ? (first as { text?: unknown }).text : undefined;
        const text = typeof sql === 'string' ? sql.trim().toUpperCase() : '';
        if (attempt && text === 'COMMIT' && attempt.txWrite === 'WRITTEN' && this.checks('noStaleWrite')) {
          const lease = await this.env.rms.inspect(this.intentOf(attempt.saga).key);
          if (lease.holder?.sessionId !== attempt.saga.sessionId || lease.holder.fencingToken !== attempt.token) {
            this.violate('noStaleWrite', `${describeAttempt(attempt)} committed its row while the lease was ${holderOf(lease)}`);
          }
        }
        if (text === 'BEGIN') open = true;
        else if (open && attempt && text !== 'COMMIT' && text !== 'ROLLBACK') attempt.inTx = true;
        let answered = false;
        try {
          const result = await (client.query as (...a: unknown[]) => Promise<unknown>).apply(client, args);
          answered = true;
          return result;
        } finally {
          if (text === 'COMMIT' || text === 'ROLLBACK') end(attempt, answered && text === 'COMMIT');
        }
      };
      const release = (...args: unknown[]) => {
        if (open) end(this.flow.getStore());
        return (client.release as (...a: unknown[]) => unknown).apply(client, args);
      };
      return proxyWith(client, { query, release });
    };
    return proxyWith(pool, { connect });
  }

  // ---- checks ----

  private freed(attempt: Attempt): void {
    const token = attempt.freeing!;
    attempt.freeing = undefined;
    const intent = this.intentOf(attempt.saga);
    const left = (intent.freeing.get(token) ?? 1) - 1;
    if (left > 0) intent.freeing.set(token, left);
    else intent.freeing.delete(token);
  }

  /** The state checks, on what Redis and PostgreSQL hold now (read around the wrappers). */
  private async checkState(): Promise<void> {
    if (this.property === 'risingTokens') return;
    const { rms, pool } = this.env;
    const seen = await Promise.all(
      this.model.intents.map(async (intent) => {
        const [lease, row] = await Promise.all([this.property === 'noResurrection' ? rms.inspect(intent.key) : undefined, ordersTable.find(pool, intent.key)]);
        return { intent, lease, row };
      }),
    );
    for (const { intent, lease, row } of seen) {
      const live = row !== undefined && LIVE.has(row.status);

      if (this.property === 'oneEntity') {
        const believers = this.model.sagas.filter((s) => this.intentOf(s) === intent && (s.stage === 'registered' || s.outcome === 'COMPLETED'));
        if (believers.length > 1) {
          this.violate('oneEntity', `sagas ${believers.map((s) => s.index).join(', ')} each finalised an entity of one intent`);
        }
        const registered = [...intent.registered].sort();
        const expected = live ? [row.lastFencingToken] : [];
        if (registered.join() !== expected.join()) {
          this.violate('oneEntity', `registered and not undone: [${registered.join(', ')}], but the row is ${rowOf(row)}`);
        }
      }

      if (this.property === 'noStaleWrite' && row) {
        const token = BigInt(row.lastFencingToken);
        if (token < intent.rowToken) this.violate('noStaleWrite', `the row's token went down from ${intent.rowToken} to ${token}`);
        intent.rowToken = token;
      }

      if (lease?.exists && lease.existsToken !== undefined) {
        const marker = lease.existsToken;
        const ownRow = row?.lastFencingToken === marker;
        const undoing = (intent.freeing.get(marker) ?? 0) > 0;
        if (!(ownRow && (live || undoing))) {
          this.violate('noResurrection', `entity_exists names ${marker} while the row is ${rowOf(row)}${ownRow ? ' and its undo is over' : ''}`);
        }
      }
    }
  }

  /** Whether this run checks `property` (each test checks its own, and reads only what that needs). */
  private checks(property: Property): boolean {
    return this.property === property;
  }

  private violate(property: Property | 'harness', message: string): void {
    const calls = this.trace.length > 40 ? ['…', ...this.trace.slice(-40)] : this.trace;
    this.violations.push(new Violation(property, `${message}\nthe calls, in the order they went:\n  ${calls.join('\n  ')}`));
  }

  private throwViolation(): void {
    const found = this.violations.find((v) => v.property === 'harness' || v.property === this.property);
    if (found) throw found;
  }

  private intentOf(saga: Saga): IntentModel {
    return this.model.intents[saga.intent]!;
  }

  private intentByKey(key: string): IntentModel {
    const intent = this.model.intents.find((i) => i.key === key);
    if (!intent) throw new Violation('harness', `a call for an intent outside the model: ${key}`);
    return intent;
  }
}

/** `target` with some members replaced; every other method is the real one, bound to it. */
function proxyWith<T extends object>(target: T, members: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, prop) {
      if (typeof prop === 'string' && Object.hasOwn(members, prop)) return members[prop];
      const value: unknown = Reflect.get(t, prop, t);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
    },
  });
}

function describeAttempt(a: Attempt): string {
  return `saga${a.saga.index}#${a.id}${a.zombie ? '(zombie)' : ''} ${a.activity}`;
}

function holderOf(i: IntentInspection): string {
  return i.holder ? `${i.holder.sessionId}:${i.holder.fencingToken}` : 'none';
}

function markerOf(i: IntentInspection): string {
  return i.exists ? `${i.existsSessionTag ?? ''}:${i.existsToken}` : 'none';
}

function rowOf(row: FencedRow | undefined): string {
  return row ? `${row.status} ${row.lastFencingToken}` : 'absent';
}

// ---- the commands ----

type Cmd = fc.AsyncCommand<Model, World>;

/** The sagas a command may act on, in index order; a command picks `pick` modulo their number. */
function eligible(m: Model, ok: (saga: Saga) => boolean): Saga[] {
  return m.sagas.filter(ok);
}
const waiting = (saga: Saga) => saga.stage === 'new' && saga.attempt === undefined;
const busy = (saga: Saga) => saga.attempt !== undefined;

class ArriveCommand implements Cmd {
  constructor(
    readonly pick: number,
    readonly stepFails: boolean,
  ) {}
  check(m: Model): boolean {
    return eligible(m, waiting).length > 0 && m.attempts.length < MAX_ATTEMPTS;
  }
  async run(m: Model, w: World): Promise<void> {
    const sagas = eligible(m, waiting);
    await w.arrive(sagas[this.pick % sagas.length]!, this.stepFails);
  }
  toString(): string {
    return `arrive(waiting[${this.pick}]${this.stepFails ? ', a later step fails' : ''})`;
  }
}

class StepCommand implements Cmd {
  check(m: Model): boolean {
    // Parked at the scheduler: a zombie waiting for `late` is not.
    return m.attempts.some((a) => a.state === 'parked' && a.late === undefined);
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.step();
  }
  toString(): string {
    return 'step';
  }
}

class LateCommand implements Cmd {
  constructor(readonly pick: number) {}
  check(m: Model): boolean {
    return m.attempts.some((a) => a.late !== undefined && !a.crashed);
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.late(this.pick);
  }
  toString(): string {
    return `late(zombie[${this.pick}])`;
  }
}

class CrashCommand implements Cmd {
  constructor(readonly pick: number) {}
  check(m: Model): boolean {
    return m.attempts.some((a) => a.late !== undefined && !a.crashed);
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.crash(this.pick);
  }
  toString(): string {
    return `crash(zombie[${this.pick}])`;
  }
}

class TimeoutCommand implements Cmd {
  constructor(
    readonly pick: number,
    readonly retry: boolean,
  ) {}
  check(m: Model): boolean {
    return eligible(m, busy).length > 0 && m.attempts.length < MAX_ATTEMPTS;
  }
  async run(m: Model, w: World): Promise<void> {
    const sagas = eligible(m, busy);
    await w.timeout(sagas[this.pick % sagas.length]!, this.retry);
  }
  toString(): string {
    return `timeout(busy[${this.pick}], ${this.retry ? 'retry' : 'give up'})`;
  }
}

class ExpireLeaseCommand implements Cmd {
  constructor(readonly intent: number) {}
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.expireLease(this.intent);
  }
  toString(): string {
    return `expireLease(intent${this.intent})`;
  }
}

class LoseRedisCommand implements Cmd {
  constructor(readonly intent: number) {}
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.loseRedis(this.intent);
  }
  toString(): string {
    return `loseRedis(intent${this.intent})`;
  }
}

const sagaPick = fc.nat({ max: INTENTS * SAGAS_PER_INTENT - 1 });
const intentIndex = fc.nat({ max: INTENTS - 1 });
const commands = fc.commands(
  [
    fc.oneof(
      { weight: 12, arbitrary: fc.constant(new StepCommand()) },
      { weight: 2, arbitrary: fc.tuple(sagaPick, fc.boolean()).map(([s, f]) => new ArriveCommand(s, f)) },
      // Often: a timed-out attempt that goes on as a zombie is where late writes come from.
      { weight: 5, arbitrary: fc.tuple(sagaPick, fc.boolean()).map(([s, r]) => new TimeoutCommand(s, r)) },
      { weight: 3, arbitrary: fc.nat({ max: MAX_ATTEMPTS - 1 }).map((k) => new LateCommand(k)) },
      { weight: 1, arbitrary: fc.nat({ max: MAX_ATTEMPTS - 1 }).map((k) => new CrashCommand(k)) },
      { weight: 1, arbitrary: intentIndex.map((i) => new ExpireLeaseCommand(i)) },
      { weight: 1, arbitrary: intentIndex.map((i) => new LoseRedisCommand(i)) },
    ),
  ],
  { maxCommands: MAX_COMMANDS, size: 'max', ...(REPLAY_PATH ? { replayPath: REPLAY_PATH } : {}) },
);

// ---- the tests ----

let redis: Redis | Cluster;
let pool: pg.Pool;
beforeAll(() => {
  // A generous deadline: a saturated test machine must not turn a slow reply into a failed run.
  redis = createRedis(testConfig('rms model', { REDIS_COMMAND_TIMEOUT_MS: '15000' }).redis);
  // Every saga's attempt and every zombie may hold a connection at once (a transaction begun, parked).
  pool = testPool(4 + INTENTS * SAGAS_PER_INTENT + MAX_ATTEMPTS);
});
afterAll(async () => {
  redis?.disconnect();
  await pool?.end();
});

describe('the reservation pattern under random interleavings of sagas, lease expiry and Redis data loss', () => {
  for (const property of Object.keys(PROPERTIES) as Property[]) {
    it(
      `keeps ${PROPERTIES[property]}`,
      async ({ task }) => {
        const prefix = testConfig(task.fullName).redis.keyPrefix;
        const env: Env = { redis, rms: new Rms(redis, { keyPrefix: prefix }), pool, prefix };
        await fc.assert(
          fc.asyncProperty(fc.scheduler(), commands, async (s, cmds) => {
            const world = new World(s, env, property);
            try {
              await fc.asyncModelRun(() => ({ model: world.model, real: world }), cmds);
              await world.drain();
            } finally {
              await world.cleanup();
            }
          }),
          { seed: SEED, numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, ...(PATH ? { path: PATH } : {}) },
        );
      },
      TIME_LIMIT_MS + 60_000,
    );
  }
});
