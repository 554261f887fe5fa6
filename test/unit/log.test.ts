import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';

function capture(): { stream: PassThrough; lines: () => Record<string, unknown>[] } {
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  return {
    stream,
    lines: () => chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('createLogger', () => {
  it('writes JSON to the stream it is given (not to the process stderr) and redacts secrets by path', async () => {
    const c = capture();
    const log = createLogger({ format: 'json', destination: c.stream });
    log.info({ password: 'hunter2', bmc: { password: 'hunter3', address: '10.0.0.1' }, serviceAccountKey: 'c2VjcmV0' }, 'hello');
    await new Promise((r) => setImmediate(r));
    const [line] = c.lines();
    expect(line?.['msg']).toBe('hello');
    expect(line?.['password']).toBe('[redacted]');
    expect((line?.['bmc'] as Record<string, unknown>)['password']).toBe('[redacted]');
    expect((line?.['bmc'] as Record<string, unknown>)['address']).toBe('10.0.0.1');
    expect(JSON.stringify(line)).not.toMatch(/hunter|c2VjcmV0/);
  });
});
