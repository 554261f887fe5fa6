// src/omni-sim/gateway: the simulated Omni on the wire: the gateway and its routes (this file), its
// List and Watch streams (streams.ts), its listener (listen.ts), requests read as grpc-gateway reads
// them (request.ts, request-json.ts), answers written as Omni writes them (answer.ts), resources in and
// out (resources.ts), fault injection (faults.ts, its settings fault-config.ts), Omni 1.9's write
// budget (throttle.ts) and a throttling proxy (proxy-limit.ts) over one token bucket (token-bucket.ts),
// and a certificate for --tls (tls.ts).
//
// The gateway of the simulated Omni: `POST /api/cosi.resource.State/<Method>` with grpc-gateway's
// conventions as Omni configures them (docs/omni-wire.md 1.3): protojson bodies (snake_case out, unknown
// fields rejected), NDJSON streams flushed per line, errors as google.rpc.Status, gzip only for a bare
// `gzip` token. Every call is authenticated by the injected authenticator and served by the injected
// StateApi (access.ts in the sim, the bare store in tests). Nothing a client sends may crash it.
// Reading a request is request.ts, writing an answer answer.ts, resources in and out
// resources.ts, List and Watch streams streams.ts; this file routes each call and answers the unary
// ones.

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Pointer } from '../../omni-api/resource.js';
import { encodeMessage } from '../../omni-api/protojson.js';
import { fullMethod, Methods, type MethodName } from '../../omni-api/wire.js';
import type { Identity, SimClock, StateApi } from '../api.js';
import { gatewayBehaviour, type GatewayBehaviour } from '../behaviour.js';
import type { Faults } from './faults.js';
import { WRITE_METHODS } from './fault-config.js';
import { GRPC_CONTENT_TYPE, sendProxyRefusal, sendStatus, sendStreamError, sendUnary, statusOf } from './answer.js';
import { decodeRequest, MAX_REQUEST_BYTES, readBody, writtenPointer } from './request.js';
import { ResourceCodec } from './resources.js';
import { Streams } from './streams.js';
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
  /** Resources the gateway will serve, about (the store's size): its rendered yaml_spec cache is sized by it. */
  resources?: number;
}

const PREFIX = '/api/cosi.resource.State/';
const TEARDOWN_METHODS = new Set<string>(['Teardown', 'TeardownAndDestroy']);
/** The calls that write, and so may wait for Omni's write budget or lose their answer. */
const WRITES = new Set<string>(WRITE_METHODS);

export class Gateway {
  private readonly streams: Streams;
  private readonly resources: ResourceCodec;
  private readonly behaviour: GatewayBehaviour;

  constructor(private readonly opts: GatewayOptions) {
    const version = typeof opts.omniVersion === 'string' ? parseVersion(opts.omniVersion) : opts.omniVersion;
    this.behaviour = gatewayBehaviour(version);
    this.resources = new ResourceCodec(version, opts.resources);
    this.streams = new Streams({
      state: opts.state,
      resources: this.resources,
      behaviour: this.behaviour,
      faults: opts.faults,
    });
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
    this.streams.breakAll();
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** One call, in grpc-gateway's order: route, deadline, body, (faults), authentication, then the method. */
  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    res.setHeader('Date', new Date(this.opts.clock.now()).toUTCString());
    const faults = this.opts.faults;
    if (await this.refusedByProxy(req, res)) return;
    const arrived = faults?.now();
    res.setHeader('Vary', 'Accept-Encoding');
    const method = this.route(req, res);
    if (method === undefined) return;
    const call = await this.readCall(req, res, method, arrived);
    if (call === undefined) return;
    if (faults) {
      await faults.beforeCall();
      if (faults.takeUnavailable()) {
        sendStatus(req, res, { code: GrpcCode.Unavailable, message: 'connection error: simulated outage' });
        return;
      }
    }
    const who = await this.authenticate(req, res, method);
    if (who === undefined) return;
    if (method === 'Watch') return this.streams.watch(req, res, who, call.msg);
    if (method === 'List') return this.streams.list(req, res, who, call.msg);
    await this.answerUnary(req, res, method, who, call);
  }

  /** A rate-limiting proxy answers before Omni sees anything (the network's latency still counts). */
  private async refusedByProxy(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const faults = this.opts.faults;
    const refused = faults?.proxyLimit?.take();
    if (!refused || !faults) return false;
    req.resume();
    await faults.beforeCall();
    sendProxyRefusal(res, refused);
    return true;
  }

  /** The method a path names, as this Omni version routes it; undefined once a 404 or 501 is sent. */
  private route(req: IncomingMessage, res: ServerResponse): MethodName | undefined {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const name = path.startsWith(PREFIX) ? path.slice(PREFIX.length) : '';
    const known = Object.hasOwn(Methods, name) && (this.behaviour.teardownRoutes || !TEARDOWN_METHODS.has(name));
    if (!known) {
      req.resume();
      sendUnary(req, res, 404, { code: GrpcCode.NotFound, message: 'Not Found' });
      return undefined;
    }
    if (req.method !== 'POST') {
      req.resume();
      sendUnary(req, res, 501, { code: GrpcCode.Unimplemented, message: 'Method Not Allowed' });
      return undefined;
    }
    return name as MethodName;
  }

  /**
   * The call's deadline and decoded request; undefined once the error is sent. grpc-gateway reads
   * Grpc-Timeout into the call's deadline before it decodes the body.
   */
  private async readCall(
    req: IncomingMessage,
    res: ServerResponse,
    method: MethodName,
    arrived: number | undefined,
  ): Promise<{ msg: Record<string, unknown>; throttle: ThrottleCall } | undefined> {
    let timeoutMs: number | undefined;
    try {
      timeoutMs = grpcTimeoutMs(req.headers['grpc-timeout']);
    } catch (e) {
      req.resume();
      sendStatus(req, res, statusOf(e));
      return undefined;
    }
    const throttle: ThrottleCall = {
      deadline: timeoutMs !== undefined && arrived !== undefined ? arrived + timeoutMs : undefined,
    };
    const text = await readBody(req);
    if (text === undefined) {
      sendStatus(req, res, {
        code: GrpcCode.ResourceExhausted,
        message: `grpc: received message larger than max (> ${MAX_REQUEST_BYTES})`,
      });
      return undefined;
    }
    try {
      return { msg: decodeRequest(Methods[method].request, text, this.behaviour.protoErrorPrefix), throttle };
    } catch (e) {
      sendStatus(req, res, { code: GrpcCode.InvalidArgument, message: (e as Error).message });
      return undefined;
    }
  }

  /** The caller's identity; undefined once the refusal is sent (as a stream error for a stream). */
  private async authenticate(
    req: IncomingMessage,
    res: ServerResponse,
    method: MethodName,
  ): Promise<Identity | undefined> {
    try {
      return await this.opts.authenticate(req.headers, fullMethod(method));
    } catch (e) {
      if (Methods[method].stream) sendStreamError(req, res, statusOf(e));
      else sendStatus(req, res, statusOf(e));
      return undefined;
    }
  }

  /** A unary call answered: its result, its error, or (a lost-answer fault) a connection cut after it applied. */
  private async answerUnary(
    req: IncomingMessage,
    res: ServerResponse,
    method: MethodName,
    who: Identity,
    call: { msg: Record<string, unknown>; throttle: ThrottleCall },
  ): Promise<void> {
    const faults = this.opts.faults;
    try {
      const out = await this.unary(method, who, call.msg, res, call.throttle);
      if (faults && WRITES.has(method) && faults.takeLostAnswer(method, writtenPointer(method, call.msg))) {
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
}
