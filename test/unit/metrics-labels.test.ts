import { describe, expect, it } from 'vitest';
import { SagaMetrics } from '../../src/metrics';
import { intentKey } from '../../src/rms';
import { sagaTypes, sagaTypesWithSimulations } from '../fixtures/orders';

/**
 * The only label names a metric of ours may carry: each holds a value from a bounded set (a
 * registered saga type, a declared step or compensation, an answer, an outcome, an activity name).
 * A new label means a new line here, after asking whether its values could hold an intent key, an
 * idempotency key, a workflow id, a customer or any other request data.
 */
const ALLOWED_LABELS = new Set(['saga_type', 'answer', 'outcome', 'step', 'compensation', 'activity']);

/** Every metric registered, with its type and label names. */
function registered(metrics: SagaMetrics) {
  return metrics.registry.getMetricsAsArray().map((m) => {
    const { name, labelNames } = m as unknown as { name: string; labelNames: string[] };
    return { name, type: String(m.type), labelNames };
  });
}

/** The label sets of every sample in the registry's exposition (what a scrape would read). */
async function sampleLabels(metrics: SagaMetrics): Promise<Record<string, string>[]> {
  const json = await metrics.registry.getMetricsAsJSON();
  return json.flatMap((m) => m.values.map((v) => Object.fromEntries(Object.entries(v.labels).map(([k, val]) => [k, String(val)]))));
}

describe('the metrics', () => {
  it('carry no label outside the allow-list, in either set of saga types', () => {
    for (const types of [sagaTypes, sagaTypesWithSimulations]) {
      const all = registered(new SagaMetrics({ types }));
      expect(all.length).toBeGreaterThan(0);
      for (const { name, labelNames } of all) {
        for (const label of labelNames) expect(ALLOWED_LABELS.has(label), `${name} has the label ${label}`).toBe(true);
      }
    }
  });

  it('are named by Prometheus conventions: saga_ prefix, _total counters, histograms in seconds', () => {
    for (const { name, type } of registered(new SagaMetrics({ types: sagaTypes }))) {
      expect(name).toMatch(/^saga_[a-z_]+$/);
      if (type === 'counter') expect(name).toMatch(/_total$/);
      if (type === 'histogram') expect(name).toMatch(/_seconds$/);
    }
  });

  it('count hostile or unregistered label values as unknown, never as given', async () => {
    const metrics = new SagaMetrics({ types: sagaTypes });
    const key = intentKey('order', { customer: 'ada@example.com' }, Buffer.alloc(32, 7));
    const workflowId = 'order-cart-ada@example.com';

    metrics.gateAnswered(workflowId, 'SUCCESS', 0.01);
    metrics.gateAnswered('order', `DUPLICATE ${key}`, 0.01);
    metrics.stepAttempted('order', 'ada@example.com', 'succeeded');
    metrics.compensationAttempted('order', 'chargePayment', 'succeeded');
    metrics.fencedOut('order', key);
    metrics.sagaEnded('order', 'ada@example.com');
    metrics.leaseTaken('booking:ada@example.com');
    metrics.leaseLost(key);

    const values = (await sampleLabels(metrics)).flatMap((labels) => Object.values(labels));
    for (const value of values) {
      expect(value).not.toContain('ada');
      expect(value).not.toContain(key.slice(6));
    }
    expect(values).toContain('unknown');
    // The intent key's scope names the saga type, and that is all of it that is kept.
    expect(await sampleLabels(metrics)).toContainEqual({ saga_type: 'order' });
  });

  it('keep the declared steps and compensations of a registered type as they are', async () => {
    const metrics = new SagaMetrics({ types: sagaTypes });

    metrics.stepAttempted('order', 'chargePayment', 'rejected');
    metrics.compensationAttempted('order', 'refundPayment', 'succeeded');
    metrics.compensationAttempted('order', 'undoEntity', 'succeeded');

    const labels = await sampleLabels(metrics);
    expect(labels).toContainEqual({ saga_type: 'order', step: 'chargePayment', outcome: 'rejected' });
    expect(labels).toContainEqual({ saga_type: 'order', compensation: 'refundPayment', outcome: 'succeeded' });
    expect(labels).toContainEqual({ saga_type: 'order', compensation: 'undoEntity', outcome: 'succeeded' });
  });
});
