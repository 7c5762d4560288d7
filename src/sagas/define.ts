/**
 * How an app declares its saga types: `defineSaga` for one that creates an entity, `defineOperation`
 * for one that changes an existing entity. Both check the declaration at once (every step and
 * compensation has a handler, names are well-formed), so a mistake fails where it is written, not
 * in a worker half-way through a saga.
 */
import type { z } from 'zod';
import { FencedTable, type FencedTableOptions } from '../db/fenced-table';
import { MAX_LIMIT_COUNTERS, MAX_LIMIT_IN_FLIGHT, MAX_LIMIT_PER_SECOND } from '../rms/validation';
import { DEFAULT_RETRY_INITIAL_INTERVAL_MS, ErrorType, MAX_ATTENTION_MS, MAX_DEADLINE_MS, MAX_RETRY_ATTEMPTS, MAX_RETRY_TOTAL_MS, type CompensationPolicy, type SagaStepPlan, type StepRetryPolicy } from '../shared/saga';
import { isEntityOperation, limitsOf, SagaInputError, STEP_NAME_PATTERN, type EntityOperation, type SagaDefinition, type SagaType } from './definition';

/** The compensation policy of a type that names none: in reverse order, all of them, freeing the intent. */
export const DEFAULT_COMPENSATION: CompensationPolicy = Object.freeze({ parallel: false, continueOnError: true, freeIntent: true });

/** How long a saga of a type that names no `attentionMs` waits in NEEDS_ATTENTION for a redrive: a day. */
export const DEFAULT_ATTENTION_MS = 24 * 60 * 60 * 1000;

const TYPE_NAME = /^[a-z][a-z0-9-]{0,62}$/;

/**
 * What `defineSaga` takes: a {@link SagaDefinition} whose compensation policy may be partial. The
 * input type comes from `schema` alone (`NoInfer` elsewhere), so `intent`, `row` and the handlers,
 * `externalStep`s included, are typed by it without naming it.
 */
export type SagaDeclaration<I> = { schema: SagaDefinition<I>['schema'] } & Omit<SagaDefinition<NoInfer<I>>, 'kind' | 'compensation' | 'schema'> & {
    compensation?: Partial<CompensationPolicy>;
  };

/** What `defineOperation` takes: an {@link EntityOperation} whose compensation policy may be partial (input typed by `schema`). */
export type OperationDeclaration<I> = { schema: EntityOperation<I>['schema'] } & Omit<EntityOperation<NoInfer<I>>, 'kind' | 'compensation' | 'schema'> & {
    compensation?: Partial<CompensationPolicy>;
  };

/**
 * A fenced table `table` with the data columns a saga's `row` fills (see `fencedTableSql` for its
 * schema). `options.legacy`: the rows and ids of earlier versions its operations still accept (see
 * `LegacyRows`; none unless named).
 */
export function fencedTable(table: string, dataColumns: readonly string[], options: Pick<FencedTableOptions, 'legacy'> = {}): FencedTable {
  return new FencedTable({ table, dataColumns, ...(options.legacy === undefined ? {} : { legacy: options.legacy }) });
}

/**
 * Declares a saga type that creates an entity. Its name keeps its literal type (`'order'`, not
 * `string`), so a client given a list of such types checks the names and inputs of its starts at
 * compile time (see `SagaClient.connect`).
 * @throws SagaDeclarationError for a malformed declaration.
 */
export function defineSaga<I, const T extends string = string>(declaration: SagaDeclaration<I> & { type: T }): SagaDefinition<I> & { readonly type: T } {
  const compensation = { ...DEFAULT_COMPENSATION, attentionMs: DEFAULT_ATTENTION_MS, ...declaration.compensation };
  const def: SagaDefinition<I> & { type: T } = { ...declaration, kind: 'creation', compensation };
  checkDeclaration(def as SagaType<unknown>);
  return Object.freeze(def);
}

/** Declares a saga type that changes an existing entity under its lock; its name keeps its literal type, as defineSaga's. @throws SagaDeclarationError */
export function defineOperation<I, const T extends string = string>(declaration: OperationDeclaration<I> & { type: T }): EntityOperation<I> & { readonly type: T } {
  const compensation = { ...DEFAULT_COMPENSATION, attentionMs: DEFAULT_ATTENTION_MS, ...declaration.compensation };
  const def: EntityOperation<I> & { type: T } = { ...declaration, kind: 'operation', compensation };
  checkDeclaration(def as SagaType<unknown>);
  return Object.freeze(def);
}

/** A saga type's declaration is malformed (thrown where it is declared, or when a worker or client is given it). */
export class SagaDeclarationError extends SagaInputError {
  override readonly name = 'SagaDeclarationError';
  constructor(
    readonly sagaType: string,
    detail: string,
  ) {
    super(`saga type ${JSON.stringify(sagaType)}: ${detail}`, ErrorType.INVALID_INPUT);
  }
}

function checkDeclaration(def: SagaType<unknown>): void {
  const type = typeof def.type === 'string' ? def.type : String(def.type);
  if (!TYPE_NAME.test(type)) throw new SagaDeclarationError(type, 'the type must be lower-case letters, digits and -, starting with a letter (at most 63)');
  if (!(def.table instanceof FencedTable)) throw new SagaDeclarationError(type, 'table must be a FencedTable (fencedTable(name, dataColumns))');
  if (typeof def.schema?.safeParse !== 'function') throw new SagaDeclarationError(type, 'schema must be a zod schema');
  const named = new Set<string>();
  const groups = new Set<string>();
  let previousGroup: string | undefined;
  for (const { group } of def.steps) {
    if (group !== undefined) {
      if (isEntityOperation(def)) throw new SagaDeclarationError(type, `step group "${group}": an operation runs its steps one at a time`);
      if (!STEP_NAME_PATTERN.test(group)) throw new SagaDeclarationError(type, `step group name ${JSON.stringify(group)} must be letters, digits, _ and - (at most 64)`);
      if (group !== previousGroup && groups.has(group)) throw new SagaDeclarationError(type, `the steps of group "${group}" must stand next to each other`);
      groups.add(group);
    }
    previousGroup = group;
  }
  for (const plan of def.steps) {
    const { step, compensation } = plan;
    for (const name of compensation ? [step, compensation] : [step]) {
      if (!STEP_NAME_PATTERN.test(name)) throw new SagaDeclarationError(type, `step name ${JSON.stringify(name)} must be letters, digits, _ and - (at most 64)`);
      if (named.has(name)) throw new SagaDeclarationError(type, `step name "${name}" is used twice`);
      named.add(name);
      if (plan.wait !== undefined) continue;
      if (!Object.hasOwn(def.handlers, name)) throw new SagaDeclarationError(type, `no handler for "${name}"`);
    }
    if (plan.wait !== undefined) checkWait(def, plan, type);
  }
  for (const plan of def.steps) {
    checkRetries(plan, type);
    if (plan.undoRefused !== undefined) {
      if (typeof plan.undoRefused !== 'boolean') throw new SagaDeclarationError(type, `step "${plan.step}": undoRefused must be true or false`);
      if (plan.compensation === undefined) throw new SagaDeclarationError(type, `step "${plan.step}": undoRefused without a compensation`);
    }
  }
  if (isEntityOperation(def) && def.releases !== undefined && typeof def.releases !== 'boolean') throw new SagaDeclarationError(type, 'releases must be true or false');
  if (def.deadlineMs !== undefined && !(Number.isInteger(def.deadlineMs) && def.deadlineMs > 0 && def.deadlineMs <= MAX_DEADLINE_MS)) {
    throw new SagaDeclarationError(type, `deadlineMs must be a whole number of ms from 1 to ${MAX_DEADLINE_MS} (30 days)`);
  }
  const { attentionMs } = def.compensation ?? {};
  if (attentionMs !== undefined && !(Number.isInteger(attentionMs) && attentionMs >= 0 && attentionMs <= MAX_ATTENTION_MS)) {
    throw new SagaDeclarationError(type, `compensation.attentionMs must be a whole number of ms from 0 to ${MAX_ATTENTION_MS} (30 days)`);
  }
  checkLimits(def, type);
  for (const name of Object.keys(def.retiredHandlers ?? {})) {
    if (!STEP_NAME_PATTERN.test(name)) throw new SagaDeclarationError(type, `retired handler name ${JSON.stringify(name)} must be letters, digits, _ and - (at most 64)`);
    if (named.has(name)) throw new SagaDeclarationError(type, `"${name}" is a step of the type and a retired handler: a step the type plans is not retired`);
  }
  const unused = Object.keys(def.handlers).filter((h) => !named.has(h));
  if (unused.length > 0) throw new SagaDeclarationError(type, `handler${unused.length > 1 ? 's' : ''} ${unused.map((h) => `"${h}"`).join(', ')} not named by any step (one kept for running sagas goes in retiredHandlers)`);
}

const WAIT_FIELDS = ['signal', 'timeoutMs', 'onTimeout'];

/** A wait: in a creation only, alone (no handler, compensation, group or retry), with a well-formed signal and timeout. */
function checkWait(def: SagaType<unknown>, plan: SagaStepPlan, type: string): void {
  const { step, wait } = plan;
  const at = `wait "${step}"`;
  if (isEntityOperation(def)) throw new SagaDeclarationError(type, `${at}: an operation cannot wait (its entity's lock would be held, extended, for the whole wait)`);
  if (typeof wait !== 'object' || wait === null || Array.isArray(wait)) throw new SagaDeclarationError(type, `${at}: wait must be an object { ${WAIT_FIELDS.join(', ')} }`);
  const unknown = Object.keys(wait).filter((k) => !WAIT_FIELDS.includes(k));
  if (unknown.length > 0) throw new SagaDeclarationError(type, `${at}: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')} (a wait has ${WAIT_FIELDS.join(', ')})`);
  const extra = (['compensation', 'group', 'retry', 'compensationRetry', 'undoRefused'] as const).filter((k) => plan[k] !== undefined);
  if (extra.length > 0) throw new SagaDeclarationError(type, `${at}: a wait has no ${extra.join(', ')}`);
  if (Object.hasOwn(def.handlers, step)) throw new SagaDeclarationError(type, `${at}: a wait has no handler (remove handlers.${step})`);
  if (wait.signal !== undefined && !(typeof wait.signal === 'string' && STEP_NAME_PATTERN.test(wait.signal))) {
    throw new SagaDeclarationError(type, `${at}: signal ${JSON.stringify(wait.signal)} must be letters, digits, _ and - (at most 64)`);
  }
  if (!(Number.isSafeInteger(wait.timeoutMs) && wait.timeoutMs >= 1 && wait.timeoutMs <= MAX_DEADLINE_MS)) {
    throw new SagaDeclarationError(type, `${at}: timeoutMs must be a whole number of ms from 1 to ${MAX_DEADLINE_MS} (30 days)`);
  }
  if (wait.onTimeout !== undefined) {
    if (wait.onTimeout !== 'compensate' && wait.onTimeout !== 'continue') throw new SagaDeclarationError(type, `${at}: onTimeout must be 'compensate' or 'continue'`);
    if (wait.signal === undefined) throw new SagaDeclarationError(type, `${at}: onTimeout without a signal (a timer always goes on)`);
  }
  const others = def.steps.filter((s) => s !== plan && s.wait?.signal !== undefined && s.wait.signal === wait.signal);
  if (others.length > 0) throw new SagaDeclarationError(type, `${at}: signal "${wait.signal}" is waited for twice (a signal is received once)`);
}

const RETRY_FIELDS = ['maximumAttempts', 'totalMs', 'initialIntervalMs', 'backoffCoefficient', 'maximumIntervalMs', 'nonRetryableErrorTypes'] as const;

/** A step's `retry` and `compensationRetry`: well-formed, and no bound on a step nothing could undo. */
function checkRetries(plan: SagaStepPlan, type: string): void {
  const { step, compensation, retry, compensationRetry } = plan;
  if (retry !== undefined) checkRetryPolicy(retry, type, `step "${step}": retry`);
  if (compensationRetry !== undefined) {
    if (compensation === undefined) throw new SagaDeclarationError(type, `step "${step}": compensationRetry without a compensation`);
    checkRetryPolicy(compensationRetry, type, `step "${step}": compensationRetry`);
  }
  if (compensation === undefined && retry !== undefined && (retry.maximumAttempts !== undefined || retry.totalMs !== undefined)) {
    throw new SagaDeclarationError(type, `step "${step}": retry bounds a step without a compensation (nothing could undo it, so it is retried until it succeeds or is refused); give it intervals only, or a compensation`);
  }
}

function checkRetryPolicy(policy: StepRetryPolicy, type: string, which: string): void {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) throw new SagaDeclarationError(type, `${which} must be an object { ${RETRY_FIELDS.join(', ')} }`);
  const unknown = Object.keys(policy).filter((k) => !(RETRY_FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new SagaDeclarationError(type, `${which}: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')} (a retry policy has ${RETRY_FIELDS.join(', ')})`);
  const wholeIn = (field: 'maximumAttempts' | 'totalMs' | 'initialIntervalMs' | 'maximumIntervalMs', max: number, unit: string) => {
    const value = policy[field];
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= 1 && value <= max)) throw new SagaDeclarationError(type, `${which}.${field} must be a whole number${unit} from 1 to ${max}`);
  };
  wholeIn('maximumAttempts', MAX_RETRY_ATTEMPTS, '');
  wholeIn('totalMs', MAX_RETRY_TOTAL_MS, ' of ms');
  wholeIn('initialIntervalMs', MAX_RETRY_TOTAL_MS, ' of ms');
  wholeIn('maximumIntervalMs', MAX_RETRY_TOTAL_MS, ' of ms');
  const { backoffCoefficient, initialIntervalMs = DEFAULT_RETRY_INITIAL_INTERVAL_MS, maximumIntervalMs, nonRetryableErrorTypes } = policy;
  if (backoffCoefficient !== undefined && !(typeof backoffCoefficient === 'number' && Number.isFinite(backoffCoefficient) && backoffCoefficient >= 1 && backoffCoefficient <= 100)) {
    throw new SagaDeclarationError(type, `${which}.backoffCoefficient must be a number from 1 to 100`);
  }
  if (maximumIntervalMs !== undefined && maximumIntervalMs < initialIntervalMs) throw new SagaDeclarationError(type, `${which}.maximumIntervalMs must be at least initialIntervalMs (${initialIntervalMs})`);
  if (nonRetryableErrorTypes !== undefined && !(Array.isArray(nonRetryableErrorTypes) && nonRetryableErrorTypes.every((t) => typeof t === 'string' && t.length > 0))) {
    throw new SagaDeclarationError(type, `${which}.nonRetryableErrorTypes must be a list of failure type names`);
  }
}

function checkLimits(def: SagaType<unknown>, type: string): void {
  if (def.limits === undefined) return;
  if (typeof def.limits !== 'object' || def.limits === null) throw new SagaDeclarationError(type, 'limits must be a limit { inFlight?, perSecond?, per? } or a list of them');
  const limits = limitsOf(def);
  if (limits.length === 0 || limits.length > MAX_LIMIT_COUNTERS) throw new SagaDeclarationError(type, `limits must be 1 to ${MAX_LIMIT_COUNTERS} limits`);
  limits.forEach((limit, i) => {
    const which = `limits[${i}]`;
    if (typeof limit !== 'object' || limit === null) throw new SagaDeclarationError(type, `${which} must be an object { inFlight?, perSecond?, per? }`);
    const unknown = Object.keys(limit).filter((k) => k !== 'inFlight' && k !== 'perSecond' && k !== 'per');
    if (unknown.length > 0) throw new SagaDeclarationError(type, `${which}: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')} (a limit has inFlight, perSecond and per)`);
    if (limit.inFlight === undefined && limit.perSecond === undefined) throw new SagaDeclarationError(type, `${which} limits nothing: give inFlight, perSecond or both`);
    for (const [field, max] of [['inFlight', MAX_LIMIT_IN_FLIGHT], ['perSecond', MAX_LIMIT_PER_SECOND]] as const) {
      const value = limit[field];
      if (value !== undefined && !(Number.isSafeInteger(value) && value >= 1 && value <= max)) throw new SagaDeclarationError(type, `${which}.${field} must be a whole number from 1 to ${max}`);
    }
    if (limit.per !== undefined && typeof limit.per !== 'function') throw new SagaDeclarationError(type, `${which}.per must be a function of the input giving the scope value (e.g. its customer)`);
  });
}

/** Saga types as a worker or client is given them: a list of declarations, or an object of them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each definition has its own input type
export type SagaList = readonly SagaType<any>[] | Readonly<Record<string, SagaType<any>>>;

/** The declarations of a {@link SagaList}, as one union. */
type SagaOfList<S extends SagaList> = S extends readonly (infer D)[] ? D : S[keyof S];

/** The type names of a {@link SagaList}: `'order' | 'order-cancel'` for a list of declarations that kept their names (`string` otherwise). */
export type SagaNameOf<S extends SagaList> = SagaOfList<S> extends infer D ? (D extends { type: infer T extends string } ? T : never) : never;

/** The input of saga type `K` of a {@link SagaList}: what its schema validates to. */
export type SagaInputOf<S extends SagaList, K extends string> = SagaOfList<S> extends infer D
  ? D extends { type: infer T; schema: infer Z extends z.ZodType }
    ? K extends T
      ? z.output<Z>
      : never
    : never
  : never;

/**
 * Saga types by name from a list (or an object) of declarations.
 * @throws SagaDeclarationError when two share a type name, or one is not a declaration.
 */
export function sagaTypesOf(sagas: SagaList): Readonly<Record<string, SagaType<unknown>>> {
  const list = Array.isArray(sagas) ? (sagas as readonly SagaType<unknown>[]) : Object.values(sagas as Record<string, SagaType<unknown>>);
  const byName: Record<string, SagaType<unknown>> = {};
  for (const def of list) {
    if (typeof def !== 'object' || def === null || typeof def.type !== 'string') throw new SagaDeclarationError(typeof def, 'not a saga declaration (defineSaga or defineOperation)');
    if (Object.hasOwn(byName, def.type)) throw new SagaDeclarationError(def.type, 'declared twice');
    byName[def.type] = def;
  }
  return Object.freeze(byName);
}
