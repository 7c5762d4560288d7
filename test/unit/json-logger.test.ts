import { describe, expect, it } from 'vitest';
import { jsonLogger } from '../../src/logging/json-logger';

describe('the JSON log', () => {
  it('writes one JSON line per entry at or above its level, with time, level, message and attributes', () => {
    const lines: string[] = [];
    const log = jsonLogger('INFO', (line) => lines.push(line));

    log.debug('not written', { workflowId: 'order-a' });
    log.info('saga step succeeded', { workflowId: 'order-a', sagaType: 'order', intentKey: 'order:abc', step: 'chargePayment' });
    log.warn('Activity failed', { workflowId: 'order-a', taskToken: 'opaque', error: new TypeError('boom'), attempt: 2n });

    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line.endsWith('\n') && !line.slice(0, -1).includes('\n')).toBe(true);
    const [info, warn] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(info).toEqual({ time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), level: 'INFO', msg: 'saga step succeeded', workflowId: 'order-a', sagaType: 'order', intentKey: 'order:abc', step: 'chargePayment' });
    // An error as its name and message, a bigint as text, the SDK's opaque task token left out.
    expect(warn).toEqual({ time: expect.any(String), level: 'WARN', msg: 'Activity failed', workflowId: 'order-a', error: { name: 'TypeError', message: 'boom' }, attempt: '2' });
  });

  it('writes nothing below WARN when the level is WARN', () => {
    const lines: string[] = [];
    const log = jsonLogger('WARN', (line) => lines.push(line));

    log.info('saga ended COMPLETED', { workflowId: 'order-a' });

    expect(lines).toEqual([]);
  });
});
