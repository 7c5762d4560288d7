/**
 * What one workflow costs the services it runs on: Temporal's work, read from the history of a few
 * completed workflows, and PostgreSQL's, from the counters of pg_stat_database (saga-throughput's
 * cost model).
 */
import type { Client } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { postgresDatabaseClient } from './environment';
import { formatNumber } from './report';
import { spread, type Spread } from './stats';

const EventType = temporal.api.enums.v1.EventType;
/** The marker the TypeScript SDK records for each local activity. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** What one workflow's history says it cost Temporal. */
export interface HistoryCost {
  /** Every event of the history. */
  events: number;
  /** Workflow tasks the workers completed (WorkflowTaskCompleted events). */
  workflowTasks: number;
  /** Activity tasks (ActivityTaskScheduled events). */
  activityTasks: number;
  /** Of those, the ones with a heartbeat timeout: they heartbeat, but heartbeats leave no event. */
  heartbeatingActivities: number;
  /** Local activities (their markers). */
  localActivities: number;
}

/** The cost of the completed workflow `workflowId`, from its history. */
export async function historyCost(client: Client, workflowId: string): Promise<HistoryCost> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const ofType = (type: temporal.api.enums.v1.EventType) => events.filter((e) => e.eventType === type);
  const scheduled = ofType(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED);
  return {
    events: events.length,
    workflowTasks: ofType(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED).length,
    activityTasks: scheduled.length,
    heartbeatingActivities: scheduled.filter((e) => (optionalTsToMs(e.activityTaskScheduledEventAttributes?.heartbeatTimeout) ?? 0) > 0).length,
    localActivities: ofType(EventType.EVENT_TYPE_MARKER_RECORDED).filter((e) => e.markerRecordedEventAttributes?.markerName === LOCAL_ACTIVITY_MARKER).length,
  };
}

/** Each field of {@link HistoryCost} across a sample of workflows. */
export type HistorySample = { workflows: number } & Record<keyof HistoryCost, Spread>;

/** The history costs of the last `count` of `workflowIds` (one at a time: a few reads, not a load). */
export async function sampleHistoryCost(client: Client, workflowIds: string[], count: number): Promise<HistorySample> {
  const costs: HistoryCost[] = [];
  for (const id of workflowIds.slice(-count)) costs.push(await historyCost(client, id));
  const field = (key: keyof HistoryCost) => spread(costs.map((c) => c[key]));
  return {
    workflows: costs.length,
    events: field('events'),
    workflowTasks: field('workflowTasks'),
    activityTasks: field('activityTasks'),
    heartbeatingActivities: field('heartbeatingActivities'),
    localActivities: field('localActivities'),
  };
}

/** A sample's median, and its range when the workflows differed. */
function medianText(s: Spread): string {
  return s.min === s.max ? formatNumber(s.median, 0) : `${formatNumber(s.median, 1)} (${formatNumber(s.min, 0)}–${formatNumber(s.max, 0)})`;
}

/** `sample` in words, e.g. `31 history events, 9 workflow tasks, 5 activity tasks (2 with a heartbeat timeout), 2 local activities`. */
export function historyCostText(sample: HistorySample): string {
  return (
    `${medianText(sample.events)} history events, ${medianText(sample.workflowTasks)} workflow tasks, ` +
    `${medianText(sample.activityTasks)} activity tasks (${medianText(sample.heartbeatingActivities)} with a heartbeat timeout), ${medianText(sample.localActivities)} local activities`
  );
}

/** Counters of one database from pg_stat_database. */
export interface DatabaseCounters {
  /** xact_commit + xact_rollback: transactions, each statement outside BEGIN … COMMIT being one. */
  transactions: number;
  /** Sessions opened (connections), PostgreSQL 14 and later. */
  sessions: number;
}

/**
 * How long to wait before reading counters that must include everything done so far: PostgreSQL
 * (15) flushes a busy backend's counters at most once a second, and an idle one's within 10 s
 * (PGSTAT_IDLE_INTERVAL).
 */
export const PG_STATS_SETTLE_MS = 11_000;

/**
 * A reader of `pg_stat_database` for the database of `databaseUrl`. It connects to the `postgres`
 * database, so that its own queries and session are not counted in the one it reads.
 */
export async function databaseCounterReader(databaseUrl: string): Promise<{ read: () => Promise<DatabaseCounters>; close: () => Promise<void> }> {
  const database = new URL(databaseUrl).pathname.slice(1);
  const client = postgresDatabaseClient(databaseUrl);
  client.on('error', () => undefined);
  await client.connect();
  return {
    read: async () => {
      const { rows } = await client.query<{ transactions: string; sessions: string }>(
        'select xact_commit + xact_rollback as transactions, sessions from pg_stat_database where datname = $1',
        [database],
      );
      if (!rows[0]) throw new Error(`pg_stat_database has no row for ${database}`);
      return { transactions: Number(rows[0].transactions), sessions: Number(rows[0].sessions) };
    },
    close: () => client.end().catch(() => undefined),
  };
}
