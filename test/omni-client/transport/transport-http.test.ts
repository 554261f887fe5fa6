// Transport behaviour a user notices: clock skew handling, refused keys, deadlines, cancellation,
// close(), the signature cache under load, HTTP proxies from the environment, TLS options.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { generate } from 'selfsigned';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient, type OmniClientOptions } from '../../../src/omni-client/client.js';
import { CanceledError, DeadlineExceededError, UnauthenticatedError } from '../../../src/omni-api/errors.js';
import { KeyError, TransportError } from '../../../src/omni-client/errors.js';
import { generateKey, type GeneratedKey } from '../../../src/omni-sim/scenario/keys.js';
import {
  LineWriter,
  noDelay,
  res,
  sendJson,
  startFakeGateway,
  wireResource,
  type FakeGateway,
} from '../../helpers/fake-gateway.js';

let key: GeneratedKey;
let gw: FakeGateway;
const clients: OmniClient[] = [];
const ptr = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' };

beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});
beforeEach(async () => {
  gw = await startFakeGateway();
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await gw.close();
});

async function mk(extra: Partial<OmniClientOptions> = {}): Promise<OmniClient> {
  const c = await createOmniClient({ endpoint: gw.url, key: key.serviceAccountKey, delay: noDelay, env: {}, ...extra });
  clients.push(c);
  return c;
}

function captureLogger(): { logger: pino.Logger; lines: () => Record<string, unknown>[]; text: () => string } {
  let buf = '';
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      buf += chunk.toString();
      cb();
    },
  });
  return {
    logger: pino({ level: 'debug' }, dest),
    lines: () =>
      buf
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    text: () => buf,
  };
}

/** A gateway whose clock is `skewMs` off and which checks the signed timestamp like Omni (±5 min). */
function clockCheckingGet(skewMs: number): void {
  gw.on('Get', (q, s) => {
    const serverNow = Date.now() + skewMs;
    const ts = Number(q.headers['grpc-metadata-x-sidero-timestamp']) * 1000;
    const headers = { date: new Date(serverNow).toUTCString(), 'www-authenticate': 'invalid signature' };
    if (Math.abs(ts - serverNow) > 5 * 60_000)
      return sendJson(s, 401, { code: 16, message: 'invalid signature' }, { headers });
    sendJson(s, 200, { resource: wireResource(res('m1')) }, { headers: { date: headers.date } });
  });
}

describe('clock skew', () => {
  it('Omni eight minutes ahead: adopts its clock, warns, retries once, and keeps signing with it', async () => {
    clockCheckingGet(8 * 60_000);
    const log = captureLogger();
    const c = await mk({ logger: log.logger });
    expect((await c.state.get(ptr)).metadata.id).toBe('m1');
    expect(gw.calls('Get')).toHaveLength(2);
    expect(Math.abs(c.serverClockOffsetMs() - 8 * 60_000)).toBeLessThan(2_000);
    await c.state.get(ptr);
    expect(gw.calls('Get')).toHaveLength(3);
    const warn = log.lines().find((l) => l['level'] === 40);
    expect(String(warn?.['msg'])).toMatch(/clock differs from Omni's/);
    expect(log.text()).not.toContain('siderov1');
    expect(log.text()).not.toContain('PGP');
  });

  it('eight minutes behind works the same way', async () => {
    clockCheckingGet(-8 * 60_000);
    const older = await generateKey('infra-provider:bare-metal', {
      lifetimeSeconds: 7200,
      date: new Date(Date.now() - 3600_000),
    });
    const c = await mk({ key: older.serviceAccountKey });
    await c.state.get(ptr);
    expect(c.serverClockOffsetMs()).toBeLessThan(-7 * 60_000);
  });

  it('clocks agree: the refusal names the identity and the key fingerprint, never the key', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 401, { code: 16, message: 'invalid signature' }));
    const c = await mk();
    const err = await c.state.get(ptr).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthenticatedError);
    const msg = (err as Error).message;
    expect(msg).toContain('invalid signature');
    expect(msg).toContain('identity "infra-provider:bare-metal"');
    expect(msg).toContain(`key fingerprint ${key.fingerprint}`);
    expect(msg).not.toContain('siderov1');
    expect(msg).not.toContain(key.serviceAccountKey.slice(0, 30));
    expect(gw.calls('Get')).toHaveLength(1);
    expect(c.serverClockOffsetMs()).toBe(0);
  });

  it('retries only once: a key refused after adopting the clock is reported', async () => {
    gw.on('Get', (_q, s) =>
      sendJson(
        s,
        401,
        { code: 16, message: 'invalid signature' },
        { headers: { date: new Date(Date.now() + 9 * 60_000).toUTCString() } },
      ),
    );
    const c = await mk();
    await expect(c.state.get(ptr)).rejects.toThrow(/Omni refused identity "infra-provider:bare-metal"/);
    expect(gw.calls('Get')).toHaveLength(2);
  });
});

it('a key that expires while running fails with a KeyError, not a network error', async () => {
  let now = Date.now();
  const c = await mk({ now: () => now });
  now += 2 * 3600_000;
  const err = await c.state.get(ptr).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(KeyError);
  expect((err as Error).message).toMatch(
    /cannot sign \/cosi.resource.State\/Get with the key of "infra-provider:bare-metal"/,
  );
  expect(gw.calls('Get')).toHaveLength(0);
});

describe('deadlines and cancellation', () => {
  it('the client default deadline ends a call that gets no answer', async () => {
    gw.on('Get', () => undefined);
    const c = await mk({ timeoutMs: 100 });
    const err = await c.state.get(ptr).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect((err as Error).message).toMatch(
      /Get infra-provider\/InfraMachines.omni.sidero.dev\/m1: DeadlineExceeded: no answer within 100 ms/,
    );
  });

  it('a per-call timeout overrides the default', async () => {
    gw.on('Update', () => undefined);
    // The Update's own deadline leaves its outcome unknown: it is read back (unchanged here) and,
    // with no retries left, ends as STUB_THROTTLED carrying the deadline (pressure.ts).
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
    const c = await mk({ timeoutMs: 60_000, backPressure: { retries: 0 } });
    const err = await c.state.update(res('m1'), { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STUB_THROTTLED' });
    expect((err as Error).cause).toBeInstanceOf(DeadlineExceededError);
    expect((err as Error).message).toContain('no answer within 50 ms (client deadline)');
  });

  it('an AbortSignal cancels a call in flight; an aborted signal makes no call at all', async () => {
    gw.on('Get', () => undefined);
    const c = await mk();
    const ac = new AbortController();
    const p = c.state.get(ptr, { signal: ac.signal });
    setTimeout(() => ac.abort(), 30);
    await expect(p).rejects.toBeInstanceOf(CanceledError);
    const before = gw.calls('Get').length;
    await expect(c.state.get(ptr, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(CanceledError);
    expect(gw.calls('Get')).toHaveLength(before);
  });

  it("calls in flight stay independent: aborting one caller's signal spares others; no early deadline", async () => {
    // Calls may share one controller and timer per (caller signal, deadline slot); check the sharing is invisible.
    gw.on('Get', (_q, s) => {
      setTimeout(() => sendJson(s, 200, { resource: wireResource(res('m1')) }), 150);
    });
    const c = await mk({ timeoutMs: 60_000 });
    const a = new AbortController();
    const b = new AbortController();
    const pa = c.state.get(ptr, { signal: a.signal });
    const pb = c.state.get(ptr, { signal: b.signal });
    const pNone = c.state.get(ptr);
    setTimeout(() => a.abort(), 30);
    await expect(pa).rejects.toBeInstanceOf(CanceledError);
    await expect(pb).resolves.toMatchObject({ metadata: { id: 'm1' } });
    await expect(pNone).resolves.toMatchObject({ metadata: { id: 'm1' } });
    // Two short deadlines started at different times: each call gets at least its own timeout.
    gw.on('Get', () => undefined);
    const t0 = Date.now();
    const first = c.state.get(ptr, { timeoutMs: 200 }).catch(() => Date.now() - t0);
    await new Promise((r) => setTimeout(r, 120));
    const t1 = Date.now();
    const second = c.state.get(ptr, { timeoutMs: 200 }).catch(() => Date.now() - t1);
    expect(await first).toBeGreaterThanOrEqual(195);
    expect(await second).toBeGreaterThanOrEqual(195);
  });

  it("many calls of one caller (beyond a slot's share): all cancelled by its signal, answered without it", async () => {
    gw.on('Get', (_q, s) => {
      setTimeout(() => sendJson(s, 200, { resource: wireResource(res('m1')) }), 100);
    });
    const c = await mk({ timeoutMs: 60_000, concurrency: 32 });
    const ac = new AbortController();
    const cancelled = Array.from({ length: 30 }, () =>
      c.state.get(ptr, { signal: ac.signal }).then(
        () => 'answered',
        (e: unknown) => (e instanceof CanceledError ? 'cancelled' : String(e)),
      ),
    );
    const other = new AbortController();
    const answered = Array.from({ length: 30 }, () =>
      c.state.get(ptr, { signal: other.signal }).then(
        () => 'answered',
        (e: unknown) => String(e),
      ),
    );
    setTimeout(() => ac.abort(), 30);
    expect(new Set(await Promise.all(cancelled))).toEqual(new Set(['cancelled']));
    expect(new Set(await Promise.all(answered))).toEqual(new Set(['answered']));
  });

  it('cancels a List in the middle of its stream', async () => {
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({ resource: wireResource(res('a')) });
    });
    const c = await mk();
    const ac = new AbortController();
    const p = c.state.list('infra-provider', 'InfraMachines.omni.sidero.dev', { signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    await expect(p).rejects.toBeInstanceOf(CanceledError);
  });

  it('the watch deadline covers only its opening, not the idle stream', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      setTimeout(() => void w.result({ event: [{ resource: wireResource(res('late')), bookmark: 'AQ==' }] }), 200);
    });
    const c = await mk({ timeoutMs: 100 });
    const ac = new AbortController();
    for await (const b of c.state.watchKind('infra-provider', 'InfraMachines.omni.sidero.dev', { signal: ac.signal })) {
      expect(b[0]?.resource.metadata.id).toBe('late');
      ac.abort();
    }
    expect(gw.calls('Watch')).toHaveLength(1);
  });

  it('close() ends a watch in flight', async () => {
    gw.on('Watch', async (_q, s) => {
      await new LineWriter(s).result({});
    });
    const c = await createOmniClient({ endpoint: gw.url, key: key.serviceAccountKey, delay: noDelay, env: {} });
    const it = c.state.watchKind('infra-provider', 'InfraMachines.omni.sidero.dev')[Symbol.asyncIterator]();
    const pending = it.next().then(
      (r) => r,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 50));
    await c.close();
    const out = await pending;
    expect(out instanceof CanceledError || (out as IteratorResult<unknown>).done === true).toBe(true);
  });
});

describe('signature cache', () => {
  it('many calls of one method in one second make one signature', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
    gw.on('Update', (q, s) => sendJson(s, 200, { resource: q.body['new_resource'] }));
    let now = Math.floor(Date.now() / 1000) * 1000;
    const c = await mk({ now: () => now });
    await Promise.all(Array.from({ length: 40 }, () => c.state.get(ptr)));
    await Promise.all(Array.from({ length: 10 }, () => c.state.update(res('m1'))));
    expect(c.stats().callsByMethod).toEqual({ Get: 40, Update: 10 });
    expect(c.stats().signOps).toBe(2);
    expect(new Set(gw.calls('Get').map((q) => q.headers['grpc-metadata-x-sidero-signature'])).size).toBe(1);
    now += 1000;
    await c.state.get(ptr);
    expect(c.stats().signOps).toBe(3);
  });
});

describe('proxies from the environment', () => {
  let proxy: http.Server;
  let tunnels: string[];
  let proxyUrl: string;
  const open = new Set<net.Socket>();
  beforeEach(async () => {
    tunnels = [];
    proxy = http.createServer((_req, r) => {
      r.statusCode = 502;
      r.end();
    });
    proxy.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      tunnels.push(String(req.url));
      open.add(socket);
      const [host, port] = String(req.url).split(':');
      const up = net.connect(Number(port), host, () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        up.write(head);
        up.pipe(socket);
        socket.pipe(up);
      });
      up.on('error', () => socket.destroy());
      socket.on('error', () => up.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
  });
  afterEach(async () => {
    for (const s of open) s.destroy();
    open.clear();
    proxy.closeAllConnections();
    await new Promise<void>((r) => proxy.close(() => r()));
  });

  for (const name of ['http_proxy', 'HTTP_PROXY']) {
    it(`goes through ${name}`, async () => {
      const c = await mk({ env: { [name]: proxyUrl } });
      expect(c.dispatcherKind).toBe('proxy');
      await c.state.get(ptr);
      expect(tunnels).toEqual([`127.0.0.1:${gw.port}`]);
    });
  }

  for (const name of ['no_proxy', 'NO_PROXY']) {
    it(`honours ${name}`, async () => {
      const c = await mk({ env: { http_proxy: proxyUrl, [name]: '127.0.0.1' } });
      await c.state.get(ptr);
      expect(tunnels).toEqual([]);
    });
  }

  it('https_proxy does not apply to a plaintext endpoint; no proxy variables = direct', async () => {
    const c = await mk({ env: { https_proxy: proxyUrl } });
    expect(c.dispatcherKind).toBe('direct');
    await c.state.get(ptr);
    expect(tunnels).toEqual([]);
  });
});

describe('TLS', () => {
  let dir: string;
  let server: https.Server;
  let endpoint: string;
  let caFile: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stub-tls-'));
    const pems = await generate([{ name: 'commonName', value: 'omni.test' }], {
      keyType: 'ec',
      curve: 'P-256',
      notAfterDate: new Date(Date.now() + 24 * 3600 * 1000),
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    caFile = join(dir, 'ca.pem');
    await writeFile(caFile, pems.cert);
    server = https.createServer({ key: pems.private, cert: pems.cert }, (_req, r) => {
      _req.resume();
      _req.on('end', () => sendJson(r, 200, { resource: wireResource(res('m1', { labels: { served: 'tls' } })) }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    endpoint = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await rm(dir, { recursive: true, force: true });
  });

  it('verifies certificates by default', async () => {
    const c = await mk({ endpoint, retries: 0 });
    const err = await c.state.get(ptr).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as Error).message).toMatch(
      /cannot reach Omni at https:\/\/127\.0\.0\.1:\d+: .*(self-signed|SELF_SIGNED)/i,
    );
  });

  it('trusts a --ca-file', async () => {
    const c = await mk({ endpoint, caFile });
    expect((await c.state.get(ptr)).metadata.labels['served']).toBe('tls');
  });

  it('skips verification only when asked', async () => {
    const c = await mk({ endpoint, insecureSkipTlsVerify: true });
    expect((await c.state.get(ptr)).metadata.labels['served']).toBe('tls');
  });

  it('an unreadable CA file is a configuration error', async () => {
    await expect(mk({ endpoint, caFile: join(dir, 'missing.pem') })).rejects.toMatchObject({ code: 'STUB_CONFIG' });
  });
});
