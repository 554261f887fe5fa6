import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { colorWanted, createLogger } from '../src/log.js';
import { requireBuiltCli } from './helpers/cli-process.js';

function capture(): { stream: PassThrough; text: () => string; lines: () => Record<string, unknown>[] } {
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  return {
    stream,
    text: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('createLogger', () => {
  it('writes JSON to the stream it is given (not to the process stderr) and redacts secrets by path', async () => {
    const c = capture();
    const log = createLogger({ format: 'json', destination: c.stream });
    log.info(
      { password: 'hunter2', bmc: { password: 'hunter3', address: '10.0.0.1' }, serviceAccountKey: 'c2VjcmV0' },
      'hello',
    );
    await new Promise((r) => setImmediate(r));
    const [line] = c.lines();
    expect(line?.['msg']).toBe('hello');
    expect(line?.['password']).toBe('[redacted]');
    expect((line?.['bmc'] as Record<string, unknown>)['password']).toBe('[redacted]');
    expect((line?.['bmc'] as Record<string, unknown>)['address']).toBe('10.0.0.1');
    expect(JSON.stringify(line)).not.toMatch(/hunter|c2VjcmV0/);
  });
});

describe('JSON lines a log collector reads', () => {
  it("pino's level names and ISO 8601 times, not numbers and epoch milliseconds", async () => {
    const c = capture();
    const log = createLogger({ format: 'json', destination: c.stream, level: 'debug' });
    log.info('one');
    log.warn('two');
    log.debug('three');
    await new Promise((r) => setImmediate(r));
    expect(c.lines().map((l) => l['level'])).toEqual(['info', 'warn', 'debug']);
    for (const l of c.lines()) {
      expect(l['time']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Math.abs(Date.parse(l['time'] as string) - Date.now())).toBeLessThan(60_000);
    }
  });
});

describe('log lines carry untrusted text inertly (design rule 13)', () => {
  const HOSTILE = 'm-1\x1b[2J\x1b[H\x1b]0;pwned\x07\r\nstub-provider: done, nothing to do [OK]\u202e\u009b';
  /** pino-pretty's own colours, the only escape sequences allowed on the stream. */
  const SGR = /\x1b\[[0-9;]*m/g; // eslint-disable-line no-control-regex

  it('pretty: the message, every value and every key escaped; no forged line, no escape sequence but colours', () => {
    const c = capture();
    const log = createLogger({ format: 'pretty', destination: c.stream });
    log.warn(
      { resource: HOSTILE, labels: { [HOSTILE]: HOSTILE }, finalizers: [HOSTILE], err: `Omni said: ${HOSTILE}` },
      `failed: ${HOSTILE}`,
    );
    const text = c.text().replace(SGR, '');
    expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]/); // eslint-disable-line no-control-regex
    expect(text.split('\n').some((l) => l.trim().startsWith('stub-provider: done'))).toBe(false);
    expect(text).toContain(
      'm-1\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\r\\nstub-provider: done, nothing to do [OK]\\u202e\\x9b',
    );
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

describe('pretty lines for a person', () => {
  const SGR = /\x1b\[[0-9;]*m/; // eslint-disable-line no-control-regex

  it('one line per entry, whatever the fields', () => {
    const c = capture();
    const log = createLogger({ format: 'pretty', destination: c.stream, color: false });
    log.info(
      { providerId: 'bare-metal', endpoint: 'https://omni.example.com', nested: { a: [1, 2] } },
      'preflight passed',
    );
    log.warn({ kind: 'InfraMachine', id: 'm-1', reason: 'waits for Omni' }, 'blocked');
    const lines = c.text().trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      new RegExp(
        String.raw`^\[\d\d:\d\d:\d\d\] INFO: preflight passed ` +
          String.raw`\{"providerId":"bare-metal","endpoint":"https:\/\/omni.example.com","nested":\{"a":\[1,2\]\}\}$`,
      ),
    );
    expect(lines[1]).toMatch(/WARN: blocked \{"kind":"InfraMachine","id":"m-1","reason":"waits for Omni"\}$/);
  });

  it('colours unless NO_COLOR is set (to anything but the empty string) or color is false', () => {
    const lineWith = (o: { color?: boolean }) => {
      const c = capture();
      createLogger({ format: 'pretty', destination: c.stream, ...o }).info('hello');
      return c.text();
    };
    const saved = process.env.NO_COLOR;
    try {
      delete process.env.NO_COLOR;
      expect(lineWith({})).toMatch(SGR);
      process.env.NO_COLOR = '';
      expect(lineWith({})).toMatch(SGR);
      process.env.NO_COLOR = '1';
      expect(lineWith({})).not.toMatch(SGR);
      expect(lineWith({ color: true })).toMatch(SGR);
      delete process.env.NO_COLOR;
      expect(lineWith({ color: false })).not.toMatch(SGR);
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = saved;
    }
    expect(colorWanted({})).toBe(true);
    expect(colorWanted({ NO_COLOR: 'yes' })).toBe(false);
  });
});

describe('what a logger loads', () => {
  requireBuiltCli();
  it('JSON logs never load pino-pretty; the first pretty logger does', () => {
    // In a process of its own (the built module): what a Job's run loads at start-up.
    const logModule = pathToFileURL(join(process.cwd(), 'dist/src/log.js')).href;
    const script = [
      "import { createRequire } from 'node:module';",
      `const { createLogger } = await import(${JSON.stringify(logModule)});`,
      'const cache = createRequire(import.meta.url).cache;',
      "const pretty = () => Object.keys(cache).some((k) => k.includes('/node_modules/pino-pretty/'));",
      "createLogger({ format: 'json', destination: process.stderr });",
      'const afterJson = pretty();',
      "createLogger({ format: 'pretty', destination: process.stderr });",
      'console.log(JSON.stringify({ afterJson, afterPretty: pretty() }));',
    ].join('\n');
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual({ afterJson: false, afterPretty: true });
  });
});
