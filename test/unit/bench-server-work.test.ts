/**
 * The benchmark's reading of the Temporal server's own counters (bench/lib/server-work.ts): what
 * saga-throughput prints as the server's work per workflow rests on it.
 */
import { describe, expect, it } from 'vitest';
import { counterDelta, parseServerCounters, serverWorkText } from '../../bench/lib/server-work';

// Lines as the dev server (Temporal CLI 1.5, server 1.29) prints them.
const TEXT = `# HELP persistence_requests persistence_requests counter
# TYPE persistence_requests counter
persistence_requests{namespace="default",operation="UpdateWorkflowExecution",service_name="history"} 40
persistence_requests{namespace="default",operation="UpdateWorkflowExecution",service_name="matching"} 2
persistence_requests{namespace="temporal_system",operation="UpdateWorkflowExecution",service_name="history"} 7
# HELP service_requests service_requests counter
# TYPE service_requests counter
service_requests{namespace="default",operation="RespondActivityTaskCompleted",service_name="frontend"} 12
service_requests{namespace="_unknown_",operation="GetSystemInfo",service_name="frontend"} 1
# HELP service_pending_requests service_pending_requests counter
# TYPE service_pending_requests counter
service_pending_requests{namespace="default",operation="PollActivityTaskQueue",service_name="frontend"} 3
# HELP task_requests task_requests counter
# TYPE task_requests counter
task_requests{namespace="default",operation="TransferActiveTaskActivity",service_name="history",task_type="TransferActiveTaskActivity"} 3
# HELP command command counter
# TYPE command command counter
command{commandType="ScheduleActivityTask",namespace="default",operation="RespondWorkflowTaskCompleted",service_name="history"} 9
# HELP event_blob_size event_blob_size histogram
# TYPE event_blob_size histogram
event_blob_size_bucket{namespace="default",operation="RespondWorkflowTaskCompleted",service_name="history",le="1024"} 5
event_blob_size_sum{namespace="default",operation="RespondWorkflowTaskCompleted",service_name="history"} 4096
event_blob_size_count{namespace="default",operation="RespondWorkflowTaskCompleted",service_name="history"} 5
# HELP persistence_latency persistence_latency histogram
# TYPE persistence_latency histogram
persistence_latency_sum{namespace="default",operation="UpdateWorkflowExecution",service_name="history"} 0.25
`;

describe('the server counters the benchmark reads', () => {
  it("keeps the namespace's requests, persistence calls, history tasks and commands, by service and operation, and leaves out the rest", () => {
    expect(Object.fromEntries(parseServerCounters(TEXT, 'default'))).toEqual({
      'persistence_requests history UpdateWorkflowExecution': 40,
      'persistence_requests matching UpdateWorkflowExecution': 2,
      'service_requests frontend RespondActivityTaskCompleted': 12,
      'task_requests history TransferActiveTaskActivity': 3,
      'command history ScheduleActivityTask': 9,
    });
  });

  it('gives what moved between two readings, and nothing for what stood still', () => {
    const before = parseServerCounters(TEXT, 'default');
    const after = parseServerCounters(TEXT.replace('"history"} 40', '"history"} 52'), 'default');
    expect(Object.fromEntries(counterDelta(before, after))).toEqual({ 'persistence_requests history UpdateWorkflowExecution': 12 });
  });

  it('names each counter where the two kinds differ, per workflow, largest difference first', () => {
    const saga = {
      workflows: 10,
      counters: new Map([
        ['persistence_requests history UpdateWorkflowExecution', 120],
        ['service_requests frontend RecordActivityTaskHeartbeat', 30],
        ['service_requests frontend StartWorkflowExecution', 10],
      ]),
    };
    const hand = { workflows: 20, counters: new Map([['persistence_requests history UpdateWorkflowExecution', 180], ['service_requests frontend StartWorkflowExecution', 20]]) };
    const text = serverWorkText('saga', saga, 'hand', hand);
    expect(text).toContain('saga: 4.0 requests (frontend 4.0, history 0.0, matching 0.0), 12.0 persistence calls');
    expect(text).toMatch(/differ.*: history UpdateWorkflowExecution \(persistence calls\) 12\.0 against 9\.0, frontend RecordActivityTaskHeartbeat \(requests\) 3\.0 against 0\.0\.$/);
    expect(text).not.toContain('StartWorkflowExecution (requests) 1.0');
  });
});
