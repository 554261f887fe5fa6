// The gateway of the simulated Omni: `POST /api/cosi.resource.State/<Method>` with grpc-gateway's
// conventions as Omni configures them (docs/omni-wire.md 1.3): protojson bodies (snake_case out, unknown
// fields rejected), NDJSON streams flushed per line, errors as google.rpc.Status, gzip only for a bare
// `gzip` token. Every call is authenticated by the injected authenticator and served by the injected
// StateApi (access.ts in the sim, the bare store in tests). Nothing a client sends may crash it.

import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import * as zlib from 'node:zlib';
import { errorFromStatus, GrpcCode, httpStatusFromGrpcCode, OmniError } from '../omni-client/errors.js';
import type { Pointer, Resource } from '../omni-client/resource.js';
import { decodeSpec, OMNI_SPEC_SCHEMAS } from '../omni-client/specs.js';
import {
  decodeMessage, encodeMessage, EventType, fullMethod, Methods, type MethodName, type MessageSchema,
  resourceFromWire, resourceToWire, WireError,
} from '../omni-client/wire.js';
import type { Identity, SimClock, SimEvent, StateApi, WatchParams } from './api.js';
import { gatewayBehaviour, renderYamlSpecAt, type GatewayBehaviour } from './behaviour.js';
import { WRITE_METHODS, type Faults } from './faults.js';
import { queryFromWire } from './query.js';
import { firstJsonValue, GoJsonError, keyPosition } from './request-json.js';
import { StreamBrokenError } from './store.js';
import { grpcTimeoutMs, throttled, type ThrottleCall } from './throttle.js';
import { parseVersion, type OmniVersion } from './version.js';

export type Authenticator = (headers: IncomingHttpHeaders, fullMethod: string) => Promise<Identity>;

export interface GatewayOptions {
  state: StateApi;
  authenticate: Authenticator;
  clock: SimClock;
  /** The Omni version it answers as (behaviour.ts: routes, yaml_spec, ...). */
  omniVersion: OmniVersion | string;
  faults?: Faults;
}

/** gRPC's default receive limit as Omni raises it (constants.GRPCMaxMessageSize). */
export const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
const PREFIX = '/api/cosi.resource.State/';
const TEARDOWN_METHODS = new Set<string>(['Teardown', 'TeardownAndDestroy']);
/** The calls that write, and so may wait for Omni's write budget or lose their answer. */
const WRITES = new Set<string>(WRITE_METHODS);
/** grpc-gateway forwards the gRPC answer's header metadata: an answer that succeeded carries its content type. */
const GRPC_CONTENT_TYPE = ['Grpc-Metadata-Content-Type', 'application/grpc'] as const;

interface Status {
  code: number;
  message: string;
}

function statusOf(e: unknown): Status {
  if (e instanceof OmniError) return { code: e.grpcCode, message: e.omniMessage };
  // Anything unexpected is a bug in the sim; Omni's panic recovery answers Internal.
  return { code: GrpcCode.Internal, message: e instanceof Error ? e.message : String(e) };
}

/** encoding/json escapes these in stream lines (docs/omni-wire.md 1.3). */
function escapeHtml(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The first token exactly `gzip` or `deflate` of Accept-Encoding, as Omni's compress handler picks it. */
export function pickEncoding(acceptEncoding: string | string[] | undefined): 'gzip' | 'deflate' | undefined {
  const raw = Array.isArray(acceptEncoding) ? acceptEncoding.join(',') : acceptEncoding ?? '';
  for (const t of raw.split(',').map((s) => s.trim())) if (t === 'gzip' || t === 'deflate') return t;
  return undefined;
}

/** A map with its keys in order, as Go's protojson writes map fields (the recordings show labels sorted). */
function sortedKeys(m: Record<string, string>): Record<string, string> {
  const keys = Object.keys(m);
  if (keys.length < 2) return m;
  const out: Record<string, string> = {};
  for (const k of keys.sort()) out[k] = m[k] as string;
  return out;
}

/**
 * The level Omni compresses `/api/` with: `compress.Handler(..., gzip.DefaultCompression)` in
 * `internal/backend/grpc/grpc.go` (1.3.4, 1.9.3 and later alike; BestCompression is only for the
 * static frontend). Go's default level is 6, as zlib's.
 */
export const OMNI_GZIP_LEVEL = 6;

/**
 * Writes a body, gzip/deflate-compressed when asked, flushing after every write: grpc-gateway flushes
 * after every stream message, and Omni's compress handler turns each flush into a sync flush of its
 * gzip writer, so every List item and every Watch message is a deflate block of its own.
 */
class Body {
  private readonly z: zlib.Gzip | zlib.DeflateRaw | undefined;
  constructor(private readonly res: ServerResponse, encoding: 'gzip' | 'deflate' | undefined) {
    if (encoding) {
      res.setHeader('Content-Encoding', encoding);
      this.z = encoding === 'gzip' ? zlib.createGzip({ level: OMNI_GZIP_LEVEL }) : zlib.createDeflateRaw({ level: OMNI_GZIP_LEVEL });
      this.z.on('error', () => res.destroy());
      this.z.pipe(res);
    }
  }
  write(s: string): void {
    if (this.res.destroyed) return;
    if (this.z) {
      this.z.write(s);
      this.z.flush(zlib.constants.Z_SYNC_FLUSH);
    } else this.res.write(s);
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
  /** Ends the body; the last write's sync flush is kept (Omni flushes it before closing its gzip writer; zlib would fold it into the finish). */
  end(): void {
    if (this.res.destroyed) return;
    const z = this.z;
    if (z) z.flush(zlib.constants.Z_SYNC_FLUSH, () => z.end());
    else this.res.end();
  }
}

/** Rendered yaml_spec by (type, proto bytes) for one Omni version; bounded, least recently used evicted first. */
class YamlCache {
  private readonly m = new Map<string, string | undefined>();
  constructor(private readonly max: number, private readonly version: OmniVersion) {}
  render(type: string, bytes: Uint8Array): string | undefined {
    // latin1 maps each byte to one char: a cheap exact key (rendering YAML is ~50x dearer).
    const key = `${type}\0${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')}`;
    if (this.m.has(key)) {
      const v = this.m.get(key);
      this.m.delete(key);
      this.m.set(key, v);
      return v;
    }
    const v = renderYamlSpecAt(type, bytes, this.version);
    if (this.m.size >= this.max) this.m.delete(this.m.keys().next().value as string);
    this.m.set(key, v);
    return v;
  }
}

/** The resource a write request names (Create, Update: in its resource's metadata). */
function writtenPointer(method: MethodName, msg: Record<string, unknown>): Pointer {
  const r = method === 'Create' ? msg['resource'] : method === 'Update' ? msg['new_resource'] : undefined;
  const md = r === undefined ? msg : (((r as Record<string, unknown>)['metadata'] ?? {}) as Record<string, unknown>);
  return { namespace: String(md['namespace'] ?? ''), type: String(md['type'] ?? ''), id: String(md['id'] ?? '') };
}

export class Gateway {
  private readonly streams = new Set<ServerResponse>();
  /**
   * The same specs are rendered again and again (every Update and Watch event echoes them). Sized
   * for a 10 000-machine fleet (about 22 000 distinct specs of Omni's types, ~0.4 KB each); a small
   * scenario never fills it.
   */
  private readonly yaml: YamlCache;
  private readonly behaviour: GatewayBehaviour;

  constructor(private readonly opts: GatewayOptions) {
    const version = typeof opts.omniVersion === 'string' ? parseVersion(opts.omniVersion) : opts.omniVersion;
    this.behaviour = gatewayBehaviour(version);
    this.yaml = new YamlCache(32_768, version);
  }

  /** The request listener for node:http / node:https. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch(() => {
      // Last resort: never let a request take the process down.
      if (!res.headersSent) {
        try {
          this.sendUnary(req, res, 500, { code: GrpcCode.Internal, message: 'internal error' });
          return;
        } catch {
          // fall through
        }
      }
      res.destroy();
    });
  };

  /** Cuts every open stream (a simulated restart). */
  breakStreams(): void {
    for (const res of this.streams) res.destroy();
    this.streams.clear();
  }

  get openStreams(): number {
    return this.streams.size;
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    res.setHeader('Date', new Date(this.opts.clock.now()).toUTCString());
    const faults = this.opts.faults;
    // A rate-limiting proxy answers before Omni sees anything (the network's latency still counts).
    const refused = faults?.proxyLimit?.take();
    if (refused && faults) {
      req.resume();
      await faults.beforeCall();
      this.sendProxyRefusal(res, refused);
      return;
    }
    const arrived = faults?.now();
    res.setHeader('Vary', 'Accept-Encoding');
    const path = (req.url ?? '').split('?')[0] ?? '';
    const name = path.startsWith(PREFIX) ? path.slice(PREFIX.length) : '';
    const known = Object.hasOwn(Methods, name) && (this.behaviour.teardownRoutes || !TEARDOWN_METHODS.has(name));
    if (!known) {
      req.resume();
      this.sendUnary(req, res, 404, { code: GrpcCode.NotFound, message: 'Not Found' });
      return;
    }
    if (req.method !== 'POST') {
      req.resume();
      this.sendUnary(req, res, 501, { code: GrpcCode.Unimplemented, message: 'Method Not Allowed' });
      return;
    }
    const method = name as MethodName;
    // grpc-gateway reads Grpc-Timeout into the call's deadline before it decodes the body.
    let timeoutMs: number | undefined;
    try {
      timeoutMs = grpcTimeoutMs(req.headers['grpc-timeout']);
    } catch (e) {
      req.resume();
      this.sendStatus(req, res, statusOf(e));
      return;
    }
    const call: ThrottleCall = { deadline: timeoutMs !== undefined && arrived !== undefined ? arrived + timeoutMs : undefined };
    const text = await this.readBody(req);
    if (text === undefined) {
      this.sendStatus(req, res, { code: GrpcCode.ResourceExhausted, message: `grpc: received message larger than max (> ${MAX_REQUEST_BYTES})` });
      return;
    }
    let msg: Record<string, unknown>;
    try {
      msg = this.decode(Methods[method].request, text);
    } catch (e) {
      this.sendStatus(req, res, { code: GrpcCode.InvalidArgument, message: (e as Error).message });
      return;
    }
    if (faults) {
      await faults.beforeCall();
      if (faults.takeUnavailable()) {
        this.sendStatus(req, res, { code: GrpcCode.Unavailable, message: 'connection error: simulated outage' });
        return;
      }
    }
    const stream = Methods[method].stream;
    let who: Identity;
    try {
      who = await this.opts.authenticate(req.headers, fullMethod(method));
    } catch (e) {
      if (stream) this.sendStreamError(req, res, statusOf(e));
      else this.sendStatus(req, res, statusOf(e));
      return;
    }
    if (method === 'Watch') return this.watch(req, res, who, msg);
    if (method === 'List') return this.list(req, res, who, msg);
    try {
      const out = await this.unary(method, who, msg, res, call);
      if (faults && WRITES.has(method) && faults.takeLostAnswer(method, writtenPointer(method, msg))) {
        // Applied, and the connection goes before the first byte of the answer.
        res.destroy();
        return;
      }
      res.setHeader(GRPC_CONTENT_TYPE[0], GRPC_CONTENT_TYPE[1]);
      this.sendUnary(req, res, 200, encodeMessage(Methods[method].response, out));
    } catch (e) {
      this.sendStatus(req, res, statusOf(e));
    }
  }

  private readBody(req: IncomingMessage): Promise<string | undefined> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let tooBig = false;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_REQUEST_BYTES) tooBig = true;
        else chunks.push(c);
      });
      req.on('end', () => resolve(tooBig ? undefined : Buffer.concat(chunks).toString('utf8')));
      req.on('error', () => resolve(undefined));
    });
  }

  /** The request message as Omni's gateway decodes it (request-json.ts); errors worded as Go's. */
  private decode(schema: MessageSchema, text: string): Record<string, unknown> {
    let body: string | undefined;
    try {
      body = firstJsonValue(text);
    } catch (e) {
      if (e instanceof GoJsonError) throw new WireError(e.message);
      throw e;
    }
    if (body === undefined) return decodeMessage(schema, {}, { strict: true });
    const prefix = this.behaviour.protoErrorPrefix;
    try {
      return decodeMessage(schema, JSON.parse(body), { strict: true });
    } catch (e) {
      const m = /^unknown field "(.*)" in [A-Za-z]+$/.exec((e as Error).message);
      const at = m ? keyPosition(body, m[1] ?? '') : undefined;
      if (m && at) throw new WireError(`${prefix}(${at}): unknown field ${JSON.stringify(m[1])}`);
      // Other refusals keep our decoder's words (protojson's would name the value's position too).
      throw new WireError(`${prefix}${(e as Error).message.replace(/ in [A-Za-z]+$/, '')}`);
    }
  }

  /** A unary call; a write waits for Omni's write budget when the throttle is on (throttle.ts). */
  private async unary(method: MethodName, who: Identity, msg: Record<string, unknown>, res: ServerResponse, call: ThrottleCall): Promise<Record<string, unknown>> {
    const faults = this.opts.faults;
    const throttle = faults?.throttle;
    if (!faults || !throttle || !WRITES.has(method)) return this.apply(method, who, msg, res);
    const gone = new Promise<void>((resolve) => res.once('close', () => resolve()));
    return throttled(throttle, call, (ms) => faults.waitForBudget(ms, gone), () => this.apply(method, who, msg, res));
  }

  private async apply(method: MethodName, who: Identity, msg: Record<string, unknown>, res: ServerResponse): Promise<Record<string, unknown>> {
    const { state } = this.opts;
    const opts = (msg['options'] ?? {}) as Record<string, unknown>;
    const owner = String(opts['owner'] ?? '');
    const ptr = (): Pointer => ({ namespace: String(msg['namespace']), type: String(msg['type']), id: String(msg['id']) });
    switch (method) {
      case 'Get':
        return { resource: this.out(state.get(who, ptr())) };
      case 'Create':
        return { resource: this.out(state.create(who, this.incoming(msg['resource']), owner)) };
      case 'Update': {
        const r = this.incoming(msg['new_resource']);
        const phase = opts['expected_phase'] as string | undefined;
        if (phase !== undefined && phase !== 'running' && phase !== 'tearingDown') {
          throw errorFromStatus(GrpcCode.InvalidArgument, `unknown phase "${phase}"`);
        }
        this.opts.faults?.beforeUpdate(r.metadata);
        return { resource: this.out(state.update(who, r, owner, phase)) };
      }
      case 'Destroy':
        state.destroy(who, ptr(), owner);
        return {};
      case 'Teardown':
        return { destroy_ready: state.teardown(who, ptr(), owner) };
      case 'TeardownAndDestroy': {
        const ac = new AbortController();
        res.on('close', () => ac.abort());
        await state.teardownAndDestroy(who, ptr(), owner, ac.signal);
        return {};
      }
      default:
        throw errorFromStatus(GrpcCode.Unimplemented, `unknown method ${method}`);
    }
  }

  /** A resource from a Create/Update body, validated like Omni's server (docs/omni-wire.md 2.2). */
  private incoming(w: unknown): Resource {
    let r: Resource;
    try {
      r = resourceFromWire(w, true);
    } catch (e) {
      throw errorFromStatus(GrpcCode.Unknown, (e as Error).message);
    }
    if (OMNI_SPEC_SCHEMAS.has(r.metadata.type)) {
      // Omni's registered types: proto_spec is decoded (bad bytes fail), yaml_spec ignored.
      const schema = OMNI_SPEC_SCHEMAS.get(r.metadata.type)!;
      try {
        decodeSpec(schema, r.spec.protoSpec);
      } catch (e) {
        throw errorFromStatus(GrpcCode.Unknown, `failed to unmarshal spec: ${(e as Error).message}`);
      }
      delete r.spec.yamlSpec;
    }
    return r;
  }

  /** A resource as Omni answers it: yaml_spec rendered by the server for its registered types. */
  private out(r: Resource): Record<string, unknown> {
    if (OMNI_SPEC_SCHEMAS.has(r.metadata.type)) {
      try {
        const yaml = this.yaml.render(r.metadata.type, r.spec.protoSpec);
        if (yaml !== undefined) r.spec.yamlSpec = yaml;
      } catch {
        // Bytes seeded by a scenario that do not decode: send them as they are.
      }
    }
    const w = resourceToWire(r);
    const md = w['metadata'] as Record<string, unknown>;
    md['labels'] = sortedKeys(r.metadata.labels);
    md['annotations'] = sortedKeys(r.metadata.annotations);
    return w;
  }

  private eventOut(e: SimEvent): Record<string, unknown> {
    return {
      ...(e.eventType === EventType.ERRORED ? {} : { resource: this.out(e.resource) }),
      event_type: e.eventType,
      ...(e.old ? { old: this.out(e.old) } : {}),
      ...(e.error !== undefined ? { error: e.error } : {}),
      ...(e.bookmark !== undefined ? { bookmark: e.bookmark } : {}),
    };
  }

  private list(req: IncomingMessage, res: ServerResponse, who: Identity, msg: Record<string, unknown>): void {
    const opts = (msg['options'] ?? {}) as Record<string, unknown>;
    let items: Resource[];
    try {
      items = this.opts.state.list(who, String(msg['namespace']), String(msg['type']), queryFromWire(opts['label_query'], opts['id_query']));
    } catch (e) {
      this.sendStreamError(req, res, statusOf(e));
      return;
    }
    const body = this.startStream(req, res);
    // One message (and one flush) per item, as Omni sends a List: a client pays an inflate step per
    // item of a gzip List, and the benchmark should see that cost.
    for (const r of items) body.write(this.line({ result: encodeMessage(Methods.List.response, { resource: this.out(r) }) }));
    this.streams.delete(res);
    body.end();
  }

  private async watch(req: IncomingMessage, res: ServerResponse, who: Identity, msg: Record<string, unknown>): Promise<void> {
    if (msg['options'] === undefined && this.behaviour.watchWithoutOptionsPanics) {
      this.sendStreamError(req, res, { code: GrpcCode.Internal, message: 'runtime error: invalid memory address or nil pointer dereference' });
      return;
    }
    const o = (msg['options'] ?? {}) as Record<string, unknown>;
    const params: WatchParams = {
      namespace: String(msg['namespace']),
      type: String(msg['type']),
      ...(msg['id'] !== undefined ? { id: String(msg['id']) } : {}),
      bootstrapContents: o['bootstrap_contents'] === true,
      tailEvents: Number(o['tail_events'] ?? 0),
      query: queryFromWire(o['label_query'], o['id_query']),
      aggregated: o['aggregated'] === true,
      ...(o['start_from_bookmark'] !== undefined ? { startFromBookmark: o['start_from_bookmark'] as Uint8Array } : {}),
      bootstrapBookmark: o['bootstrap_bookmark'] === true,
      apiVersion: Number(msg['api_version'] ?? 0),
    };
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    let batches: AsyncIterable<SimEvent[]>;
    try {
      batches = this.opts.state.watch(who, params, ac.signal);
    } catch (e) {
      ac.abort();
      this.sendStreamError(req, res, statusOf(e));
      return;
    }
    const body = this.startStream(req, res);
    body.write(this.line({ result: {} }));
    const dropAfter = this.opts.faults?.dropWatchAfterEvents();
    let sent = 0;
    try {
      for await (const batch of batches) {
        if (res.destroyed) break;
        body.write(this.line({ result: encodeMessage(Methods.Watch.response, { event: batch.map((e) => this.eventOut(e)) }) }));
        sent += batch.length;
        if (dropAfter !== undefined && sent >= dropAfter) {
          await body.cut();
          return;
        }
      }
      body.end();
    } catch (e) {
      if (e instanceof StreamBrokenError) res.destroy();
      else {
        body.write(this.line({ error: this.statusJson(statusOf(e)) }));
        body.end();
      }
    } finally {
      ac.abort();
      this.streams.delete(res);
    }
  }

  private line(obj: unknown): string {
    return `${escapeHtml(JSON.stringify(obj))}\n`;
  }

  private statusJson(s: Status): Record<string, unknown> {
    return { code: s.code, message: s.message };
  }

  private startStream(req: IncomingMessage, res: ServerResponse): Body {
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader(GRPC_CONTENT_TYPE[0], GRPC_CONTENT_TYPE[1]);
    this.streams.add(res);
    res.on('close', () => this.streams.delete(res));
    const body = new Body(res, this.encodingFor(req));
    res.flushHeaders();
    return body;
  }

  /** A proxy's refusal: its status, Retry-After and a text body of its own (no gRPC status). */
  private sendProxyRefusal(res: ServerResponse, r: { status: 429 | 503; retryAfterS: number }): void {
    if (res.headersSent || res.destroyed) return;
    res.statusCode = r.status;
    res.setHeader('Retry-After', String(r.retryAfterS));
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.end(`${r.status} ${r.status === 429 ? 'Too Many Requests' : 'Service Unavailable'}\n`);
  }

  /** A streaming call that failed before its first line: mapped status, `{"error":{...}}` body. */
  private sendStreamError(req: IncomingMessage, res: ServerResponse, s: Status): void {
    this.send(req, res, httpStatusFromGrpcCode(s.code), `${JSON.stringify({ error: this.statusJson(s) })}\n`);
  }

  private sendStatus(req: IncomingMessage, res: ServerResponse, s: Status): void {
    if (s.code === GrpcCode.Unauthenticated) res.setHeader('WWW-Authenticate', s.message);
    this.sendUnary(req, res, httpStatusFromGrpcCode(s.code), this.statusJson(s));
  }

  private sendUnary(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
    this.send(req, res, status, JSON.stringify(body));
  }

  private send(req: IncomingMessage, res: ServerResponse, status: number, text: string): void {
    if (res.headersSent || res.destroyed) return;
    res.statusCode = status;
    res.setHeader('Content-Type', 'application/json');
    const enc = this.encodingFor(req);
    if (enc) {
      const buf = enc === 'gzip' ? zlib.gzipSync(text, { level: OMNI_GZIP_LEVEL }) : zlib.deflateRawSync(text, { level: OMNI_GZIP_LEVEL });
      res.setHeader('Content-Encoding', enc);
      res.end(buf);
    } else res.end(text);
  }

  private encodingFor(req: IncomingMessage): 'gzip' | 'deflate' | undefined {
    if (req.headers.upgrade !== undefined) return undefined;
    return pickEncoding(req.headers['accept-encoding']);
  }
}

export interface ListenOptions {
  host?: string;
  port?: number;
  /** PEM key and certificate: serve HTTPS. */
  tls?: { key: string; cert: string };
}

export interface Listening {
  server: Server;
  /** `http://127.0.0.1:PORT` or `https://...`. */
  endpoint: string;
  close(): Promise<void>;
}

/** Serves the gateway on one listener (default 127.0.0.1, a free port). */
export async function listen(gateway: Gateway, opts: ListenOptions = {}): Promise<Listening> {
  const host = opts.host ?? '127.0.0.1';
  const server: Server = opts.tls ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, gateway.handle) : createServer(gateway.handle);
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const hostPart = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const endpoint = `${opts.tls ? 'https' : 'http'}://${hostPart}:${addr.port}`;
  return {
    server,
    endpoint,
    close: () =>
      new Promise<void>((resolve) => {
        gateway.breakStreams();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
