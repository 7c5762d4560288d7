/**
 * Declaring saga types (defineSaga, defineOperation) and finding an app's declarations (the module
 * the CLI and `npm run worker` load): every mistake is refused where it is made, with a message that
 * says what to fix.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config';
import {
  defineOperation,
  defineSaga,
  encodeEntityId,
  fencedTable,
  prepareSaga,
  recordedInputRefusal,
  SagaDeclarationError,
  SagaInputError,
  sagaKeyOfStepKey,
  sagaTypesOf,
  stepIdempotencyKey,
  StepRejectedError,
  type OperationDeclaration,
  type SagaDeclaration,
} from '../../src/sagas';
import { loadSagaModule, locateSagaModule, SagaModuleError } from '../../src/sagas/load';
import { DEFAULT_COMPENSATION_RETRY, retryOptionsOf } from '../../src/shared';

/** A handler that does nothing. */
const noop = async (): Promise<null> => null;

const declaration = (overrides: Partial<SagaDeclaration<{ room: string }>> = {}): SagaDeclaration<{ room: string }> => ({
  type: 'booking',
  scope: 'booking',
  schema: z.object({ room: z.string() }),
  intent: (input) => ({ room: input.room }),
  table: fencedTable('bookings', ['room']),
  row: (input) => ({ room: input.room }),
  steps: [{ step: 'hold', compensation: 'release' }],
  handlers: { hold: noop, release: noop },
  ...overrides,
});

describe('defineSaga', () => {
  it('fills the compensation policy a type leaves out (reverse order, all of them, intent freed, a day in NEEDS_ATTENTION)', () => {
    const def = defineSaga(declaration({ compensation: { parallel: true } }));
    expect(def.kind).toBe('creation');
    expect(def.compensation).toEqual({ parallel: true, continueOnError: true, freeIntent: true, attentionMs: 24 * 60 * 60 * 1000 });
    expect(defineSaga(declaration({ compensation: { attentionMs: 0 } })).compensation.attentionMs).toBe(0);
  });

  it.each([
    [{ steps: [{ step: 'hold', compensation: 'release' }], handlers: { hold: noop } }, 'saga type "booking": no handler for "release"'],
    [
      { steps: [{ step: 'hold', retry: { maximumAttempts: 3 } }], handlers: { hold: noop } },
      'saga type "booking": step "hold": retry bounds a step without a compensation (nothing could undo it, so it is retried until it succeeds or is refused); give it intervals only, or a compensation',
    ],
    [{ handlers: { hold: noop, release: noop, spare: noop } }, 'saga type "booking": handler "spare" not named by any step'],
    [{ steps: [{ step: 'hold', compensation: 'release', undoRefused: 'no' as never }] }, 'saga type "booking": step "hold": undoRefused must be true or false'],
    [{ steps: [{ step: 'hold', undoRefused: false }], handlers: { hold: noop } }, 'saga type "booking": step "hold": undoRefused without a compensation'],
    [{ steps: [{ step: 'hold', compensation: 'hold' }] }, 'saga type "booking": step name "hold" is used twice'],
    [{ type: 'Booking' }, 'saga type "Booking": the type must be lower-case letters, digits and -, starting with a letter (at most 63)'],
    [{ table: { table: 'bookings' } as never }, 'saga type "booking": table must be a FencedTable (fencedTable(name, dataColumns))'],
    [{ compensation: { attentionMs: -1 } }, 'saga type "booking": compensation.attentionMs must be a whole number of ms from 0 to 2592000000 (30 days)'],
    [{ compensation: { attentionMs: 31 * 24 * 60 * 60 * 1000 } }, 'saga type "booking": compensation.attentionMs must be a whole number of ms'],
  ])('refuses a malformed declaration where it is written (%#)', (overrides, message) => {
    expect(() => defineSaga(declaration(overrides as Partial<SagaDeclaration<{ room: string }>>))).toThrow(SagaDeclarationError);
    expect(() => defineSaga(declaration(overrides as Partial<SagaDeclaration<{ room: string }>>))).toThrow(message);
  });
});

describe('fencedTable\'s legacy rows', () => {
  it('are none unless named: a new table takes neither ownerless rows nor bare row ids', () => {
    expect(fencedTable('bookings', ['room']).legacy).toEqual({ ownerlessRows: false, numericIds: false });
    expect(fencedTable('bookings', ['room'], { legacy: { numericIds: true } }).legacy).toEqual({ ownerlessRows: false, numericIds: true });
  });

  it.each([
    [{ ownerless: true }, 'legacy: unknown field "ownerless" (it has ownerlessRows and numericIds)'],
    [{ ownerlessRows: 'yes' }, 'legacy.ownerlessRows: must be a boolean'],
    [true, 'legacy: must be an object { ownerlessRows?, numericIds? }'],
  ])('refuses a malformed one where it is declared (%#)', (legacy, message) => {
    expect(() => fencedTable('bookings', ['room'], { legacy: legacy as never })).toThrow(message);
  });
});

/** An operation on a booking (`booking-cancel`), its fields overridden by `overrides`. */
const operationDeclaration = (overrides: Partial<OperationDeclaration<{ booking: string }>> = {}): OperationDeclaration<{ booking: string }> => ({
  type: 'booking-cancel',
  scope: 'booking',
  schema: z.object({ booking: z.string() }),
  entity: (input) => input.booking,
  table: fencedTable('bookings', ['room']),
  steps: [{ step: 'cancel' }],
  handlers: { cancel: noop },
  ...overrides,
});

describe('a saga type\'s limits', () => {
  const secret = new Uint8Array(32).fill(7);
  const timings = { leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, compensationAttempts: 5 };
  const prepare = (def: ReturnType<typeof defineSaga<{ room: string }>>, room: string, owner?: string) =>
    prepareSaga(def.type, { room }, { types: sagaTypesOf([def]), timings, intentSecret: secret, ...(owner === undefined ? {} : { owner }) });

  it.each([
    [{ limits: {} }, 'saga type "booking": limits[0] limits nothing: give inFlight, perSecond or both'],
    [{ limits: [] }, 'saga type "booking": limits must be 1 to 8 limits'],
    [{ limits: { inFlight: 0 } }, 'saga type "booking": limits[0].inFlight must be a whole number from 1 to 1000000'],
    [{ limits: [{ inFlight: 2 }, { perSecond: 1.5 }] }, 'saga type "booking": limits[1].perSecond must be a whole number from 1 to 10000'],
    [{ limits: { inFlight: 1, per: 'customer' } }, 'saga type "booking": limits[0].per must be a function of the input giving the scope value (e.g. its customer)'],
    [{ limits: { inFlight: 1, burst: 3 } }, 'saga type "booking": limits[0]: unknown field "burst" (a limit has inFlight, perSecond and per)'],
    [{ limits: 5 }, 'saga type "booking": limits must be a limit { inFlight?, perSecond?, per? } or a list of them'],
  ])('refuses a malformed limit where it is declared (%#)', (overrides, message) => {
    expect(() => defineSaga(declaration(overrides as Partial<SagaDeclaration<{ room: string }>>))).toThrow(SagaDeclarationError);
    expect(() => defineSaga(declaration(overrides as Partial<SagaDeclaration<{ room: string }>>))).toThrow(message);
  });

  it('gives a start with an owner one counter per limit on its caller\'s tag, a scope value only as its keyed digest', () => {
    const def = defineSaga(declaration({ deadlineMs: 60_000, limits: [{ inFlight: 3 }, { per: (input) => input.room, perSecond: 2 }] }));
    const a = prepare(def, 'room-101', 'app-a');
    const b = prepare(def, 'room-102', 'app-a');

    expect(a.limits).toMatchObject({ counters: ['0', expect.stringMatching(/^1:[A-Za-z0-9_-]{22}$/)], holdMs: 60_000 + 5 * 60_000 });
    expect(b.limits?.tag).toBe(a.limits?.tag);
    expect(b.limits?.counters[1]).not.toBe(a.limits?.counters[1]);
    expect(JSON.stringify(a.limits)).not.toContain('room-101');
    expect(prepare(def, 'room-101', 'app-b').limits?.tag).not.toBe(a.limits?.tag);
    // A start without an owner (a plain Temporal client's) passed no gate and counts nowhere.
    expect(prepare(def, 'room-101').limits).toBeUndefined();
  });

  it('refuses a start whose scope value is no string of 1 to 1024 characters, before any side effect', () => {
    const def = defineSaga(declaration({ limits: { per: (input) => (input.room === 'none' ? '' : input.room), inFlight: 1 } }));
    expect(() => prepare(def, 'none', 'app')).toThrow(SagaInputError);
    expect(() => prepare(def, 'none', 'app')).toThrow('the scope value of limits[0] must be a string of 1 to 1024 characters');
    expect(prepare(def, 'r', 'app').limits?.holdMs).toBe(60 * 60 * 1000);
  });
});

describe('defineOperation', () => {
  it('accepts steps without a compensation (retried until they succeed or are refused)', () => {
    const def = defineOperation(
      operationDeclaration({ steps: [{ step: 'cancel', compensation: 'reinstate' }, { step: 'refund' }], handlers: { cancel: noop, reinstate: noop, refund: noop } }),
    );
    expect(def.kind).toBe('operation');
  });

  it('waits a day in NEEDS_ATTENTION when a compensation cannot finish, unless it says otherwise', () => {
    const declare = (compensation?: { attentionMs: number }) => defineOperation(operationDeclaration(compensation ? { compensation } : {}));
    expect(declare().compensation.attentionMs).toBe(24 * 60 * 60 * 1000);
    expect(declare({ attentionMs: 0 }).compensation.attentionMs).toBe(0);
    expect(() => declare({ attentionMs: 1.5 })).toThrow(SagaDeclarationError);
  });

  it('records in the plan that an operation releases its entity, and only when it says so', () => {
    const secret = new Uint8Array(32).fill(3);
    const timings = { leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, compensationAttempts: 5 };
    const booking = encodeEntityId(secret, 'bookings', '42');
    const planOf = (overrides: Partial<OperationDeclaration<{ booking: string }>>) =>
      prepareSaga('booking-cancel', { booking }, { types: sagaTypesOf([defineOperation(operationDeclaration(overrides))]), timings, intentSecret: secret }).operation;

    expect(planOf({ releases: true })).toEqual({ entityId: '42', publicId: booking, releases: true });
    expect(planOf({})).toEqual({ entityId: '42', publicId: booking });
    expect(planOf({ releases: false })).toEqual({ entityId: '42', publicId: booking });
    expect(() => defineOperation(operationDeclaration({ releases: 'yes' as never }))).toThrow('saga type "booking-cancel": releases must be true or false');
  });
});

describe('a step\'s retry policies', () => {
  it.each([
    [{ retry: { maximumAttempts: 0 } }, 'saga type "booking": step "hold": retry.maximumAttempts must be a whole number from 1 to 1000'],
    [{ retry: { totalMs: 1.5 } }, 'saga type "booking": step "hold": retry.totalMs must be a whole number of ms from 1 to 2592000000'],
    [{ compensationRetry: { backoffCoefficient: 0.5 } }, 'saga type "booking": step "hold": compensationRetry.backoffCoefficient must be a number from 1 to 100'],
    [{ compensationRetry: { initialIntervalMs: 1000, maximumIntervalMs: 500 } }, 'saga type "booking": step "hold": compensationRetry.maximumIntervalMs must be at least initialIntervalMs (1000)'],
    [{ compensationRetry: { maxAttempts: 3 } }, 'saga type "booking": step "hold": compensationRetry: unknown field "maxAttempts" (a retry policy has maximumAttempts, totalMs, initialIntervalMs, backoffCoefficient, maximumIntervalMs, nonRetryableErrorTypes)'],
    [{ retry: { nonRetryableErrorTypes: 'TypeError' } }, 'saga type "booking": step "hold": retry.nonRetryableErrorTypes must be a list of failure type names'],
    [{ retry: 3 }, 'saga type "booking": step "hold": retry must be an object'],
  ])('refuses a malformed one where it is declared (%#)', (fields, message) => {
    const steps = [{ step: 'hold', compensation: 'release', ...fields }] as SagaDeclaration<{ room: string }>['steps'];
    expect(() => defineSaga(declaration({ steps }))).toThrow(SagaDeclarationError);
    expect(() => defineSaga(declaration({ steps }))).toThrow(message);
  });

  it('refuses a bound on a step nothing could undo, and a compensation policy with no compensation', () => {
    const operation = (steps: unknown) => () => defineOperation(operationDeclaration({ steps: steps as [], handlers: { refund: noop } }));
    expect(operation([{ step: 'refund', retry: { maximumAttempts: 3 } }])).toThrow('saga type "booking-cancel": step "refund": retry bounds a step without a compensation');
    expect(operation([{ step: 'refund', retry: { totalMs: 60_000 } }])).toThrow(SagaDeclarationError);
    expect(operation([{ step: 'refund', compensationRetry: { maximumAttempts: 3 } }])).toThrow('saga type "booking-cancel": step "refund": compensationRetry without a compensation');
    // Intervals only: still retried until it succeeds or is refused, only paced.
    expect(operation([{ step: 'refund', retry: { initialIntervalMs: 1000, maximumIntervalMs: 60_000 } }])).not.toThrow();
  });

  it('are recorded in each plan as declared, and map to Temporal\'s retry options', () => {
    const compensationRetry = { totalMs: 300_000, initialIntervalMs: 1000, backoffCoefficient: 3, maximumIntervalMs: 30_000, nonRetryableErrorTypes: ['COMPENSATION_REFUSED'] };
    const def = defineSaga(declaration({ steps: [{ step: 'hold', compensation: 'release', retry: { maximumAttempts: 3 }, compensationRetry }] }));
    const timings = { leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, compensationAttempts: 5 };
    const plan = prepareSaga('booking', { room: '101' }, { types: sagaTypesOf([def]), timings, intentSecret: new Uint8Array(32).fill(1) });
    expect(plan.steps).toEqual([{ step: 'hold', compensation: 'release', retry: { maximumAttempts: 3 }, compensationRetry }]);
    expect(retryOptionsOf(compensationRetry)).toEqual({
      retry: { initialInterval: 1000, backoffCoefficient: 3, maximumInterval: 30_000, nonRetryableErrorTypes: ['COMPENSATION_REFUSED'] },
      scheduleToCloseTimeout: 300_000,
    });
    expect(retryOptionsOf({ maximumAttempts: 3 })).toEqual({ retry: { maximumAttempts: 3, initialInterval: 200, backoffCoefficient: 2 } });
  });

  it('let a creation declare a step without a compensation (a notice): planned without a compensation policy, paced but not bounded', () => {
    const steps = [{ step: 'hold', compensation: 'release' }, { step: 'notify', retry: { maximumIntervalMs: 1000 } }];
    const def = defineSaga(declaration({ steps, handlers: { hold: noop, release: noop, notify: noop } }));
    const timings = { leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, compensationAttempts: 5 };
    const plan = prepareSaga('booking', { room: '101' }, { types: sagaTypesOf([def]), timings, intentSecret: new Uint8Array(32).fill(1) });
    expect(plan.steps).toEqual([
      { step: 'hold', compensation: 'release', compensationRetry: DEFAULT_COMPENSATION_RETRY },
      { step: 'notify', retry: { maximumIntervalMs: 1000 } },
    ]);
  });

  it('record the default compensation policy in each plan for a compensation whose type declares none, a copy the plan owns', () => {
    const steps = [{ step: 'hold', compensation: 'release' }, { step: 'notify', compensation: 'retract', retry: { maximumAttempts: 3 } }];
    const def = defineSaga(declaration({ steps, handlers: { hold: noop, release: noop, notify: noop, retract: noop } }));
    const timings = { leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, compensationAttempts: 5 };
    const plan = prepareSaga('booking', { room: '101' }, { types: sagaTypesOf([def]), timings, intentSecret: new Uint8Array(32).fill(1) });
    expect(plan.steps).toEqual([
      { step: 'hold', compensation: 'release', compensationRetry: DEFAULT_COMPENSATION_RETRY },
      { step: 'notify', compensation: 'retract', retry: { maximumAttempts: 3 }, compensationRetry: DEFAULT_COMPENSATION_RETRY },
    ]);
    expect(plan.steps[0]!.compensationRetry).not.toBe(DEFAULT_COMPENSATION_RETRY);
    // Ten minutes, 200 ms doubling up to 30 s apart: an outage of minutes passes without an operator.
    expect(retryOptionsOf(DEFAULT_COMPENSATION_RETRY)).toEqual({ retry: { initialInterval: 200, backoffCoefficient: 2, maximumInterval: 30_000 }, scheduleToCloseTimeout: 600_000 });
  });
});

describe('sagaTypesOf', () => {
  it('names the types of a list and refuses one declared twice', () => {
    expect(Object.keys(sagaTypesOf([defineSaga(declaration())]))).toEqual(['booking']);
    expect(() => sagaTypesOf([defineSaga(declaration()), defineSaga(declaration())])).toThrow('saga type "booking": declared twice');
  });
});

describe('a step\'s idempotency key', () => {
  it('gives back the saga key it was made of, a saga key holding `:` too; a key no step has gives none', () => {
    expect(sagaKeyOfStepKey(stepIdempotencyKey('order-a:b', 'chargePayment'))).toBe('order-a:b');
    expect(sagaKeyOfStepKey('order-a:b')).toBe('order-a');
    expect(sagaKeyOfStepKey('no-step-here')).toBeUndefined();
    expect(sagaKeyOfStepKey('order-a:not a step')).toBeUndefined();
    expect(sagaKeyOfStepKey(':chargePayment')).toBeUndefined();
  });
});

describe('a running saga\'s recorded input under a changed schema', () => {
  it('is accepted while the schema accepts it, and otherwise refused at the field, naming an unknown field but never a value', () => {
    const typeWith = (schema: z.ZodType<{ room: string }>) => sagaTypesOf([defineSaga({ ...declaration(), schema })]).booking!;
    const v1 = typeWith(z.object({ room: z.string(), note: z.string() }).strict());
    const timings = { leaseMs: 30_000, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, compensationAttempts: 5 };
    const recorded = prepareSaga('booking', { room: '12', note: 'Ms Jane Doe' }, { timings, types: { booking: v1 }, intentSecret: new Uint8Array(32) }).payload;

    expect(recordedInputRefusal(typeWith(z.object({ room: z.string(), note: z.string().optional() }).strict()), recorded)).toBeUndefined();
    expect(recordedInputRefusal(typeWith(z.object({ room: z.string() }).strict()), recorded)).toBe('at (root): unknown field "note"');
    expect(recordedInputRefusal(typeWith(z.object({ room: z.string(), note: z.number() })), recorded)).toBe('at note: invalid_type');
  });
});

describe('StepRejectedError', () => {
  it('is recognised across two copies of the package (an app may load its own)', () => {
    const fromAnotherCopy = Object.assign(new Error('declined'), { reason: 'DECLINED', [Symbol.for('reservation-saga/StepRejectedError')]: true });
    expect(fromAnotherCopy).toBeInstanceOf(StepRejectedError);
    expect(new Error('other')).not.toBeInstanceOf(StepRejectedError);
  });
});

describe('the app\'s saga types module', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'rs-sagas-module-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const config = loadConfig({});
  const app = (name: string, packageJson: object | undefined, files: Record<string, string> = {}) => {
    const dir = path.join(root, name);
    mkdirSync(path.join(dir, 'src'), { recursive: true });
    if (packageJson) writeFileSync(path.join(dir, 'package.json'), JSON.stringify(packageJson));
    for (const [file, text] of Object.entries(files)) writeFileSync(path.join(dir, file), text);
    return dir;
  };
  // Plain CommonJS, as a compiled app module is (the declarations' own checks are tested above).
  const sagasModule = "exports.sagas = (config) => [{ kind: 'creation', type: config.simulations ? 'booking-sim' : 'booking' }];";

  it('is found from --sagas, else SAGA_TYPES_MODULE, else the nearest package.json\'s "reservation-saga".sagas', () => {
    const dir = app('named', { name: 'named', 'reservation-saga': { sagas: './src/sagas.js' } });
    const nested = path.join(dir, 'src');
    expect(locateSagaModule({ cwd: nested, env: {} })).toEqual({ path: path.join(dir, 'src/sagas.js'), namedBy: path.join(dir, 'package.json') });
    expect(locateSagaModule({ cwd: dir, env: { SAGA_TYPES_MODULE: 'other.js' } })).toEqual({ path: path.join(dir, 'other.js'), namedBy: 'SAGA_TYPES_MODULE' });
    expect(locateSagaModule({ cwd: dir, env: { SAGA_TYPES_MODULE: 'other.js' }, flag: 'flag.js' })).toEqual({ path: path.join(dir, 'flag.js'), namedBy: '--sagas' });
  });

  it('says how to name one when none is', () => {
    const dir = app('unnamed', { name: 'unnamed' });
    expect(() => locateSagaModule({ cwd: dir, env: {} })).toThrow(SagaModuleError);
    expect(() => locateSagaModule({ cwd: dir, env: {} })).toThrow('no saga types named: name the module that exports your saga types with --sagas <module>, SAGA_TYPES_MODULE, or "reservation-saga": { "sagas": "./dist/sagas.js" } in your package.json');
  });

  it('loads a module whose `sagas` is a function of the config', async () => {
    const dir = app('function', undefined, { 'sagas.cjs': sagasModule });
    const types = await loadSagaModule({ path: path.join(dir, 'sagas.cjs'), namedBy: '--sagas' }, config);
    expect(Object.keys(types)).toEqual(['booking']);
  });

  it('refuses a missing module, one that fails to load, and one that exports no saga types, naming it', async () => {
    const dir = app('broken', undefined, { 'throws.cjs': 'throw new Error("boom")', 'empty.cjs': 'exports.other = 1' });
    const load = (file: string) => loadSagaModule({ path: path.join(dir, file), namedBy: '--sagas' }, config);
    await expect(load('missing.js')).rejects.toThrow(`saga types module ${path.join(dir, 'missing.js')} (named by --sagas) does not exist`);
    await expect(load('throws.cjs')).rejects.toThrow(`saga types module ${path.join(dir, 'throws.cjs')} (named by --sagas) failed to load: boom`);
    await expect(load('empty.cjs')).rejects.toThrow(/exports no `sagas`/);
  });
});
