import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Resource } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { beforeAll, inject, describe, expect, it } from 'vitest';
import { createDataConverter, parseCodecKeys } from '../../src/codec';
import { FAILURE_CONVERTER_PATH } from '../../src/codec';
import { tracingWorkflowInterceptorModules, WORKFLOW_INTERCEPTOR_MODULES } from '../../src/worker';
import { TEST_CODEC_KEYS } from '../helpers/secrets';
import {
  FOLDED_AGAIN_PATCH,
  FOLDED_PATCHES_PATCH,
  FORWARD_PATCH,
  GATE_PATCH,
  MEMO_STEPS_PATCH,
  PLAN_BEFORE_CANCEL_PATCH,
  REDRIVE_CANCELLED_PATCH,
  REJECTED_AT_WRITE_PATCH,
  STEP_HEARTBEAT_PATCH,
} from '../../src/workflows/reservation-saga';

// Histories recorded from real sagas (scripts/record-histories.ts). A change to workflow code that
// would break sagas already running makes these replays fail with a determinism error.
const dir = path.join(__dirname, 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

/**
 * The shapes of reservationSaga as recorded before its patches were folded into one (folded-patches),
 * kept as `pre-folded-<shape>` beside the shape recorded again since.
 */
const FOLDED_SHAPES = files.filter((f) => f.startsWith('pre-folded-')).map((f) => f.replace(/^pre-folded-(.*)\.json$/, '$1'));

/**
 * The shapes of reservationSaga as recorded before write-registers (and folded-patches-2, which took
 * the patches since the first fold at once), kept as `pre-write-registers-<shape>` beside the shape
 * recorded again since: sagas started then replay with one finalizeEntity and one completeEntity more.
 */
const REGISTERS_SHAPES = files.filter((f) => f.startsWith('pre-write-registers-')).map((f) => f.replace(/^pre-write-registers-(.*)\.json$/, '$1'));

describe('recorded saga histories', () => {
  it('include every saga shape: before the gate, before steps heartbeated, started through the gate, and started by type', () => {
    expect(files.map((f) => f.replace(/\.json$/, '')).sort()).toEqual(
      expect.arrayContaining([
        // Recorded before the gate: these sagas reserved by themselves with their run id as the session.
        'legacy-compensated',
        'legacy-completed',
        'legacy-duplicate',
        // Recorded before steps heartbeated (steps-heartbeat): they ran with no heartbeat timeout.
        'pre-heartbeat-gate-cancelled',
        'pre-heartbeat-gate-cancelled-after-steps',
        'pre-heartbeat-gate-compensated',
        'pre-heartbeat-gate-compensation-failed',
        'pre-heartbeat-gate-completed',
        'pre-heartbeat-gate-lease-expired',
        'pre-heartbeat-by-type-completed',
        // Started by SagaClient with the gate's reservation.
        'gate-compensated',
        'gate-completed',
        'gate-lease-expired',
        // A refund refused: the saga keeps its entity (failed-compensation-keeps-entity).
        'gate-compensation-failed',
        // Cancelled during its first step and during its last: the running step stops, the saga compensates.
        'gate-cancelled',
        'gate-cancelled-after-steps',
        // Cancelled before any worker ran it: it plans and confirms its reservation first (plan-before-cancellation).
        'gate-cancelled-before-worker',
        // Its lease ended before any worker ran it and another request took the intent: REJECTED, a
        // failed workflow carrying its state (rejected-saga-fails).
        'gate-rejected',
        // Its write found another saga's entity (registered meanwhile): REJECTED, nothing undone
        // (rejected-at-write); recorded before that patch, it compensated (COMPENSATED, SAGA_REJECTED).
        'gate-rejected-at-write',
        'pre-rejected-at-write-gate-rejected-at-write',
        // Past its deadline: compensated (EXPIRED), or before its write (nothing written).
        'gate-expired',
        'gate-expired-unwritten',
        // Its steps as one group, run at once; its plan's step names in its memo (memo-plan-steps).
        'gate-grouped-steps',
        // A step without a compensation between the others, each step given the earlier results.
        'gate-notice-completed',
        'gate-notice-compensated',
        // A refused step whose type declares it did nothing: its own compensation is not run (undoRefused).
        'gate-refused-not-undone',
        'gate-steps-recorded',
        // A compensation failed: it waited in NEEDS_ATTENTION (needs-attention), redriven twice to
        // COMPENSATED, or its wait ended (COMPENSATION_FAILED).
        'gate-redriven',
        'gate-attention-ended',
        // Cancelled while it waited, then redriven: the redrive answered with its end (redrive-of-cancelled-saga);
        // recorded before that patch, its redrive failed with the cancellation while the round ran.
        'gate-cancelled-redriven',
        'pre-redrive-of-cancelled-gate-cancelled-redriven',
        // A seat held until its payment's signal (an update, during the wait's timer); one whose hold
        // expired unpaid (WAIT_TIMED_OUT, compensated); one that waited on a timer.
        'gate-wait-signalled',
        'gate-wait-expired',
        'gate-wait-timer',
        // An operation that releases its entity (a loan returned): its steps, then releaseEntity.
        'operation-release-completed',
        // An amendment whose refund failed: it waited holding the order's lock, and was redriven.
        'operation-redriven',
        // Recorded before a redrive sent after the wait ended was refused (saga-redrive-window.test.ts
        // then): its update was accepted while the amendment gave its lock back, waited for a round
        // that never came, and kept the ended saga's workflow RUNNING. It replays so: stuck.
        'operation-redriven-after-wait-stuck',
        // Of a type with limits: counted out of its caller's counters at its end (gate-limits).
        'gate-limited-completed',
        'gate-limited-compensated',
        // Started by a plain Temporal client with {type, idempotencyKey, data}; one naming its owner (memo-owner).
        'by-type-completed',
        'by-type-owned',
        'by-type-conflict',
        'by-type-invalid',
        // The hourly purge of the step idempotency store (its schedule's workflow).
        'purge-completed',
      ]),
    );
    // Every shape since the gate (25 of them), also as recorded before its patches were folded into
    // one (folded-patches): sagas started then replay each patch on its own.
    expect(FOLDED_SHAPES).toHaveLength(25);
    expect(files).toEqual(expect.arrayContaining(FOLDED_SHAPES.map((shape) => `${shape}.json`)));
    // Every current shape (34 of them), also as recorded before write-registers.
    expect(REGISTERS_SHAPES).toHaveLength(34);
    expect(files).toEqual(expect.arrayContaining(REGISTERS_SHAPES.map((shape) => `${shape}.json`)));
  });

  it('record a creation in four activities where one started before write-registers ran six, and twelve history events fewer', () => {
    const eventsOf = (file: string) => (JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { events: { activityTaskScheduledEventAttributes?: { activityType: { name: string } } }[] }).events;
    const activitiesOf = (file: string) => eventsOf(file).flatMap((e) => (e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType.name] : []));
    expect(activitiesOf('pre-write-registers-gate-completed.json')).toEqual(['writeEntity', 'finalizeEntity', 'runStep', 'runStep', 'completeEntity']);
    expect(activitiesOf('gate-completed.json')).toEqual(['writeEntity', 'runStep', 'runStep']);
    expect(eventsOf('pre-write-registers-gate-completed.json')).toHaveLength(43);
    expect(eventsOf('gate-completed.json')).toHaveLength(31);
    // A last step run in a group is not alone: the saga completes the row after it, as before.
    expect(activitiesOf('gate-grouped-steps.json')).toEqual(['writeEntity', 'runStep', 'runStep', 'completeEntity']);
  });

  it('record one patch marker per saga started now, where sagas started before the fold recorded one per patch', () => {
    const patchesOf = (file: string): string[] =>
      (JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { events: { markerRecordedEventAttributes?: { markerName: string; details: Record<string, { payloads: { data: string }[] }> } }[] }).events.flatMap(
        ({ markerRecordedEventAttributes: marker }) =>
          marker?.markerName === 'core_patch' ? [(JSON.parse(Buffer.from(marker.details['patch-data']!.payloads[0]!.data, 'base64').toString()) as { id: string }).id] : [],
      );
    // A patch added after the fold is asked on its own: its marker comes beside the fold's.
    const afterFold = (file: string) => patchesOf(file).filter((id) => id !== REDRIVE_CANCELLED_PATCH && id !== REJECTED_AT_WRITE_PATCH);
    for (const shape of FOLDED_SHAPES) expect(afterFold(`pre-write-registers-${shape}.json`), shape).toEqual([FOLDED_PATCHES_PATCH]);
    expect(patchesOf('pre-write-registers-gate-cancelled-redriven.json')).toEqual([FOLDED_PATCHES_PATCH, REDRIVE_CANCELLED_PATCH]);
    // The second fold takes those too: a saga started now records one marker, whatever its shape.
    for (const shape of REGISTERS_SHAPES) expect(patchesOf(`${shape}.json`), shape).toEqual([FOLDED_AGAIN_PATCH]);
    // The last order saga recorded before the fold: five markers (and five TemporalChangeVersion upserts) where one now does.
    expect(patchesOf('pre-folded-gate-steps-recorded.json')).toEqual([GATE_PATCH, PLAN_BEFORE_CANCEL_PATCH, MEMO_STEPS_PATCH, STEP_HEARTBEAT_PATCH, FORWARD_PATCH]);
  });

  it('hold the current shapes as Temporal stores them: every payload with data encrypted, but search attributes and SDK markers', () => {
    for (const file of files.filter((f) => /^(gate|by-type|purge)-/.test(f))) {
      const clear: string[] = [];
      let encrypted = 0;
      const visit = (value: unknown, at: string): void => {
        if (Array.isArray(value)) value.forEach((v) => visit(v, at));
        else if (value && typeof value === 'object') {
          const { metadata, data } = value as { metadata?: { encoding?: string }; data?: string };
          if (metadata?.encoding && data) {
            const encoding = Buffer.from(metadata.encoding, 'base64').toString();
            if (encoding === 'binary/encrypted') encrypted++;
            else if (!/searchAttributes|markerRecordedEventAttributes\.details\.(patch-data|data)/.test(at)) clear.push(`${at}: ${encoding}`);
          }
          for (const [k, v] of Object.entries(value)) visit(v, `${at}.${k}`);
        }
      };
      visit(JSON.parse(readFileSync(path.join(dir, file), 'utf8')), '');
      expect(clear, file).toEqual([]);
      expect(encrypted, file).toBeGreaterThan(3);
    }
  });

  it.each(files)('replay %s without a determinism error', async (file) => {
    const history = historyFromJSON(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));

    // The workers' data converter: histories from before encryption pass through it unchanged.
    const replay = Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') }, dataConverter: createDataConverter(parseCodecKeys(TEST_CODEC_KEYS)) }, history);

    await expect(replay).resolves.toBeUndefined();
  });
});

// A worker that traces bundles the OpenTelemetry workflow interceptors too (src/worker.ts). They add
// headers to the commands, never commands: every saga, started with tracing on or off, replays on a
// worker with it on (and the histories above, recorded without it, show the other way round), but
// one shape of an earlier version, below.
/**
 * A saga of before redrive-of-cancelled-saga whose redrive failed at once with its cancellation,
 * recorded on a worker that does not trace: that failure and the saga's next commands came in one
 * workflow task, and the interceptors' promise steps around an update's answer put them in the other
 * order. It replays above, on a worker like the one that ran it. Since the patch a redrive is
 * answered only once the saga has moved on (never in a task with commands of its own), as
 * gate-cancelled-redriven and gate-redriven replay here.
 */
const UNTRACED_ONLY = ['pre-redrive-of-cancelled-gate-cancelled-redriven.json'];

describe('recorded saga histories on a worker that traces', () => {
  let codePath: string;

  beforeAll(async () => {
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, '../../src/workflows'),
      failureConverterPath: FAILURE_CONVERTER_PATH,
      workflowInterceptorModules: [...WORKFLOW_INTERCEPTOR_MODULES, ...tracingWorkflowInterceptorModules()],
      // webpack's progress is noise here; its errors are not.
      logger: { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: console.error },
    });
    const dirOfBundle = mkdtempSync(path.join(tmpdir(), 'rs-traced-bundle-'));
    codePath = path.join(dirOfBundle, 'workflow-bundle.js');
    writeFileSync(codePath, code);
    return () => rmSync(dirOfBundle, { recursive: true, force: true });
  }, 120_000);

  const tracedReplay = (file: string) => {
    const history = historyFromJSON(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));
    const spans = new InMemorySpanExporter();
    return Worker.runReplayHistory(
      {
        workflowBundle: { codePath },
        dataConverter: createDataConverter(parseCodecKeys(TEST_CODEC_KEYS)),
        sinks: { exporter: makeWorkflowExporter(new SimpleSpanProcessor(spans), Resource.default()) },
      },
      history,
    );
  };

  it.each(files.filter((f) => !UNTRACED_ONLY.includes(f)))('replay %s without a determinism error', async (file) => {
    await expect(tracedReplay(file)).resolves.toBeUndefined();
  });

  it.each(UNTRACED_ONLY)('do not replay %s, its failed redrive answered in another order', async (file) => {
    await expect(tracedReplay(file)).rejects.toThrow(/Nondeterminism error: UpsertWorkflowSearchAttributesMachine does not handle HistoryEvent\(id: \d+, WorkflowExecutionUpdateCompleted\)/);
  });
});

// A worker rolled back to the release before folded-patches runs its own workflow code (a copy in
// test/fixtures/before-folded-patches). It still replays the sagas it started. A saga started since
// recorded only the folded-patches marker: that code, asking for gate-before-workflow and finding no
// marker of it, takes the path of sagas from before the gate (legacySaga), whose first workflow task
// fails on the saga's input; the SDK would refuse the unknown marker anyway (only a deprecated one
// may go unasked). A failed workflow task is retried, not the saga failed: it waits for a worker of
// this release or later. Bundled without the failure converter, so the failure can be read here.
describe('recorded saga histories on a worker rolled back to the release before folded-patches', () => {
  let codePath: string;

  beforeAll(async () => {
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, '../fixtures/before-folded-patches'),
      workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
      logger: { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: console.error },
    });
    const dirOfBundle = mkdtempSync(path.join(tmpdir(), 'rs-previous-bundle-'));
    codePath = path.join(dirOfBundle, 'workflow-bundle.js');
    writeFileSync(codePath, code);
    return () => rmSync(dirOfBundle, { recursive: true, force: true });
  }, 120_000);

  const replay = (file: string) =>
    Worker.runReplayHistory(
      { workflowBundle: { codePath }, dataConverter: createDataConverter(parseCodecKeys(TEST_CODEC_KEYS)) },
      historyFromJSON(JSON.parse(readFileSync(path.join(dir, file), 'utf8'))),
    );

  it.each(FOLDED_SHAPES.map((shape) => `pre-folded-${shape}.json`))('replay %s, a saga it started, without a determinism error', async (file) => {
    await expect(replay(file)).resolves.toBeUndefined();
  });

  it.each(FOLDED_SHAPES.flatMap((shape) => [`pre-write-registers-${shape}.json`, `${shape}.json`]))('cannot replay %s, a saga started since: it takes it for a saga from before the gate, and its workflow task fails', async (file) => {
    await expect(replay(file)).rejects.toThrow(/^Replay failed due workflow task failure[\s\S]* at legacySaga /);
  });
});
