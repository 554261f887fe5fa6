import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';

function capture(): { stream: PassThrough; text: () => string; lines: () => Record<string, unknown>[] } {
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  return {
    stream,
    text: () => chunks.join(''),
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

describe('log lines carry untrusted text inertly (design rule 13)', () => {
  const HOSTILE = 'm-1\x1b[2J\x1b[H\x1b]0;pwned\x07\r\nstub-provider: done, nothing to do [OK]\u202e\u009b';
  /** pino-pretty's own colours, the only escape sequences allowed on the stream. */
  const SGR = /\x1b\[[0-9;]*m/g; // eslint-disable-line no-control-regex

  it('pretty: the message, every value and every key are escaped; no forged line, no escape sequence but the colours', () => {
    const c = capture();
    const log = createLogger({ format: 'pretty', destination: c.stream });
    log.warn({ resource: HOSTILE, labels: { [HOSTILE]: HOSTILE }, finalizers: [HOSTILE], err: `Omni said: ${HOSTILE}` }, `failed: ${HOSTILE}`);
    const text = c.text().replace(SGR, '');
    expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]/); // eslint-disable-line no-control-regex
    expect(text.split('\n').some((l) => l.trim().startsWith('stub-provider: done'))).toBe(false);
    expect(text).toContain('m-1\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\r\\nstub-provider: done, nothing to do [OK]\\u202e\\x9b');
  });

  it('json: still one JSON line with the same values, C1 and bidi controls written as \\uXXXX', () => {
    const c = capture();
    const log = createLogger({ format: 'json', destination: c.stream });
    log.info({ resource: HOSTILE }, HOSTILE);
    const raw = c.text();
    expect(raw.trimEnd().split('\n')).toHaveLength(1);
    expect(raw).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/); // eslint-disable-line no-control-regex
    const line = JSON.parse(raw) as Record<string, unknown>;
    expect(line['msg']).toBe(HOSTILE);
    expect(line['resource']).toBe(HOSTILE);
  });
});
