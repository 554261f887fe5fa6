import { describe, expect, it } from 'vitest';
import { ndjsonLines } from '../../../src/omni-client/transport/ndjson.js';
import { normalizeEndpoint } from '../../../src/omni-client/transport/endpoint.js';
import { jitteredBackoff } from '../../../src/omni-client/transport/retry.js';

describe('normalizeEndpoint (like the Go client)', () => {
  it.each([
    ['https://omni.example.com', 'https://omni.example.com:443', true],
    ['https://omni.example.com:8443/', 'https://omni.example.com:8443', true],
    ['http://omni.local', 'http://omni.local:80', false],
    ['grpc://10.0.0.5:8090', 'http://10.0.0.5:8090', false],
    ['grpc://[::1]:8090', 'http://[::1]:8090', false],
    ['HTTPS://Omni.Example.com', 'https://omni.example.com:443', true],
  ])('%s -> %s', (raw, origin, isTls) => {
    expect(normalizeEndpoint(raw)).toEqual({ origin, tls: isTls });
  });

  it.each(['omni.example.com', 'omni.example.com:443', 'ftp://x', '', 'https://'])(
    'refuses %j as a configuration error',
    (raw) => {
      expect(() => normalizeEndpoint(raw)).toThrow(expect.objectContaining({ code: 'STUB_CONFIG' }));
    },
  );
});

describe('an endpoint with a path', () => {
  it.each([
    ['https://omni.example.com/some/path', '/some/path'],
    ['https://admin:pw@omni.example.com/api', '/api'],
    ['http://127.0.0.1:8080/?x=1', '?x=1'],
    ['grpc://10.0.0.5:8090/omni#top', '/omni#top'],
  ])('%s is refused, naming %s (Omni is at the root; nothing is dropped silently)', (raw, part) => {
    let err: unknown;
    try {
      normalizeEndpoint(raw);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'STUB_CONFIG' });
    expect((err as Error).message).toContain(JSON.stringify(part));
    expect((err as Error).message).not.toContain('pw');
  });
});

describe('jitteredBackoff', () => {
  it('doubles, caps, and stays within [d/2, d]', () => {
    const b = { baseMs: 100, capMs: 1000 };
    expect([0, 1, 2, 3, 4, 10, 100].map((n) => jitteredBackoff(n, b, () => 0))).toEqual([
      50, 100, 200, 400, 500, 500, 500,
    ]);
    expect([0, 1, 2, 3, 4].map((n) => jitteredBackoff(n, b, () => 1))).toEqual([100, 200, 400, 800, 1000]);
  });
});

describe('ndjsonLines', () => {
  async function* chunks(parts: (string | Buffer)[]): AsyncGenerator<string | Buffer> {
    for (const p of parts) yield p;
  }
  it('joins lines split across chunks, skips blank lines, keeps a last line without newline', async () => {
    const euro = Buffer.from('€', 'utf8');
    const parts = [
      Buffer.from('{"a":'),
      Buffer.from('1}\n\n{"b":"'),
      euro.subarray(0, 1),
      euro.subarray(1),
      Buffer.from('"}\n{"c":3}'),
    ];
    const out: string[] = [];
    for await (const l of ndjsonLines(chunks(parts))) out.push(l);
    expect(out).toEqual(['{"a":1}', '{"b":"€"}', '{"c":3}']);
  });
});
