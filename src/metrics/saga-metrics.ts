/**
 * The project's Prometheus metrics, in one registry per process. Every label value is bounded: a
 * saga type, a step or compensation name are taken only from the registered saga types (anything
 * else is counted as `unknown`), and answers and outcomes come from fixed sets. An intent key,
 * idempotency key, workflow id or any request data never becomes a label: where a hook only has the
 * intent key, its scope is mapped to the registered saga type and the key itself goes no further.
 * Plain Node (prom-client only): the gate, the RMS side and the activities use it alike.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import type { SagaTypes } from '../sagas';
import { isEntityOperation } from '../sagas/definition';

/** The label names any project metric may carry (a unit test refuses any other). */
export const METRIC_LABELS = ['saga_type', 'answer', 'outcome', 'step', 'compensation', 'activity'] as const;

/** The value of a label outside the registered saga types and their declared steps. */
export const UNKNOWN = 'unknown';

/** Outcomes of a step attempt. */
export type StepOutcome = 'succeeded' | 'replayed' | 'rejected' | 'superseded' | 'cancelled' | 'failed';
/** Outcomes of a compensation attempt. */
export type CompensationOutcome = 'succeeded' | 'replayed' | 'refused' | 'cancelled' | 'failed';
/** What a read-repair left in Redis. */
export type RepairOutcome = 'marked' | 'freed';
/** A saga's end: its SagaOutcome, or FAILED when the workflow failed without one (input it could not run). */
export type SagaEnd = 'COMPLETED' | 'REJECTED' | 'COMPENSATED' | 'COMPENSATION_FAILED' | 'EXPIRED' | 'FAILED';

const SAGA_ENDS: ReadonlySet<string> = new Set<SagaEnd>(['COMPLETED', 'REJECTED', 'COMPENSATED', 'COMPENSATION_FAILED', 'EXPIRED', 'FAILED']);

/** The events of a wait (see SagaWaitEventKind): a label outside them is counted as `unknown`. */
const WAIT_EVENTS: ReadonlySet<string> = new Set(['started', 'signalled', 'timed_out', 'elapsed', 'cancelled']);
const ANSWERS: ReadonlySet<string> = new Set(['SUCCESS', 'DUPLICATE', 'CONFLICT']);
/** The activities that write fenced rows (the only ones a FENCED_OUT refusal comes from). */
const FENCED_ACTIVITIES: ReadonlySet<string> = new Set(['writeEntity', 'finalizeEntity', 'completeEntity', 'undoEntity']);

/**
 * Latency buckets of the gate's answer, in seconds: a rejection is one Redis call (about a
 * millisecond), a SUCCESS adds a PostgreSQL lookup and a workflow start (tens of milliseconds).
 */
const ANSWER_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** Options of {@link SagaMetrics}. */
export interface SagaMetricsOptions {
  /** The saga types of this process (the worker's or the client's): they bound the label values. */
  types: SagaTypes;
  /** The registry to register in. @default a new one, of this instance alone */
  registry?: Registry;
}

/** The project's metrics and the hooks that count them; pass one to the worker, the client and `saga serve`. */
export class SagaMetrics {
  /** What the `/metrics` endpoint serves. */
  readonly registry: Registry;
  readonly #types: SagaTypes;
  /** Intent scope → saga type, for hooks that know only an intent key. */
  readonly #typeOfScope = new Map<string, string>();

  readonly #answers: Counter<'saga_type' | 'answer'>;
  readonly #answerSeconds: Histogram<'saga_type' | 'answer'>;
  readonly #leasesTaken: Counter<'saga_type'>;
  readonly #leasesExtended: Counter<'saga_type'>;
  readonly #leasesLost: Counter<'saga_type'>;
  readonly #fencedOut: Counter<'saga_type' | 'activity'>;
  readonly #readRepairs: Counter<'saga_type' | 'outcome'>;
  readonly #steps: Counter<'saga_type' | 'step' | 'outcome'>;
  readonly #compensations: Counter<'saga_type' | 'compensation' | 'outcome'>;
  readonly #ended: Counter<'saga_type' | 'outcome'>;
  readonly #attention: Counter<'saga_type'>;
  readonly #waits: Counter<'saga_type' | 'outcome'>;

  constructor(options: SagaMetricsOptions) {
    this.registry = options.registry ?? new Registry();
    this.#types = options.types;
    for (const def of Object.values(options.types)) {
      // An entity operation's lease is its entity's lock, under the lock scope (see prepareSaga).
      const scope = isEntityOperation(def) ? `${def.scope}-lock` : def.scope;
      const known = this.#typeOfScope.get(scope);
      // Types sharing a scope share their intents (or locks) too: their leases are counted together.
      this.#typeOfScope.set(scope, known === undefined ? def.type : [known, def.type].sort().join('+'));
    }
    const registers = [this.registry];
    this.#answers = new Counter({
      name: 'saga_gate_answers_total',
      help: 'Answers of the gate (SagaClient.start), by saga type and answer (SUCCESS, DUPLICATE, CONFLICT); retries of one key included.',
      labelNames: ['saga_type', 'answer'],
      registers,
    });
    this.#answerSeconds = new Histogram({
      name: 'saga_gate_answer_duration_seconds',
      help: 'Time from a SagaClient.start call to its answer, by saga type and answer.',
      labelNames: ['saga_type', 'answer'],
      buckets: ANSWER_BUCKETS_SECONDS,
      registers,
    });
    this.#leasesTaken = new Counter({
      name: 'saga_leases_taken_total',
      help: 'Reservation leases taken (a reserve that answered SUCCESS with a new lease), by saga type.',
      labelNames: ['saga_type'],
      registers,
    });
    this.#leasesExtended = new Counter({
      name: 'saga_leases_extended_total',
      help: 'Lease extensions that succeeded (each heartbeat of a fenced write, and its last check before COMMIT), by saga type.',
      labelNames: ['saga_type'],
      registers,
    });
    this.#leasesLost = new Counter({
      name: 'saga_leases_lost_total',
      help: 'Leases found gone by their holder (expired or taken over) when extending, confirming, raising or finalising them, by saga type.',
      labelNames: ['saga_type'],
      registers,
    });
    this.#fencedOut = new Counter({
      name: 'saga_fenced_out_writes_total',
      help: 'Writes of a fenced row refused because a newer fencing token owns it (FENCED_OUT), by saga type and activity.',
      labelNames: ['saga_type', 'activity'],
      registers,
    });
    this.#readRepairs = new Counter({
      name: 'saga_read_repairs_total',
      help: 'Read-repairs: PostgreSQL showed an entity Redis had forgotten, and its marker was written again (marked) or taken back because the entity was undone meanwhile (freed).',
      labelNames: ['saga_type', 'outcome'],
      registers,
    });
    this.#steps = new Counter({
      name: 'saga_step_attempts_total',
      help: 'Attempts of the saga steps, by saga type, step and outcome (succeeded, replayed, rejected, superseded, cancelled, failed: retried).',
      labelNames: ['saga_type', 'step', 'outcome'],
      registers,
    });
    this.#compensations = new Counter({
      name: 'saga_compensation_attempts_total',
      help: 'Attempts of the compensations (undoEntity included), by saga type, compensation and outcome (succeeded, replayed, refused, cancelled, failed: retried).',
      labelNames: ['saga_type', 'compensation', 'outcome'],
      registers,
    });
    this.#ended = new Counter({
      name: 'saga_sagas_ended_total',
      help: 'Sagas that ended, by saga type and outcome (COMPLETED, REJECTED, COMPENSATED, COMPENSATION_FAILED, EXPIRED, or FAILED: input the worker could not run).',
      labelNames: ['saga_type', 'outcome'],
      registers,
    });
    this.#attention = new Counter({
      name: 'saga_sagas_needing_attention_total',
      help: 'Sagas that began to wait in NEEDS_ATTENTION (a compensation failed after its retries; each redrive that fails again counts again), by saga type.',
      labelNames: ['saga_type'],
      registers,
    });
    this.#waits = new Counter({
      name: 'saga_waits_total',
      help: 'Waits of sagas\' plans (a signal or a timer), by saga type and outcome: started as each began, then signalled, timed_out, elapsed (a timer) or cancelled as it ended.',
      labelNames: ['saga_type', 'outcome'],
      registers,
    });
  }

  /** The registered saga type of that name, else `unknown`. */
  sagaType(type: string): string {
    return Object.hasOwn(this.#types, type) ? type : UNKNOWN;
  }

  /** The registered saga type(s) of an intent key's scope, else `unknown` (the key goes no further). */
  sagaTypeOfIntent(intentKey: string): string {
    const at = intentKey.lastIndexOf(':');
    return (at > 0 && this.#typeOfScope.get(intentKey.slice(0, at))) || UNKNOWN;
  }

  /** The gate answered `answer` for a `type` request after `seconds`. */
  gateAnswered(type: string, answer: string, seconds: number): void {
    const labels = { saga_type: this.sagaType(type), answer: ANSWERS.has(answer) ? answer : UNKNOWN };
    this.#answers.inc(labels);
    this.#answerSeconds.observe(labels, seconds);
  }

  /** A reserve took a new lease on `intentKey`. */
  leaseTaken(intentKey: string): void {
    this.#leasesTaken.inc({ saga_type: this.sagaTypeOfIntent(intentKey) });
  }

  /** A lease on `intentKey` was extended. */
  leaseExtended(intentKey: string): void {
    this.#leasesExtended.inc({ saga_type: this.sagaTypeOfIntent(intentKey) });
  }

  /** The holder of a lease on `intentKey` found it gone. */
  leaseLost(intentKey: string): void {
    this.#leasesLost.inc({ saga_type: this.sagaTypeOfIntent(intentKey) });
  }

  /** A read-repair of `intentKey` ended `outcome`. */
  readRepaired(intentKey: string, outcome: RepairOutcome): void {
    this.#readRepairs.inc({ saga_type: this.sagaTypeOfIntent(intentKey), outcome });
  }

  /** `activity` of a `type` saga was refused with FENCED_OUT. */
  fencedOut(type: string, activity: string): void {
    this.#fencedOut.inc({ saga_type: this.sagaType(type), activity: FENCED_ACTIVITIES.has(activity) ? activity : UNKNOWN });
  }

  /** An attempt of `step` of a `type` saga ended `outcome`. */
  stepAttempted(type: string, step: string, outcome: StepOutcome): void {
    const saga_type = this.sagaType(type);
    const declared = saga_type !== UNKNOWN && this.#types[type]!.steps.some((s) => s.step === step);
    this.#steps.inc({ saga_type, step: declared ? step : UNKNOWN, outcome });
  }

  /** An attempt of `compensation` (a declared one, or `undoEntity`) of a `type` saga ended `outcome`. */
  compensationAttempted(type: string, compensation: string, outcome: CompensationOutcome): void {
    const saga_type = this.sagaType(type);
    const declared = saga_type !== UNKNOWN && (compensation === 'undoEntity' || this.#types[type]!.steps.some((s) => s.compensation === compensation));
    this.#compensations.inc({ saga_type, compensation: declared ? compensation : UNKNOWN, outcome });
  }

  /** A `type` saga began to wait in NEEDS_ATTENTION. */
  sagaNeedsAttention(type: string): void {
    this.#attention.inc({ saga_type: this.sagaType(type) });
  }

  /** A wait of a `type` saga began or ended (`event`). */
  sagaWait(type: string, event: string): void {
    this.#waits.inc({ saga_type: this.sagaType(type), outcome: WAIT_EVENTS.has(event) ? event : UNKNOWN });
  }

  /** A `type` saga ended `outcome`. */
  sagaEnded(type: string, outcome: string): void {
    this.#ended.inc({ saga_type: this.sagaType(type), outcome: SAGA_ENDS.has(outcome) ? outcome : UNKNOWN });
  }
}
