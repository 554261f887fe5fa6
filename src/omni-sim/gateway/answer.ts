// How the sim's gateway writes its answers (docs/omni-wire.md 1.3): google.rpc.Status bodies with the
// HTTP status grpc-gateway maps each code to, NDJSON stream lines escaped as encoding/json escapes them,
// and gzip/deflate at Omni's level for a bare `gzip`/`deflate` token, flushed per stream message.
// server.ts routes the calls; this file only writes bytes.

import type { IncomingMessage, ServerResponse } from 'node:http';
import * as zlib from 'node:zlib';
import { GrpcCode, httpStatusFromGrpcCode, OmniError } from '../../omni-api/errors.js';

/** grpc-gateway forwards the gRPC answer's header metadata: an answer that succeeded carries its content type. */
export const GRPC_CONTENT_TYPE = ['Grpc-Metadata-Content-Type', 'application/grpc'] as const;

export interface Status {
  code: number;
  message: string;
}

export function statusOf(e: unknown): Status {
  if (e instanceof OmniError) return { code: e.grpcCode, message: e.omniMessage };
  // Anything unexpected is a bug in the sim; Omni's panic recovery answers Internal.
  return { code: GrpcCode.Internal, message: e instanceof Error ? e.message : String(e) };
}

/** encoding/json escapes these in stream lines (docs/omni-wire.md 1.3). */
function escapeHtml(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** One NDJSON stream line. */
export function line(obj: unknown): string {
  return `${escapeHtml(JSON.stringify(obj))}\n`;
}

export function statusJson(s: Status): Record<string, unknown> {
  return { code: s.code, message: s.message };
}

/** The first token exactly `gzip` or `deflate` of Accept-Encoding, as Omni's compress handler picks it. */
export function pickEncoding(acceptEncoding: string | string[] | undefined): 'gzip' | 'deflate' | undefined {
  const raw = Array.isArray(acceptEncoding) ? acceptEncoding.join(',') : (acceptEncoding ?? '');
  for (const t of raw.split(',').map((s) => s.trim())) if (t === 'gzip' || t === 'deflate') return t;
  return undefined;
}

export function encodingFor(req: IncomingMessage): 'gzip' | 'deflate' | undefined {
  if (req.headers.upgrade !== undefined) return undefined;
  return pickEncoding(req.headers['accept-encoding']);
}

/**
 * The level Omni compresses `/api/` with: Go's default compression, level 6 as zlib's (1.3.4, 1.9.3
 * and later alike; docs/omni-behaviour.md 'Compression and back-pressure').
 */
export const OMNI_GZIP_LEVEL = 6;

/** Stream messages written between two turns of the event loop (other calls are served in between). */
const ITEMS_PER_TURN = 64;

/**
 * Writes a body, gzip/deflate-compressed when asked, flushing after every write: grpc-gateway flushes
 * after every stream message, and Omni's compress handler turns each flush into a sync flush of its
 * gzip writer, so every List item and every Watch message is a deflate block of its own.
 */
export class Body {
  private readonly z: zlib.Gzip | zlib.DeflateRaw | undefined;
  constructor(
    private readonly res: ServerResponse,
    encoding: 'gzip' | 'deflate' | undefined,
  ) {
    if (encoding) {
      res.setHeader('Content-Encoding', encoding);
      this.z =
        encoding === 'gzip'
          ? zlib.createGzip({ level: OMNI_GZIP_LEVEL })
          : zlib.createDeflateRaw({ level: OMNI_GZIP_LEVEL });
      this.z.on('error', () => res.destroy());
      this.z.pipe(res);
    }
  }
  /** Writes one message; false when the body's buffer is full (wait for `drained` before the next). */
  write(s: string): boolean {
    if (this.res.destroyed) return true;
    if (this.z) {
      const room = this.z.write(s);
      this.z.flush(zlib.constants.Z_SYNC_FLUSH);
      return room;
    }
    return this.res.write(s);
  }
  /**
   * Writes one message per item, waiting for a slow reader and yielding to other calls every few
   * items: a 100 000-item List must not hold the event loop for the seconds it takes. Stops when the
   * connection is gone.
   */
  async writeAll<T>(items: Iterable<T>, message: (item: T) => string): Promise<void> {
    let sinceYield = 0;
    for (const item of items) {
      if (this.res.destroyed) return;
      if (!this.write(message(item))) {
        await this.drained();
        sinceYield = 0;
      } else if (++sinceYield >= ITEMS_PER_TURN) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sinceYield = 0;
      }
    }
  }
  /** Resolves once the body can take more (or the connection is gone). */
  drained(): Promise<void> {
    const w = this.z ?? this.res;
    if (this.res.destroyed || !w.writableNeedDrain) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        w.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      w.on('drain', done);
      this.res.on('close', done);
    });
  }
  /** Cuts the connection like a proxy would (FIN mid-body), after what was written has left. */
  async cut(): Promise<void> {
    if (this.res.destroyed) return;
    const z = this.z;
    if (z) await new Promise<void>((r) => z.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
    await new Promise<void>((r) => this.res.write('', () => r()));
    const socket = this.res.socket;
    if (!socket) return void this.res.destroy();
    socket.end();
    setTimeout(() => socket.destroy(), 1000).unref();
  }
  /**
   * Ends the body; the last write's sync flush is kept (Omni flushes it before closing its gzip writer; zlib would fold
   * it into the finish).
   */
  end(): void {
    if (this.res.destroyed) return;
    const z = this.z;
    if (z) z.flush(zlib.constants.Z_SYNC_FLUSH, () => z.end());
    else this.res.end();
  }
}

/** A proxy's refusal: its status, Retry-After and a text body of its own (no gRPC status). */
export function sendProxyRefusal(res: ServerResponse, r: { status: 429 | 503; retryAfterS: number }): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = r.status;
  res.setHeader('Retry-After', String(r.retryAfterS));
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.end(`${r.status} ${r.status === 429 ? 'Too Many Requests' : 'Service Unavailable'}\n`);
}

/** A streaming call that failed before its first line: mapped status, `{"error":{...}}` body. */
export function sendStreamError(req: IncomingMessage, res: ServerResponse, s: Status): void {
  send(req, res, httpStatusFromGrpcCode(s.code), `${JSON.stringify({ error: statusJson(s) })}\n`);
}

export function sendStatus(req: IncomingMessage, res: ServerResponse, s: Status): void {
  if (s.code === GrpcCode.Unauthenticated) res.setHeader('WWW-Authenticate', s.message);
  sendUnary(req, res, httpStatusFromGrpcCode(s.code), statusJson(s));
}

export function sendUnary(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  send(req, res, status, JSON.stringify(body));
}

function send(req: IncomingMessage, res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  const enc = encodingFor(req);
  if (enc) {
    const buf =
      enc === 'gzip'
        ? zlib.gzipSync(text, { level: OMNI_GZIP_LEVEL })
        : zlib.deflateRawSync(text, { level: OMNI_GZIP_LEVEL });
    res.setHeader('Content-Encoding', enc);
    res.end(buf);
  } else res.end(text);
}
