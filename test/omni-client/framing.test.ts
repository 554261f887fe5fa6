// The gateway's framing and error shapes: NDJSON split anywhere, gzip (incremental), error lines
// after results and before any line, the gRPC code read from the body, and the retry policy.

import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import * as apiErrors from '../../src/omni-api/errors.js';
import * as clientErrors from '../../src/omni-client/errors.js';
import { GrpcCode, OmniError, httpStatusFromGrpcCode } from '../../src/omni-api/errors.js';
import { TransportError } from '../../src/omni-client/errors.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import {
  LineWriter,
  noDelay,
  res,
  sendJson,
  startFakeGateway,
  wireResource,
  type FakeGateway,
} from '../helpers/fake-gateway.js';

let key: GeneratedKey;
let gw: FakeGateway;
let client: OmniClient;
const ptr = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' };

beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});
beforeEach(async () => {
  gw = await startFakeGateway();
  client = await createOmniClient({ endpoint: gw.url, key: key.serviceAccountKey, delay: noDelay, env: {} });
});
afterEach(async () => {
  await client.close();
  await gw.close();
});

describe('NDJSON and gzip', () => {
  it('reads lines split at every byte, multi-byte characters included', async () => {
    const a = res('ä-1', { labels: { name: 'Grüße 🚀' } });
    const b = res('b');
    const line = (r: typeof a) => JSON.stringify({ result: { resource: wireResource(r) } });
    const text = `${line(a)}\n\n${line(b)}`;
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s);
      for (const byte of Buffer.from(text, 'utf8')) await w.raw(Buffer.from([byte]));
      w.end();
    });
    const got = await client.state.list('infra-provider', 'InfraMachines.omni.sidero.dev');
    expect(got).toEqual([a, b]);
  });

  it('decodes a gzip unary answer', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }, { gzip: true }));
    expect((await client.state.get(ptr)).metadata.id).toBe('m1');
  });

  it('decodes a gzip stream incrementally: a batch arrives while the stream stays open', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s, { gzip: true });
      await w.result({});
      await w.result({ event: [{ resource: wireResource(res('m1')), bookmark: 'AQ==' }] });
      await held; // the response is not finished: only a streaming decoder sees the batch now
      w.end();
    });
    const ac = new AbortController();
    const it = client.state
      .watchKind('infra-provider', 'InfraMachines.omni.sidero.dev', { signal: ac.signal })
      [Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value?.[0]?.resource.metadata.id).toBe('m1');
    ac.abort();
    release();
    expect((await it.next()).done).toBe(true);
  });

  it('a gzip error body is decoded too', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 400, { code: 9, message: 'conflict' }, { gzip: true }));
    await expect(client.state.get(ptr)).rejects.toBeInstanceOf(apiErrors.FailedPreconditionError);
  });
});

describe('stream errors', () => {
  it('an error line after results (HTTP 200) is the typed error', async () => {
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({ resource: wireResource(res('a')) });
      await w.error(GrpcCode.PermissionDenied, 'no access is permitted');
      w.end();
    });
    const err = await client.state.list('infra-provider', ptr.type).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(apiErrors.PermissionDeniedError);
    expect((err as OmniError).httpStatus).toBe(200);
    expect((err as OmniError).omniMessage).toBe('no access is permitted');
    expect(gw.calls('List')).toHaveLength(1);
  });

  it('an error before any line has the mapped HTTP status and the {"error":..} body', async () => {
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s, { status: 403 });
      await w.error(GrpcCode.PermissionDenied, 'infra provider with name "bare-metal" is not registered in the system');
      w.end();
    });
    const err = await client.state.list('infra-provider', ptr.type).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(apiErrors.PermissionDeniedError);
    expect((err as OmniError).httpStatus).toBe(403);
    expect((err as OmniError).message).toContain(
      `/cosi.resource.State/List infra-provider/${ptr.type}/: PermissionDenied: infra provider with name`,
    );
  });

  it('a malformed line is a transport error, not silently skipped', async () => {
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s);
      await w.raw('{"result": nope}\n');
      w.end();
    });
    const err = await client.state.list('infra-provider', ptr.type).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(clientErrors.ProtocolError);
    expect(err).toMatchObject({
      code: 'STUB_PROTOCOL',
      message: expect.stringMatching(
        /bad answer from Omni at http:\/\/127\.0\.0\.1:\d+: a stream line that is not JSON: \{"result": nope\}/,
      ),
    });
  });
});

describe('gRPC code -> error class (the code comes from the body)', () => {
  const byCode = new Map<number, { CODE: string; GRPC: number }>(
    Object.values(apiErrors)
      .filter(
        (v): v is { CODE: string; GRPC: number } & typeof OmniError =>
          typeof v === 'function' && 'GRPC' in v && 'CODE' in v,
      )
      .map((c) => [c.GRPC, c]),
  );

  it('has a class for every code 1..16', () => {
    expect([...byCode.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
  });

  for (let code = 1; code <= 16; code++) {
    it(`code ${code} (HTTP ${httpStatusFromGrpcCode(code)})`, async () => {
      const c = await createOmniClient({
        endpoint: gw.url,
        key: key.serviceAccountKey,
        delay: noDelay,
        env: {},
        retries: 0,
        backPressure: { retries: 0 },
      });
      try {
        gw.on('Update', (_q, s) => sendJson(s, httpStatusFromGrpcCode(code), { code, message: `omni says ${code}` }));
        // A back-pressure code leaves the Update's outcome unknown: it is read back (unchanged here),
        // and with no retries left it ends as STUB_THROTTLED carrying Omni's error. ResourceExhausted
        // (larger than Omni's burst) is sent once and ends as STUB_WRITE_TOO_LARGE, without a read-back.
        gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
        let err = await c.state.update(res('m1')).catch((e: unknown) => e);
        if (code === GrpcCode.DeadlineExceeded || code === GrpcCode.Unavailable) {
          expect(err).toBeInstanceOf(clientErrors.ThrottledError);
          expect(gw.calls('Get')).toHaveLength(1);
          err = (err as Error).cause;
        } else if (code === GrpcCode.ResourceExhausted) {
          expect(err).toBeInstanceOf(clientErrors.WriteTooLargeError);
          expect(gw.calls('Get')).toHaveLength(0);
          err = (err as Error).cause;
        } else {
          expect(gw.calls('Get')).toHaveLength(0);
        }
        expect(err).toBeInstanceOf(OmniError);
        expect((err as OmniError).code).toBe(byCode.get(code)?.CODE);
        expect((err as OmniError).grpcCode).toBe(code);
        expect((err as OmniError).omniMessage).toEqual(
          code === GrpcCode.Unauthenticated ? expect.stringContaining(`omni says ${code}`) : `omni says ${code}`,
        );
        expect((err as OmniError).method).toBe('/cosi.resource.State/Update');
        expect((err as OmniError).resource).toEqual(ptr);
      } finally {
        await c.close();
      }
    });
  }

  it('400 code 3 is InvalidArgument (phase conflict), 400 code 9 FailedPrecondition (version conflict)', async () => {
    gw.on('Update', (_q, s) => sendJson(s, 400, { code: 3, message: 'phase conflict' }));
    await expect(client.state.update(res('m1'))).rejects.toBeInstanceOf(apiErrors.InvalidArgumentError);
    gw.on('Update', (_q, s) => sendJson(s, 400, { code: 9, message: 'version conflict' }));
    await expect(client.state.update(res('m1'))).rejects.toBeInstanceOf(apiErrors.FailedPreconditionError);
  });

  it("an error status without a status body is never taken for Omni's error (a bare 404 is not NotFound)", async () => {
    gw.on('Get', (_q, s) => {
      s.statusCode = 404;
      s.end('<html>nginx: not found</html>');
    });
    const err = await client.state.get(ptr).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(clientErrors.ProtocolError);
    expect(err).toMatchObject({
      code: 'STUB_HTTP_STATUS',
      message: expect.stringContaining(
        'answered HTTP 404 without a gRPC status (google.rpc.Status) for it: <html>nginx: not found</html>',
      ),
    });
  });

  it('nor is a status body whose code does not map to the HTTP status', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 500, { code: GrpcCode.NotFound, message: 'not found' }));
    await expect(client.state.get(ptr)).rejects.toMatchObject({ code: 'STUB_HTTP_STATUS' });
    gw.on('Get', (_q, s) => sendJson(s, 404, { code: 404, message: 'not found' }));
    await expect(client.state.get(ptr)).rejects.toMatchObject({ code: 'STUB_HTTP_STATUS' });
  });
});

describe('retries', () => {
  it('Unavailable (503) is retried, then succeeds', async () => {
    let n = 0;
    gw.on('Get', (_q, s) =>
      n++ < 2
        ? sendJson(s, 503, { code: 14, message: 'connection refused' })
        : sendJson(s, 200, { resource: wireResource(res('m1')) }),
    );
    expect((await client.state.get(ptr)).metadata.id).toBe('m1');
    expect(client.stats().callsByMethod['Get']).toBe(3);
  });

  it('re-signs every attempt with a fresh timestamp', async () => {
    let t = Date.now();
    const c = await createOmniClient({
      endpoint: gw.url,
      key: key.serviceAccountKey,
      delay: noDelay,
      env: {},
      now: () => (t += 1500),
    });
    try {
      let n = 0;
      gw.on('Get', (_q, s) =>
        n++ < 1
          ? sendJson(s, 503, { code: 14, message: 'x' })
          : sendJson(s, 200, { resource: wireResource(res('m1')) }),
      );
      await c.state.get(ptr);
      const [a, b] = gw.calls('Get').map((q) => q.headers['grpc-metadata-x-sidero-timestamp']);
      expect(Number(b)).toBeGreaterThan(Number(a));
    } finally {
      await c.close();
    }
  });

  it('is bounded: 1 + 4 attempts, then UnavailableError', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 503, { code: 14, message: 'down' }));
    await expect(client.state.get(ptr)).rejects.toBeInstanceOf(apiErrors.UnavailableError);
    expect(gw.calls('Get')).toHaveLength(5);
  });

  it('no blind resend: an Unavailable Destroy is read back, resent only while a Get finds it, bounded', async () => {
    const c = await createOmniClient({
      endpoint: gw.url,
      key: key.serviceAccountKey,
      delay: noDelay,
      env: {},
      backPressure: { retries: 3 },
    });
    try {
      gw.on('Destroy', (_q, s) => sendJson(s, 503, { code: 14, message: 'down' }));
      gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
      const err = await c.state.destroy(ptr).catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: 'STUB_THROTTLED',
        message: expect.stringContaining('Destroy infra-provider/InfraMachines.omni.sidero.dev/m1: throttled by Omni'),
      });
      expect((err as Error).cause).toBeInstanceOf(apiErrors.UnavailableError);
      expect(gw.calls('Destroy')).toHaveLength(4);
      expect(gw.calls('Get')).toHaveLength(4);
      expect(c.throttling()).toMatchObject({
        signals: 4,
        retriedWrites: 3,
        foundApplied: 0,
        gaveUp: 1,
        minWritesInFlight: 1,
      });
    } finally {
      await c.close();
    }
  });

  it('a Destroy whose answer was lost is done once a Get by its ID answers NotFound: not sent again', async () => {
    gw.on('Destroy', (_q, s) => {
      s.socket?.destroy();
    });
    await client.state.destroy(ptr);
    expect(gw.calls('Destroy')).toHaveLength(1);
    expect(gw.calls('Get')).toHaveLength(1);
    expect(client.throttling()).toMatchObject({ signals: 0, lostAnswers: 1, foundApplied: 1, retriedWrites: 0 });
  });

  it('a connection reset is retried', async () => {
    let n = 0;
    gw.on('Get', (_q, s) => {
      if (n++ === 0) s.socket?.destroy();
      else sendJson(s, 200, { resource: wireResource(res('m1')) });
    });
    expect((await client.state.get(ptr)).metadata.id).toBe('m1');
    expect(gw.calls('Get')).toHaveLength(2);
  });

  it('a List broken mid-stream is read again from the start', async () => {
    let n = 0;
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({ resource: wireResource(res('a')) });
      if (n++ === 0) return w.drop();
      await w.result({ resource: wireResource(res('b')) });
      w.end();
    });
    expect((await client.state.list('infra-provider', ptr.type)).map((r) => r.metadata.id)).toEqual(['a', 'b']);
  });

  it('a refused connection ends in a TransportError naming the endpoint', async () => {
    const port = gw.port;
    await gw.close();
    const c = await createOmniClient({
      endpoint: `grpc://127.0.0.1:${port}`,
      key: key.serviceAccountKey,
      delay: noDelay,
      env: {},
      retries: 1,
    });
    try {
      const err = await c.state.get(ptr).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransportError);
      expect((err as Error).message).toMatch(
        new RegExp(
          `Get infra-provider/InfraMachines.omni.sidero.dev/m1: cannot reach Omni at http://127.0.0.1:${port}: ` +
            `ECONNREFUSED`,
        ),
      );
      expect(c.stats().callsByMethod['Get']).toBe(2);
    } finally {
      await c.close();
      gw = await startFakeGateway();
    }
  });
});
