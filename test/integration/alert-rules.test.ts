/**
 * The alerting rules an operator loads (docs/observability/prometheus-alerts.yml), read by Prometheus's
 * own tool (`scripts/ensure-promtool` finds or builds it): `promtool check rules` parses every
 * expression and template, and `promtool test rules` runs test/observability/alerts.promtool.yml through
 * Prometheus's rule engine, where each alert must fire on the pattern docs/operations.md says it means,
 * with its labels and annotations filled in, and stay quiet on the series beside it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ALERTS } from '../helpers/observability-docs';

const ROOT = path.resolve(__dirname, '../..');
const RULES = 'docs/observability/prometheus-alerts.yml';
const TESTS = 'test/observability/alerts.promtool.yml';

/** Runs promtool; resolves with its exit code and output (it exits 1 when a check or test fails). */
async function promtool(binary: string, args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(binary, args, { cwd: ROOT });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('the alerting rules, in Prometheus', () => {
  let binary: string;

  beforeAll(() => {
    // The first run on a machine builds promtool from its Go module (minutes); later ones reuse .tools/bin.
    binary = execFileSync(path.join(ROOT, 'scripts/ensure-promtool'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  }, 900_000);

  it('parse: every expression and annotation template', async () => {
    const { code, output } = await promtool(binary, ['check', 'rules', RULES]);
    expect(output).toContain(`SUCCESS: ${ALERTS.groups.flatMap((g) => g.rules).length} rules found`);
    expect(code).toBe(0);
  });

  it('fire on what each one means, and only then', async () => {
    const { code, output } = await promtool(binary, ['test', 'rules', TESTS]);
    expect(output, output).toContain('SUCCESS');
    expect(code, output).toBe(0);
  });

  it('each have a case that fires them and one, earlier, that does not', () => {
    const { tests } = parse(readFileSync(path.join(ROOT, TESTS), 'utf8')) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] };
    const cases = tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of ALERTS.groups.flatMap((g) => g.rules)) {
      const of = cases.filter((c) => c.alertname === alert);
      expect(of.some((c) => c.exp_alerts.length > 0), `${alert} fires in a case`).toBe(true);
      expect(of.some((c) => c.exp_alerts.length === 0), `${alert} is quiet in a case`).toBe(true);
    }
  });
});
