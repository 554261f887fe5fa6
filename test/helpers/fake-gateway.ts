// A scripted loopback stand-in for Omni's /api gateway (node:http on 127.0.0.1:0). Each test sets
// handlers per gRPC method and asserts on the recorded requests; helpers write the gateway's shapes
// (unary JSON, NDJSON lines, gzip with a sync flush per line, errors).

import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createGzip, constants as zc, type Gzip } from 'node:zlib';
import type { Resource } from '../../src/omni-api/resource.js';
import { ResourceSchema, resourceToWire } from '../../src/omni-api/wire.js';
import { encodeMessage } from '../../src/omni-api/protojson.js';

export interface FakeRequest {
  /** The gRPC method name, e.g. `Get`. */
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: Record<string, unknown>;
}

export type Handler = (req: FakeRequest, res: http.ServerResponse) => void | Promise<void>;

export interface FakeGateway {
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  requests: FakeRequest[];
  /** Sets the handler of a method (replacing the previous one). */
  on(method: string, handler: Handler): void;
  /** Requests of one method. */
  calls(method: string): FakeRequest[];
  close(): Promise<void>;
}

export async function startFakeGateway(): Promise<FakeGateway> {
  const handlers = new Map<string, Handler>();
  const requests: FakeRequest[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const m = /^\/api\/cosi\.resource\.State\/([A-Za-z]+)$/.exec(req.url ?? '');
      let body: Record<string, unknown> = {};
      try {
        body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      } catch {
        body = {};
      }
      const fr: FakeRequest = { method: m?.[1] ?? '', path: req.url ?? '', headers: req.headers, raw, body };
      requests.push(fr);
      const h = m ? handlers.get(m[1] ?? '') : undefined;
      if (req.method !== 'POST') return sendJson(res, 501, { code: 12, message: 'Method Not Allowed' });
      if (!h) return sendJson(res, 404, { code: 5, message: 'Not Found' });
      Promise.resolve(h(fr, res)).catch((e: unknown) => {
        if (!res.headersSent) sendJson(res, 500, { code: 13, message: `fake gateway handler failed: ${String(e)}` });
        else res.destroy();
      });
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    on: (method, handler) => void handlers.set(method, handler),
    calls: (method) => requests.filter((r) => r.method === method),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface SendOptions {
  status?: number;
  gzip?: boolean;
  headers?: Record<string, string>;
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown, opts: SendOptions = {}): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  for (const [k, v] of Object.entries(opts.headers ?? {})) res.setHeader(k, v);
  if (opts.gzip) {
    res.setHeader('content-encoding', 'gzip');
    const gz = createGzip();
    gz.pipe(res);
    gz.end(text);
    return;
  }
  res.end(text);
}

/** A stream writer: lines go out one by one, flushed (a gzip sync-flush block each when gzip). */
export class LineWriter {
  #res: http.ServerResponse;
  #gz: Gzip | undefined;
  constructor(res: http.ServerResponse, opts: SendOptions = {}) {
    this.#res = res;
    res.statusCode = opts.status ?? 200;
    res.setHeader('content-type', 'application/json');
    for (const [k, v] of Object.entries(opts.headers ?? {})) res.setHeader(k, v);
    if (opts.gzip) {
      res.setHeader('content-encoding', 'gzip');
      this.#gz = createGzip();
      this.#gz.pipe(res);
    }
    res.flushHeaders();
  }
  /** Writes raw text (split anywhere you like). */
  async raw(text: string | Buffer): Promise<void> {
    if (this.#gz) {
      const gz = this.#gz;
      gz.write(text);
      await new Promise<void>((resolve) => gz.flush(zc.Z_SYNC_FLUSH, () => resolve()));
    } else {
      await new Promise<void>((resolve, reject) => this.#res.write(text, (e) => (e ? reject(e) : resolve())));
    }
  }
  result(msg: unknown): Promise<void> {
    return this.raw(`${JSON.stringify({ result: msg })}\n`);
  }
  error(code: number, message: string): Promise<void> {
    return this.raw(`${JSON.stringify({ error: { code, message, details: [] } })}\n`);
  }
  end(): void {
    if (this.#gz) this.#gz.end();
    else this.#res.end();
  }
  /** Drops the connection without ending the response (a broken stream). */
  drop(): void {
    this.#res.socket?.destroy();
  }
}

/** The gateway's JSON form of a model resource. */
export function wireResource(r: Resource): Record<string, unknown> {
  return encodeMessage(ResourceSchema, resourceToWire(r));
}

/** No waiting in tests: retries and backoffs resolve at once (unless aborted). */
export const noDelay = (_ms: number, signal?: AbortSignal): Promise<void> =>
  signal?.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve();

/** A resource as Omni would return it (version 1, running). */
export function res(
  id: string,
  init: Partial<Resource['metadata']> = {},
  protoSpec: Uint8Array = new Uint8Array([8, 1]),
): Resource {
  return {
    metadata: {
      namespace: 'infra-provider',
      type: 'InfraMachines.omni.sidero.dev',
      id,
      version: '1',
      owner: '',
      phase: 'running',
      finalizers: [],
      labels: {},
      annotations: {},
      created: '2026-08-21T10:00:00Z',
      updated: '2026-08-21T10:00:00Z',
      ...init,
    },
    spec: { protoSpec },
  };
}
