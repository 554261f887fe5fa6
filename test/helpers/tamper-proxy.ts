// A tampering HTTP proxy for hostile-server tests: it sits between a client and a simulated Omni on
// loopback and, per request, passes the exchange through, rewrites the answer line by line, or
// answers by itself (any status, headers and bytes, slowly or without end). Independent of
// src/omni-client and of the sim's fault injection: it only sees HTTP.

import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGunzip } from 'node:zlib';

export interface TamperRequest {
  /** `Get`, `List`, `Watch`, ... (the last path segment). */
  rpc: string;
  path: string;
  /** The parsed JSON body (undefined when it is not JSON). */
  body: unknown;
  headers: IncomingHttpHeaders;
  /** 0-based count of requests the proxy has seen. */
  n: number;
}

export type Tamper =
  /** Forward unchanged (compression included). */
  | { kind: 'pass' }
  /**
   * Forward, then rewrite the upstream answer line by line as it streams (asked for uncompressed):
   * return the replacement line(s), null to drop the line, or CUT to break the connection there
   * (what went before it delivered). Status and headers are kept.
   */
  | {
      kind: 'lines';
      map: (line: string, index: number) => string | string[] | null | typeof CUT;
      status?: number;
    }
  /**
   * Forward, read the upstream answer to its end (the server has done what was asked), then break the
   * connection without answering: a write whose answer was lost.
   */
  | { kind: 'drop-answer' }
  /** Answer without asking upstream: `write` gets the response and may stream, stall or never end. */
  | { kind: 'respond'; write: (res: ServerResponse, req: IncomingMessage) => void | Promise<void> };

export type TamperRule = (r: TamperRequest) => Tamper | undefined;

/** What a `lines` map returns to break the connection before that line. */
export const CUT: unique symbol = Symbol('cut the connection');

export interface TamperProxy {
  endpoint: string;
  /** Every request seen, in order. */
  seen: TamperRequest[];
  /** Replaces the rule for the requests that follow. */
  setRule(rule: TamperRule): void;
  /** Forwards the requests that follow to another loopback server (like a restart behind a proxy). */
  setUpstream(upstream: string): void;
  /** Cuts every exchange in flight, streams included (what a proxy restart does to them). */
  cut(): void;
  close(): Promise<void>;
}

/** Starts the proxy on 127.0.0.1:0 in front of `upstream` (an `http://127.0.0.1:PORT` endpoint). */
export async function startTamperProxy(upstream: string, rule: TamperRule = () => undefined): Promise<TamperProxy> {
  const loopback = (u: string): URL => {
    const url = new URL(u);
    if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
      throw new Error(`the tamper proxy forwards to loopback http only, not ${u}`);
    }
    return url;
  };
  let up = loopback(upstream);
  let current = rule;
  const seen: TamperRequest[] = [];
  const open = new Set<ServerResponse>();

  const server = createServer((req, res) => {
    open.add(res);
    res.on('close', () => open.delete(res));
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const path = req.url ?? '/';
      const tr: TamperRequest = { rpc: path.split('/').pop() ?? '', path, body, headers: req.headers, n: seen.length };
      seen.push(tr);
      const t = current(tr) ?? { kind: 'pass' };
      void handle(t, req, res, raw).catch((e: unknown) => res.destroy(e as Error));
    });
  });

  async function handle(t: Tamper, req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
    if (t.kind === 'respond') {
      await t.write(res, req);
      return;
    }
    const headers = { ...req.headers, host: up.host };
    if (t.kind === 'lines') delete headers['accept-encoding'];
    const upReq = httpRequest({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers });
    res.on('close', () => upReq.destroy());
    upReq.on('error', (e) => res.destroy(e));
    upReq.on('response', (upRes) => {
      if (t.kind === 'drop-answer') {
        upRes.resume();
        upRes.on('end', () => res.destroy());
        return;
      }
      if (t.kind === 'pass') {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
        return;
      }
      const outHeaders = { ...upRes.headers };
      delete outHeaders['content-length'];
      delete outHeaders['content-encoding'];
      res.writeHead(t.status ?? upRes.statusCode ?? 502, outHeaders);
      const src = upRes.headers['content-encoding'] === 'gzip' ? upRes.pipe(createGunzip()) : upRes;
      let buf = '';
      let index = 0;
      let cut = false;
      const emit = (line: string): void => {
        const out = t.map(line, index++);
        if (out === null) return;
        if (out === CUT) {
          cut = true;
          // What was written before goes out first, then the connection breaks without an end.
          res.write('', () => res.socket?.destroy());
          upRes.destroy();
          return;
        }
        for (const l of Array.isArray(out) ? out : [out]) res.write(`${l}\n`);
      };
      src.setEncoding('utf8');
      src.on('data', (c: string) => {
        if (cut) return;
        buf += c;
        let nl: number;
        while (!cut && (nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim() !== '') emit(line);
        }
      });
      src.on('end', () => {
        if (cut) return;
        if (buf.trim() !== '') emit(buf);
        if (!cut) res.end();
      });
      src.on('error', (e) => res.destroy(e));
    });
    upReq.end(raw);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    seen,
    setRule: (r) => {
      current = r;
    },
    setUpstream: (u) => {
      up = loopback(u);
    },
    cut: () => {
      for (const r of open) r.destroy();
    },
    close: async () => {
      for (const r of open) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `{"result":...}` lines of a List answer: the resource of each, or undefined for other lines. */
export function resultOf(line: string): unknown {
  try {
    const o = JSON.parse(line) as { result?: unknown };
    return o.result;
  } catch {
    return undefined;
  }
}

/**
 * Writes `chunk` again and again (with backpressure) until the client hangs up or `max` bytes went
 * out, for answers without end; resolves to the bytes written, which shows where a reader gave up.
 */
export function writeEndlessly(res: ServerResponse, chunk: Buffer, max = 64 * 1024 * 1024 * 1024): Promise<number> {
  let sent = 0;
  return new Promise((resolve) => {
    res.on('close', () => resolve(sent));
    const pump = (): void => {
      while (sent < max && !res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
}

/** Forwards the request upstream itself; `answer` decides what the client gets of the answer (a late one, none). */
export function forward(
  upstream: string,
  r: TamperRequest,
  answer: (res: ServerResponse, status: number, headers: IncomingHttpHeaders, body: Buffer) => void,
): Tamper {
  return {
    kind: 'respond',
    write: (res) =>
      new Promise<void>((resolve) => {
        const u = new URL(upstream);
        const headers = { ...r.headers, host: u.host };
        delete headers['content-length'];
        const req = httpRequest({ host: u.hostname, port: u.port, method: 'POST', path: r.path, headers }, (up) => {
          const chunks: Buffer[] = [];
          up.on('data', (c: Buffer) => chunks.push(c));
          up.on('end', () => {
            answer(res, up.statusCode ?? 502, up.headers, Buffer.concat(chunks));
            resolve();
          });
        });
        req.on('error', () => {
          res.destroy();
          resolve();
        });
        req.end(JSON.stringify(r.body));
      }),
  };
}
