// A hostile server or a broken proxy between the client and the simulated Omni (docs/design.md
// rules 11 to 13): every answer that is not what the protocol says is a
// ProtocolError naming the call and the endpoint, never data; an error status without Omni's status
// body is never taken for Omni's error (a bare 404 is not NotFound); reads are bounded while they
// arrive; a redirect is a configuration error; the adopted clock offset is bounded.

import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient, type OmniClientOptions } from '../../src/omni-client/client.js';
import { ClockSkewError, ProtocolError, RedirectError, TransportError } from '../../src/omni-client/errors.js';
import { NotFoundError, UnavailableError, type OmniError } from '../../src/omni-api/errors.js';
import { getIfExists } from '../../src/omni-client/read.js';
import { T, type Resource } from '../../src/omni-api/resource.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { bareMetalMachine, machineUuid, providerRegistration } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { noDelay, wireResource } from '../helpers/fake-gateway.js';
import {
  resultOf,
  startTamperProxy,
  writeEndlessly,
  type TamperProxy,
  type TamperRule,
} from '../helpers/tamper-proxy.js';

const ID = 'bare-metal';
const NS = 'infra-provider';
const M0 = machineUuid(0);
const M1 = machineUuid(1);
const IM0 = { namespace: NS, type: T.InfraMachine, id: M0 };
const KiB = 1024;

let sim: Sim;
let proxy: TamperProxy;
let client: OmniClient;
let before: Resource[];
const clients: OmniClient[] = [];

beforeEach(async () => {
  sim = await createSim({
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    resources: [
      ...providerRegistration(ID, { static: true }),
      ...bareMetalMachine(ID, M0, { phase: 'running' }),
      ...bareMetalMachine(ID, M1),
    ],
    faults: {},
  });
  proxy = await startTamperProxy(sim.endpoint);
  client = await clientWith({});
  before = sim.store.all();
});
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  // Nothing a hostile answer caused was written to Omni.
  expect(sim.store.all()).toEqual(before);
  await proxy.close();
  await sim.close();
});

async function clientWith(o: Partial<OmniClientOptions>): Promise<OmniClient> {
  const c = await createOmniClient({
    endpoint: proxy.endpoint,
    key: sim.keys[`infra-provider:${ID}`]!,
    delay: noDelay,
    env: {},
    retries: 0,
    ...o,
  });
  clients.push(c);
  return c;
}

/** The error a call ends in (it must end in one). */
async function failure(p: Promise<unknown>): Promise<Error> {
  const r = await p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  if (r.ok) throw new Error(`expected a failure, got ${JSON.stringify(r.v)?.slice(0, 300)}`);
  return r.e as Error;
}

/** The JSON of a resource as the sim stores it, for answers written by hand. */
function wireOf(id: string, type: string = T.InfraMachine): Record<string, unknown> {
  const r = sim.store.all().find((x) => x.metadata.type === type && x.metadata.id === id);
  if (!r) throw new Error(`no ${type} ${id} in the sim`);
  return wireResource(r);
}

function respond(status: number, body: string | Buffer, headers: Record<string, string> = {}): TamperRule {
  return () => ({
    kind: 'respond',
    write: (res) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(body);
    },
  });
}

/** Rewrites the List of InfraMachines: each resource through `f` (returning a whole line). */
function listLines(f: (resource: Record<string, unknown>, index: number) => string | string[] | null): TamperRule {
  return (r) =>
    r.rpc === 'List'
      ? { kind: 'lines', map: (line, i) => f((resultOf(line) as { resource: Record<string, unknown> }).resource, i) }
      : undefined;
}

const line = (result: unknown) => JSON.stringify({ result });
const withMeta = (w: Record<string, unknown>, md: Record<string, unknown>) => ({
  ...w,
  metadata: { ...(w['metadata'] as object), ...md },
});

function expectProtocol(err: Error, code: string, call: string): void {
  expect(err).toBeInstanceOf(ProtocolError);
  expect((err as ProtocolError).code).toBe(code);
  expect(err.message).toContain(call);
  expect(err.message).toContain(proxy.endpoint);
  expect(exitCodeFor(err)).toBe(5);
}

describe('a malformed List line is an error, never data', () => {
  const cases: [string, (w: Record<string, unknown>) => string][] = [
    ['a result without a resource ({"result":{}})', () => line({})],
    ['a null resource', () => line({ resource: null })],
    ['a null result', () => JSON.stringify({ result: null })],
    ['neither result nor error', () => '{}'],
    ['a JSON array', () => '[1]'],
    ['not JSON', () => '{"result":{"resource":'],
    ['no metadata', (w) => line({ resource: { spec: w['spec'] } })],
    ['no spec', (w) => line({ resource: { metadata: w['metadata'] } })],
    ['an empty ID', (w) => line({ resource: withMeta(w, { id: '' }) })],
    ['no ID at all', (w) => line({ resource: withMeta(w, { id: undefined }) })],
    ['another type', (w) => line({ resource: withMeta(w, { type: T.InfraMachineStatus }) })],
    ['another namespace', (w) => line({ resource: withMeta(w, { namespace: 'infra-provider:bare-metal' }) })],
    ['a version that is not a number', (w) => line({ resource: withMeta(w, { version: 'v7' }) })],
    ['version "undefined" (not stored)', (w) => line({ resource: withMeta(w, { version: 'undefined' }) })],
    ['an unknown phase', (w) => line({ resource: withMeta(w, { phase: 'deleting' }) })],
    [
      'finalizers that are not a list',
      (w) => line({ resource: withMeta(w, { finalizers: 'bare-metal.InfraMachineController' }) }),
    ],
    ['finalizers that are not strings', (w) => line({ resource: withMeta(w, { finalizers: [1] }) })],
    [
      'a label that is not a string',
      (w) => line({ resource: withMeta(w, { labels: { 'omni.sidero.dev/infra-provider-id': 7 } }) }),
    ],
    ['a spec that is not base64', (w) => line({ resource: { ...w, spec: { proto_spec: '%%%' } } })],
  ];
  it.each(cases)('%s', async (_name, bad) => {
    proxy.setRule(listLines((w, i) => (i === 0 ? bad(w) : JSON.stringify({ result: { resource: w } }))));
    const err = await failure(client.state.list(NS, T.InfraMachine));
    expectProtocol(err, 'STUB_PROTOCOL', `/cosi.resource.State/List ${NS}/${T.InfraMachine}/`);
    expect(err.message).toContain('bad answer from Omni');
  });

  it('fields a newer Omni may add are tolerated', async () => {
    proxy.setRule(
      listLines((w) =>
        JSON.stringify({
          result: { resource: { ...withMeta(w, { shiny: { new: true } }), extra: 1 }, more: [] },
          trailer: 'x',
        }),
      ),
    );
    expect((await client.state.list(NS, T.InfraMachine)).map((r) => r.metadata.id)).toEqual([M0, M1]);
  });

  it('an empty List body is no items (how the gateway says so): not an error', async () => {
    proxy.setRule(listLines(() => null));
    expect(await client.state.list(NS, T.InfraMachine)).toEqual([]);
  });

  it('an ID with invalid UTF-8 is refused, not decoded into another ID', async () => {
    const w = wireOf(M0);
    const [head, tail] = JSON.stringify({ result: { resource: withMeta(w, { id: 'XX' }) } }).split('XX') as [
      string,
      string,
    ];
    const bytes = Buffer.concat([
      Buffer.from(head),
      Buffer.from(M0.slice(0, 30)),
      Buffer.from([0xff, 0xfe]),
      Buffer.from(tail),
      Buffer.from('\n'),
    ]);
    proxy.setRule((r) =>
      r.rpc === 'List'
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              res.end(bytes);
            },
          }
        : undefined,
    );
    const err = await failure(client.state.list(NS, T.InfraMachine));
    expectProtocol(err, 'STUB_PROTOCOL', '/cosi.resource.State/List');
    expect(err.message).toContain('not valid UTF-8');
    // The same for a unary answer.
    proxy.setRule((r) =>
      r.rpc === 'Get'
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              res.end(bytes.subarray(10, bytes.length - 2));
            },
          }
        : undefined,
    );
    expectProtocol(
      await failure(client.state.get(IM0)),
      'STUB_PROTOCOL',
      `/cosi.resource.State/Get ${NS}/${T.InfraMachine}/${M0}`,
    );
  });

  it('a lone surrogate escaped in JSON (Omni reads U+FFFD: another ID, another finalizer) is refused too', async () => {
    for (const md of [{ id: `${M0.slice(0, 30)}XX` }, { finalizers: ['someone-elseXX'] }]) {
      proxy.setRule(listLines((w) => line({ resource: withMeta(w, md) }).replace('XX', '\\ud800')));
      const err = await failure(client.state.list(NS, T.InfraMachine));
      expectProtocol(err, 'STUB_PROTOCOL', '/cosi.resource.State/List');
      expect(err.message).toContain('lone surrogate');
    }
    // An escaped pair is a character like any other.
    proxy.setRule(
      listLines((w) => line({ resource: withMeta(w, { labels: { emoji: 'XX' } }) }).replace('XX', '\\ud83d\\ude00')),
    );
    expect((await client.state.list(NS, T.InfraMachine))[0]!.metadata.labels['emoji']).toBe('\u{1f600}');
  });

  it('the same ID twice in one List is STUB_DUPLICATE_ID', async () => {
    proxy.setRule(
      listLines((w, i) => (i === 0 ? [line({ resource: w }), line({ resource: w })] : line({ resource: w }))),
    );
    const err = await failure(client.state.list(NS, T.InfraMachine));
    expectProtocol(err, 'STUB_DUPLICATE_ID', '/cosi.resource.State/List');
    expect(err.message).toContain(M0);
  });

  it('a stream error line without a gRPC status is malformed, not Unknown', async () => {
    proxy.setRule(listLines(() => JSON.stringify({ error: 'boom' })));
    expectProtocol(await failure(client.state.list(NS, T.InfraMachine)), 'STUB_PROTOCOL', '/cosi.resource.State/List');
  });

  it('control characters of a line are escaped in the message', async () => {
    proxy.setRule(listLines(() => '\u001b[2J\u001b[HDeregistration: deregistered'));
    const err = await failure(client.state.list(NS, T.InfraMachine));
    expect(err.message).toContain('\\x1b[2J\\x1b[HDeregistration');
    // eslint-disable-next-line no-control-regex
    expect(err.message).not.toMatch(/[\u0000-\u001f]/);
  });
});

describe('a malformed unary answer is an error, never data', () => {
  it('a Get that answers another ID', async () => {
    proxy.setRule((r) => (r.rpc === 'Get' ? { kind: 'lines', map: (l) => l.replaceAll(M0, M1) } : undefined));
    const err = await failure(client.state.get(IM0));
    expectProtocol(err, 'STUB_PROTOCOL', `/cosi.resource.State/Get ${NS}/${T.InfraMachine}/${M0}`);
    expect(err.message).toContain(`${NS}/${T.InfraMachine}/${M1}, not ${NS}/${T.InfraMachine}/${M0}`);
  });

  it.each([
    ['an empty object', '{}'],
    ['a null resource', '{"resource":null}'],
    ['an empty body', ''],
    ['HTML', '<html>ok</html>'],
    ['a JSON string', '"ok"'],
  ])('a Get answered 200 with %s', async (_n, body) => {
    proxy.setRule(respond(200, body));
    expectProtocol(await failure(client.state.get(IM0)), 'STUB_PROTOCOL', '/cosi.resource.State/Get');
    // getIfExists does not take it for "absent".
    expectProtocol(await failure(getIfExists(client.state, IM0)), 'STUB_PROTOCOL', '/cosi.resource.State/Get');
  });

  it('an Update or Destroy answer of the wrong shape', async () => {
    proxy.setRule(respond(200, '[]'));
    expectProtocol(await failure(client.state.destroy(IM0)), 'STUB_PROTOCOL', '/cosi.resource.State/Destroy');
    proxy.setRule(() => undefined);
    const r = (await client.state.list(NS, T.InfraMachine))[0]!;
    proxy.setRule(respond(200, JSON.stringify({ resource: wireOf(M1) })));
    expectProtocol(await failure(client.state.update(r)), 'STUB_PROTOCOL', '/cosi.resource.State/Update');
  });

  it('a Content-Encoding that was not asked for', async () => {
    proxy.setRule(respond(200, JSON.stringify({ resource: wireOf(M0) }), { 'content-encoding': 'br' }));
    expectProtocol(await failure(client.state.get(IM0)), 'STUB_PROTOCOL', '/cosi.resource.State/Get');
  });
});

describe("an HTTP error status without Omni's status body is never evidence", () => {
  it.each([
    ['an HTML page', '<html><body>404 Not Found</body><hr>nginx</html>'],
    ['an empty body', ''],
    ['JSON without a gRPC code', '{"error":"not found"}'],
    ['an HTTP code in place of a gRPC one', '{"code":404,"message":"Not Found"}'],
    ["a gRPC code that is not 404's", '{"code":13,"message":"internal"}'],
  ])('a 404 with %s is STUB_HTTP_STATUS, not NotFound', async (_n, body) => {
    proxy.setRule(respond(404, body, { 'content-type': 'text/html' }));
    const err = await failure(getIfExists(client.state, IM0));
    expect(err).not.toBeInstanceOf(NotFoundError);
    expectProtocol(err, 'STUB_HTTP_STATUS', `/cosi.resource.State/Get ${NS}/${T.InfraMachine}/${M0}`);
    expect(err.message).toContain('answered HTTP 404 without a gRPC status');
  });

  it("Omni's own 404 (a status body with code 5) is NotFound", async () => {
    proxy.setRule(respond(404, '{"code":5,"message":"Not Found"}'));
    expect(await getIfExists(client.state, IM0)).toBeUndefined();
  });

  it('the snippet of the body is short and escaped', async () => {
    proxy.setRule(
      respond(500, `\u001b]0;owned\u0007\r\nstub-provider: done, nothing to do [OK]${'x'.repeat(5000)}`, {
        'content-type': 'text/plain',
      }),
    );
    const err = await failure(client.state.get(IM0));
    expect(err.message).toContain('\\x1b]0;owned\\x07');
    // eslint-disable-next-line no-control-regex
    expect(err.message).not.toMatch(/[\u0000-\u001f]/);
    expect(err.message.length).toBeLessThan(1200);
  });

  it.each([502, 503, 504])('%i without a body stays a retriable transport error', async (status) => {
    const c = await clientWith({ retries: 2 });
    proxy.setRule(respond(status, '', { 'content-type': 'text/html' }));
    const err = await failure(c.state.get(IM0));
    expect(err).toBeInstanceOf(TransportError);
    expect(err.message).toContain(`answered HTTP ${status} without a gRPC status`);
    expect(proxy.seen.filter((r) => r.rpc === 'Get')).toHaveLength(3);
    expect(exitCodeFor(err)).toBe(5);
  });

  it("a 503 with Omni's status body is still Unavailable", async () => {
    proxy.setRule(respond(503, '{"code":14,"message":"restarting"}'));
    expect(await failure(client.state.get(IM0))).toBeInstanceOf(UnavailableError);
  });

  it("Omni's message is escaped in the error message, kept as sent in omniMessage", async () => {
    proxy.setRule(
      respond(400, JSON.stringify({ code: 9, message: 'conflict\r\n\u001b[1mDeregistration: deregistered' })),
    );
    const err = (await failure(client.state.get(IM0))) as OmniError;
    expect(err.message).toContain('conflict\\r\\n\\x1b[1mDeregistration');
    expect(err.omniMessage).toBe('conflict\r\n\u001b[1mDeregistration: deregistered');
  });
});

describe('a redirect is a configuration error naming where it points', () => {
  it.each([301, 302, 307, 308])('%i', async (status) => {
    proxy.setRule(respond(status, '<html>moved</html>', { location: 'https://login.example.com/sso?next=/api' }));
    const err = await failure(client.state.get(IM0));
    expect(err).toBeInstanceOf(RedirectError);
    expect(err).toMatchObject({ code: 'STUB_REDIRECTED' });
    expect(err.message).toContain(`answered HTTP ${status} redirecting to https://login.example.com/sso?next=/api`);
    expect(exitCodeFor(err)).toBe(2);
    expect(proxy.seen).toHaveLength(1);
  });

  it('control characters in Location are escaped', async () => {
    // Node's server allows bytes 0x80-0xff in a header: a C1 CSI (0x9b) clears a terminal too.
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(302, [['location', Buffer.from('http://x/\x9b2J\x9bH', 'latin1').toString('latin1')]]);
        res.end();
      },
    }));
    const err = await failure(client.state.get(IM0));
    expect(err.message).toContain('redirecting to http://x/\\x9b2J\\x9bH');
  });
});

describe('reads are bounded while they arrive', () => {
  it('a unary body over the cap is refused while it arrives', async () => {
    const c = await clientWith({ limits: { answerBytes: 256 * KiB } });
    let sent: Promise<number> | undefined;
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"resource":{"metadata":{},"spec":{"yaml_spec":"');
        sent = writeEndlessly(res, Buffer.alloc(16 * KiB, 'a'));
      },
    }));
    const err = await failure(c.state.get(IM0));
    expectProtocol(err, 'STUB_ANSWER_TOO_LARGE', '/cosi.resource.State/Get');
    expect(err.message).toContain('the answer is more than 256 KiB');
    // The client hung up: far less than the 64 MiB the writer would have sent.
    expect(await sent).toBeLessThan(16 * 1024 * KiB);
  });

  it('a declared Content-Length over the cap is refused before reading', async () => {
    const c = await clientWith({ limits: { answerBytes: 256 * KiB } });
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(400 * 1024 * KiB) });
        res.write('{');
      },
    }));
    expectProtocol(await failure(c.state.get(IM0)), 'STUB_ANSWER_TOO_LARGE', '/cosi.resource.State/Get');
  });

  it('a gzip answer that inflates beyond the cap (a gzip bomb) is refused, inflating stops at the cap', async () => {
    const c = await clientWith({ limits: { answerBytes: 1024 * KiB } });
    const bomb = gzipSync(
      Buffer.concat([
        Buffer.from('{"resource":{"metadata":{},"spec":{"yaml_spec":"'),
        Buffer.alloc(64 * 1024 * KiB, 'a'),
        Buffer.from('"}}}'),
      ]),
    );
    expect(bomb.length).toBeLessThan(200 * KiB);
    proxy.setRule(respond(200, bomb, { 'content-encoding': 'gzip' }));
    const err = await failure(c.state.get(IM0));
    expectProtocol(err, 'STUB_ANSWER_TOO_LARGE', '/cosi.resource.State/Get');
    expect(err.message).toContain('inflates to more than 1 MiB');
  });

  it('a stream line over the cap is refused while it arrives, plain or gzip', async () => {
    const c = await clientWith({ limits: { lineBytes: 256 * KiB } });
    let sent: Promise<number> | undefined;
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        sent = writeEndlessly(res, Buffer.alloc(16 * KiB, ' '));
      },
    }));
    const err = await failure(c.state.list(NS, T.InfraMachine));
    expectProtocol(err, 'STUB_LINE_TOO_LONG', '/cosi.resource.State/List');
    expect(await sent).toBeLessThan(16 * 1024 * KiB);

    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        res.end(gzipSync(Buffer.alloc(32 * 1024 * KiB, ' ')));
      },
    }));
    expectProtocol(await failure(c.state.list(NS, T.InfraMachine)), 'STUB_LINE_TOO_LONG', '/cosi.resource.State/List');
  });

  it('a gzip stream whose bytes inflate to nothing is bounded too (compressed bytes per line)', async () => {
    const c = await clientWith({ limits: { lineBytes: 64 * KiB } });
    let sent: Promise<number> | undefined;
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        // A gzip header, then empty stored deflate blocks (5 bytes each) that inflate to nothing.
        res.write(Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]));
        sent = writeEndlessly(
          res,
          Buffer.concat(Array.from({ length: 3000 }, () => Buffer.from([0, 0, 0, 0xff, 0xff]))),
        );
      },
    }));
    const err = await failure(c.state.list(NS, T.InfraMachine));
    expectProtocol(err, 'STUB_LINE_TOO_LONG', '/cosi.resource.State/List');
    expect(err.message).toContain('of compressed data');
    expect(await sent).toBeLessThan(16 * 1024 * KiB);
  });

  it('more items in one List than the limit is STUB_LIST_TOO_LONG; as many as the limit is fine', async () => {
    const c2 = await clientWith({ limits: { listItems: 2 } });
    expect(await c2.state.list(NS, T.InfraMachine)).toHaveLength(2);
    const c1 = await clientWith({ limits: { listItems: 1 } });
    const err = await failure(c1.state.list(NS, T.InfraMachine));
    expectProtocol(err, 'STUB_LIST_TOO_LONG', '/cosi.resource.State/List');
    expect(err.message).toContain('more than 1 items in one List');
    expect(err.message).toContain('--max-list-items');
  });

  it('answers read at once share one budget, given back when they are done', async () => {
    const c = await clientWith({ limits: { answerBytes: 256 * KiB, bufferedBytes: 150 * KiB } });
    const half = Buffer.alloc(100 * KiB, 'a');
    let waiting: (() => void)[] = [];
    proxy.setRule((r) =>
      r.rpc === 'Get'
        ? {
            kind: 'respond',
            write: async (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              res.write('{"resource":{"metadata":{},"spec":{"yaml_spec":"');
              res.write(half);
              // Each answer alone is within its cap; both hold 100 KiB before either can end: 200 KiB > 150 KiB.
              await new Promise<void>((resolve) => {
                waiting.push(resolve);
                if (waiting.length === 2) for (const w of waiting.splice(0)) w();
              });
              res.write(half);
              res.end('"}}}');
            },
          }
        : undefined,
    );
    const [a, b] = await Promise.allSettled([c.state.get(IM0), c.state.get({ ...IM0, id: M1 })]);
    const errs = [a, b].filter((x) => x.status === 'rejected').map((x) => (x as PromiseRejectedResult).reason as Error);
    expect(errs.length).toBeGreaterThanOrEqual(1);
    for (const e of errs) {
      if ((e as ProtocolError).code === 'STUB_ANSWER_TOO_LARGE') expect(e.message).toContain('being read at once');
      else expectProtocol(e, 'STUB_PROTOCOL', '/cosi.resource.State/Get');
    }
    expect(errs.some((e) => (e as ProtocolError).code === 'STUB_ANSWER_TOO_LARGE')).toBe(true);
    // Given back: a normal answer is read again.
    waiting = [];
    proxy.setRule(() => undefined);
    expect((await c.state.get(IM0)).metadata.id).toBe(M0);
  });
});

describe('watch events', () => {
  async function watchFailure(c: OmniClient): Promise<Error> {
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(), 5000);
    try {
      return await failure(
        (async () => {
          for await (const _b of c.state.watchKind(NS, T.InfraMachine, { signal: ac.signal })) {
            // consume
          }
          return 'ended';
        })(),
      );
    } finally {
      clearTimeout(t);
    }
  }

  /** A Watch answered by hand: the first message, then `lines`, then the stream stays open. */
  function watchAnswer(lines: string[]): TamperRule {
    return (r) =>
      r.rpc === 'Watch'
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              res.write(`${line({})}\n`);
              for (const l of lines) res.write(`${l}\n`);
            },
          }
        : undefined;
  }

  it.each([
    ['an event without a resource', () => line({ event: [{ event_type: 2 }] })],
    [
      'a DESTROYED event of another type',
      () => line({ event: [{ event_type: 2, resource: withMeta(wireOf(M0), { type: T.InfraMachineStatus }) }] }),
    ],
    [
      'a DESTROYED event without an ID',
      () => line({ event: [{ event_type: 2, resource: withMeta(wireOf(M0), { id: '' }) }] }),
    ],
    [
      'an UPDATED event whose old resource is another one',
      () => line({ event: [{ event_type: 1, resource: wireOf(M0), old: wireOf(M1) }] }),
    ],
    ['a line that is not JSON', () => '{"result":'],
  ])('%s ends the watch with a ProtocolError, without reconnecting to read it again', async (_n, bad) => {
    proxy.setRule(watchAnswer([line({}), line({ event: [{ resource: wireOf(M1) }] }), bad()]));
    const err = await watchFailure(client);
    expectProtocol(err, 'STUB_PROTOCOL', `/cosi.resource.State/Watch ${NS}/${T.InfraMachine}/`);
    expect(proxy.seen.filter((r) => r.rpc === 'Watch')).toHaveLength(1);
  });

  it('empty batches and the empty first message are legitimate', async () => {
    proxy.setRule(watchAnswer([line({}), line({ event: [] }), line({ event: [{ resource: wireOf(M1) }] })]));
    const ac = new AbortController();
    for await (const batch of client.state.watchKind(NS, T.InfraMachine, { signal: ac.signal })) {
      expect(batch.map((e) => [e.type, e.resource.metadata.id])).toEqual([['created', M1]]);
      ac.abort();
    }
  });

  it('an endless line in a watch is STUB_LINE_TOO_LONG', async () => {
    const c = await clientWith({ limits: { lineBytes: 64 * KiB } });
    proxy.setRule((r) =>
      r.rpc === 'Watch'
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              res.write(`${line({})}\n`);
              const pump = (): void => {
                while (!res.destroyed && res.write(Buffer.alloc(8 * KiB, ' ')));
                if (!res.destroyed) res.once('drain', pump);
              };
              pump();
            },
          }
        : undefined,
    );
    expectProtocol(await watchFailure(c), 'STUB_LINE_TOO_LONG', '/cosi.resource.State/Watch');
  });
});

describe('the adopted clock offset is bounded', () => {
  const refuse =
    (dateMs: number): TamperRule =>
    (r) =>
      r.rpc === 'Get'
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(401, { 'content-type': 'application/json', date: new Date(dateMs).toUTCString() });
              res.end('{"code":16,"message":"invalid signature"}');
            },
          }
        : undefined;

  it('a Date a month ahead is not adopted: an error naming both clocks, exit 4', async () => {
    // Whole seconds: a Date header has no milliseconds.
    const now = Math.floor(Date.now() / 1000) * 1000;
    const c = await clientWith({ now: () => now });
    proxy.setRule(refuse(now + 30 * 24 * 3_600_000));
    const err = await failure(c.state.get(IM0));
    expect(err).toBeInstanceOf(ClockSkewError);
    expect(err).toMatchObject({ code: 'STUB_CLOCK_SKEW' });
    expect(err.message).toContain(`its Date header says ${new Date(now + 30 * 24 * 3_600_000).toISOString()}`);
    expect(err.message).toContain(`this machine's clock ${new Date(now).toISOString()}`);
    expect(err.message).toContain('720.0 h');
    expect(c.serverClockOffsetMs()).toBe(0);
    expect(proxy.seen).toHaveLength(1);
    expect(exitCodeFor(err)).toBe(4);
  });

  it('a month behind likewise', async () => {
    const now = Date.now();
    const c = await clientWith({ now: () => now });
    proxy.setRule(refuse(now - 30 * 24 * 3_600_000));
    expect(await failure(c.state.get(IM0))).toBeInstanceOf(ClockSkewError);
    expect(c.serverClockOffsetMs()).toBe(0);
  });

  it('23 hours ahead is still adopted, and the call is retried once with it', async () => {
    const now = Date.now();
    const c = await clientWith({ now: () => now });
    proxy.setRule(refuse(now + 23 * 3_600_000));
    const err = await failure(c.state.get(IM0));
    expect(err).toMatchObject({ code: 'OMNI_UNAUTHENTICATED' });
    expect(Math.abs(c.serverClockOffsetMs() - 23 * 3_600_000)).toBeLessThan(1000);
    expect(proxy.seen).toHaveLength(2);
  });
});
