// src/omni-sim/gateway: the simulated Omni on the wire: the HTTP server and its routes (this file),
// requests read as grpc-gateway reads them (request.ts, request-json.ts), answers written as Omni
// writes them (answer.ts), resources in and out (resources.ts), fault injection (faults.ts), Omni
// 1.9's write budget and a throttling proxy (throttle.ts), and a certificate for --tls (tls.ts).
//
// The gateway of the simulated Omni: `POST /api/cosi.resource.State/<Method>` with grpc-gateway's
// conventions as Omni configures them (docs/omni-wire.md 1.3): protojson bodies (snake_case out, unknown
// fields rejected), NDJSON streams flushed per line, errors as google.rpc.Status, gzip only for a bare
// `gzip` token. Every call is authenticated by the injected authenticator and served by the injected
// StateApi (access.ts in the sim, the bare store in tests). Nothing a client sends may crash it.
// Reading a request is request.ts, writing an answer answer.ts, resources in and out
// resources.ts; this file routes each call and serves List and Watch streams.

import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { encodeMessage } from '../../omni-api/protojson.js';
import { fullMethod, Methods, type MethodName } from '../../omni-api/wire.js';
import type { Identity, SimClock, SimEvent, StateApi, WatchParams } from '../api.js';
import { gatewayBehaviour, type GatewayBehaviour } from '../behaviour.js';
import { WRITE_METHODS, type Faults } from './faults.js';
import {
  Body,
  encodingFor,
  GRPC_CONTENT_TYPE,
  line,
  sendProxyRefusal,
  sendStatus,
  sendStreamError,
  sendUnary,
  statusJson,
  statusOf,
} from './answer.js';
import { decodeRequest, MAX_REQUEST_BYTES, readBody, writtenPointer } from './request.js';
import { ResourceCodec } from './resources.js';
import { queryFromWire } from '../store/query.js';
import { StreamBrokenError } from '../store/store.js';
import { grpcTimeoutMs, throttled, type ThrottleCall } from './throttle.js';
import { parseVersion, type OmniVersion } from '../version.js';

export type Authenticator = (headers: IncomingHttpHeaders, fullMethod: string) => Promise<Identity>;

export interface GatewayOptions {
  state: StateApi;
  authenticate: Authenticator;
  clock: SimClock;
  /** The Omni version it answers as (behaviour.ts: routes, yaml_spec, ...). */
  omniVersion: OmniVersion | string;
  faults?: Faults;
}

const PREFIX = '/api/cosi.resource.State/';
const TEARDOWN_METHODS = new Set<string>(['Teardown', 'TeardownAndDestroy']);
/** The calls that write, and so may wait for Omni's write budget or lose their answer. */
const WRITES = new Set<string>(WRITE_METHODS);

export class Gateway {
  private readonly streams = new Set<ServerResponse>();
  private readonly resources: ResourceCodec;
  private readonly behaviour: GatewayBehaviour;

  constructor(private readonly opts: GatewayOptions) {
    const version = typeof opts.omniVersion === 'string' ? parseVersion(opts.omniVersion) : opts.omniVersion;
    this.behaviour = gatewayBehaviour(version);
    this.resources = new ResourceCodec(version);
  }

  /** The request listener for node:http / node:https. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch(() => {
      // Last resort: never let a request take the process down.
      if (!res.headersSent) {
        try {
          sendUnary(req, res, 500, { code: GrpcCode.Internal, message: 'internal error' });
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
      sendProxyRefusal(res, refused);
      return;
    }
    const arrived = faults?.now();
    res.setHeader('Vary', 'Accept-Encoding');
    const path = (req.url ?? '').split('?')[0] ?? '';
    const name = path.startsWith(PREFIX) ? path.slice(PREFIX.length) : '';
    const known = Object.hasOwn(Methods, name) && (this.behaviour.teardownRoutes || !TEARDOWN_METHODS.has(name));
    if (!known) {
      req.resume();
      sendUnary(req, res, 404, { code: GrpcCode.NotFound, message: 'Not Found' });
      return;
    }
    if (req.method !== 'POST') {
      req.resume();
      sendUnary(req, res, 501, { code: GrpcCode.Unimplemented, message: 'Method Not Allowed' });
      return;
    }
    const method = name as MethodName;
    // grpc-gateway reads Grpc-Timeout into the call's deadline before it decodes the body.
    let timeoutMs: number | undefined;
    try {
      timeoutMs = grpcTimeoutMs(req.headers['grpc-timeout']);
    } catch (e) {
      req.resume();
      sendStatus(req, res, statusOf(e));
      return;
    }
    const call: ThrottleCall = {
      deadline: timeoutMs !== undefined && arrived !== undefined ? arrived + timeoutMs : undefined,
    };
    const text = await readBody(req);
    if (text === undefined) {
      sendStatus(req, res, {
        code: GrpcCode.ResourceExhausted,
        message: `grpc: received message larger than max (> ${MAX_REQUEST_BYTES})`,
      });
      return;
    }
    let msg: Record<string, unknown>;
    try {
      msg = decodeRequest(Methods[method].request, text, this.behaviour.protoErrorPrefix);
    } catch (e) {
      sendStatus(req, res, { code: GrpcCode.InvalidArgument, message: (e as Error).message });
      return;
    }
    if (faults) {
      await faults.beforeCall();
      if (faults.takeUnavailable()) {
        sendStatus(req, res, { code: GrpcCode.Unavailable, message: 'connection error: simulated outage' });
        return;
      }
    }
    const stream = Methods[method].stream;
    let who: Identity;
    try {
      who = await this.opts.authenticate(req.headers, fullMethod(method));
    } catch (e) {
      if (stream) sendStreamError(req, res, statusOf(e));
      else sendStatus(req, res, statusOf(e));
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
      sendUnary(req, res, 200, encodeMessage(Methods[method].response, out));
    } catch (e) {
      sendStatus(req, res, statusOf(e));
    }
  }

  /** A unary call; a write waits for Omni's write budget when the throttle is on (throttle.ts). */
  private async unary(
    method: MethodName,
    who: Identity,
    msg: Record<string, unknown>,
    res: ServerResponse,
    call: ThrottleCall,
  ): Promise<Record<string, unknown>> {
    const faults = this.opts.faults;
    const throttle = faults?.throttle;
    if (!faults || !throttle || !WRITES.has(method)) return this.apply(method, who, msg, res);
    const gone = new Promise<void>((resolve) => res.once('close', () => resolve()));
    return throttled(
      throttle,
      call,
      (ms) => faults.waitForBudget(ms, gone),
      () => this.apply(method, who, msg, res),
    );
  }

  private async apply(
    method: MethodName,
    who: Identity,
    msg: Record<string, unknown>,
    res: ServerResponse,
  ): Promise<Record<string, unknown>> {
    const { state } = this.opts;
    const opts = (msg['options'] ?? {}) as Record<string, unknown>;
    const owner = String(opts['owner'] ?? '');
    const ptr = (): Pointer => ({
      namespace: String(msg['namespace']),
      type: String(msg['type']),
      id: String(msg['id']),
    });
    switch (method) {
      case 'Get':
        return { resource: this.resources.out(state.get(who, ptr())) };
      case 'Create':
        return { resource: this.resources.out(state.create(who, this.resources.incoming(msg['resource']), owner)) };
      case 'Update': {
        const r = this.resources.incoming(msg['new_resource']);
        const phase = opts['expected_phase'] as string | undefined;
        if (phase !== undefined && phase !== 'running' && phase !== 'tearingDown') {
          throw errorFromStatus(GrpcCode.InvalidArgument, `unknown phase "${phase}"`);
        }
        this.opts.faults?.beforeUpdate(r.metadata);
        return { resource: this.resources.out(state.update(who, r, owner, phase)) };
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

  private async list(
    req: IncomingMessage,
    res: ServerResponse,
    who: Identity,
    msg: Record<string, unknown>,
  ): Promise<void> {
    const opts = (msg['options'] ?? {}) as Record<string, unknown>;
    let items: Resource[];
    try {
      items = this.opts.state.list(
        who,
        String(msg['namespace']),
        String(msg['type']),
        queryFromWire(opts['label_query'], opts['id_query']),
      );
    } catch (e) {
      sendStreamError(req, res, statusOf(e));
      return;
    }
    const body = this.startStream(req, res);
    // One message (and one flush) per item, as Omni sends a List: a client pays an inflate step per
    // item of a gzip List, and the benchmark should see that cost.
    await body.writeAll(items, (r) =>
      line({ result: encodeMessage(Methods.List.response, { resource: this.resources.out(r) }) }),
    );
    this.streams.delete(res);
    body.end();
  }

  private async watch(
    req: IncomingMessage,
    res: ServerResponse,
    who: Identity,
    msg: Record<string, unknown>,
  ): Promise<void> {
    if (msg['options'] === undefined && this.behaviour.watchWithoutOptionsPanics) {
      sendStreamError(req, res, {
        code: GrpcCode.Internal,
        message: 'runtime error: invalid memory address or nil pointer dereference',
      });
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
      sendStreamError(req, res, statusOf(e));
      return;
    }
    const body = this.startStream(req, res);
    body.write(line({ result: {} }));
    const dropAfter = this.opts.faults?.dropWatchAfterEvents();
    let sent = 0;
    try {
      for await (const batch of batches) {
        if (res.destroyed) break;
        body.write(
          line({
            result: encodeMessage(Methods.Watch.response, { event: batch.map((e) => this.resources.eventOut(e)) }),
          }),
        );
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
        body.write(line({ error: statusJson(statusOf(e)) }));
        body.end();
      }
    } finally {
      ac.abort();
      this.streams.delete(res);
    }
  }

  private startStream(req: IncomingMessage, res: ServerResponse): Body {
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader(GRPC_CONTENT_TYPE[0], GRPC_CONTENT_TYPE[1]);
    this.streams.add(res);
    res.on('close', () => this.streams.delete(res));
    const body = new Body(res, encodingFor(req));
    res.flushHeaders();
    return body;
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
  const server: Server = opts.tls
    ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, gateway.handle)
    : createServer(gateway.handle);
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
