import { describe, expect, it } from 'vitest';
import { SagaMetrics } from '../../src/metrics';

import { ALERTS, DASHBOARD, EXPRESSIONS, labelsUsed, seriesOf } from '../helpers/observability-docs';
import { sagaTypes } from '../fixtures/orders';

describe('the dashboard and the alerting rules', () => {
  const metrics = new SagaMetrics({ types: sagaTypes });
  const registered = metrics.registry.getMetricsAsArray().map((m) => m as unknown as { name: string; type: string; labelNames: string[] });
  const series = new Set(registered.flatMap(({ name, type }) => (String(type) === 'histogram' ? [`${name}_bucket`, `${name}_count`, `${name}_sum`] : [name])));
  const labels = new Set(registered.flatMap((m) => m.labelNames));

  it('give every panel and rule an expression', () => {
    expect(DASHBOARD.panels.filter((p) => p.type !== 'row').every((p) => (p.targets ?? []).length > 0)).toBe(true);
    expect(ALERTS.groups.flatMap((g) => g.rules).length).toBeGreaterThan(0);
  });

  it('read only saga_ series that the metrics serve', () => {
    for (const expr of EXPRESSIONS) for (const name of seriesOf(expr, 'saga_')) expect(series, `${name} in ${expr}`).toContain(name);
  });

  it('chart every metric the worker and saga serve serve', () => {
    const read = new Set(EXPRESSIONS.flatMap((e) => seriesOf(e, 'saga_')));
    for (const { name, type } of registered) expect(read, name).toContain(String(type) === 'histogram' ? `${name}_bucket` : name);
  });

  it('group and match saga_ series only by labels those series carry', () => {
    for (const expr of EXPRESSIONS.filter((e) => seriesOf(e, 'saga_').length > 0)) {
      for (const label of labelsUsed(expr)) expect([...labels, 'le'], `${label} in ${expr}`).toContain(label);
    }
  });
});
