// Calls to Omni's HTTP/JSON gateway (omni-wire.md 1.3): `POST /api/cosi.resource.State/<Method>`,
// unary JSON bodies and NDJSON streams, over one shared undici dispatcher per client.
//
// Everything about a single HTTP exchange lives here: signing (re-signed on every attempt), gzip,
// bounded reads (body.ts), error bodies -> typed errors (the gRPC code comes from the body: 400 is both
// InvalidArgument and FailedPrecondition; an error status without one is never taken for Omni's
// answer), per-call deadlines and cancellation, the retry policy (Unavailable and broken connections,
// capped jittered backoff), and the bounded clock-skew correction on "invalid signature".
//
// What a caller decodes from an answer runs inside the call (`decode`/`map`): a WireError it throws,
// like one from reading the body, becomes a ProtocolError naming the call and the endpoint, and is
// never retried.

import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import * as tls from 'node:tls';
import { Agent, EnvHttpProxyAgent, type Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { escapeControl } from '../untrusted.js';
import { VERSION } from '../version.js';
import { gzipChoice, type CompressionPolicy, type GzipChoice } from './compression.js';
import { DEFAULT_READ_LIMITS, ReadBudget, discard, encodingOf, ndjsonLines, parseJson, parseJsonText, readBody, snippet, streamOf, type Encoding, type ReadLimits } from './body.js';
import {
  CanceledError,
  ClientError,
  ClockSkewError,
  DeadlineExceededError,
  OmniError,
  ProtocolError,
  RedirectError,
  TransportError,
  UnauthenticatedError,
  UnavailableError,
  errorFromStatus,
  httpStatusFromGrpcCode,
  type OmniErrorContext,
} from './errors.js';
import { onAbort } from './abort.js';
import type { Pointer } from './resource.js';
import { describePointer } from './resource.js';
import { WireError, fullMethod, type MethodName } from './wire.js';

export interface Endpoint {
  /** What undici connects to: `https://host:443` or `http://host:80`. */
  origin: string;
  tls: boolean;
}

/**
 * Like the Go client (omni-wire.md 1.1): `https://` is TLS (port 443 by default); `http://` and
 * `grpc://` are plaintext (port 80 by default). Any path is ignored: the gateway lives at `/api/`.
 */
export function normalizeEndpoint(raw: string): Endpoint {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ClientError('STUB_CONFIG', `invalid Omni endpoint "${raw}": expected https://host[:port], http://host[:port] or grpc://host:port`);
  }
  const scheme = url.protocol.replace(/:$/, '').toLowerCase();
  if (!['https', 'http', 'grpc'].includes(scheme) || url.hostname === '') {
    throw new ClientError('STUB_CONFIG', `invalid Omni endpoint "${raw}": expected https://host[:port], http://host[:port] or grpc://host:port`);
  }
  const isTls = scheme === 'https';
  const port = url.port !== '' ? url.port : isTls ? '443' : '80';
  return { origin: `${isTls ? 'https' : 'http'}://${url.hostname}:${port}`, tls: isTls };
}

/** What the transport needs from auth.ts's Signer. */
export interface RequestSigner {
  readonly name: string;
  readonly fingerprint: string;
  headers(fullMethod: string, timestampSec: number): Promise<Record<string, string>>;
}

export type DelayFn = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface BackoffOptions {
  baseMs: number;
  capMs: number;
}

/** Exponential backoff, capped, with jitter in [d/2, d): concurrent clients do not retry in step. */
export function jitteredBackoff(attempt: number, b: BackoffOptions, random: () => number = Math.random): number {
  const d = Math.min(b.capMs, b.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + (random() * d) / 2);
}

export const defaultDelay: DelayFn = (ms, signal) => sleep(ms, undefined, signal ? { signal } : {});

export interface TransportOptions {
  endpoint: string;
  signer: RequestSigner;
  caFile?: string;
  insecureSkipTlsVerify?: boolean;
  /** Upper bound of connections to Omni (per origin). Default 16. */
  connections?: number;
  /** Default per-call deadline in ms (0 = none). Default 30 s. */
  timeoutMs?: number;
  /** Extra attempts on Unavailable and broken connections. Default 4. */
  retries?: number;
  backoff?: BackoffOptions;
  logger?: Logger;
  now?: () => number;
  delay?: DelayFn;
  random?: () => number;
  /** Where proxy variables are read from; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Which calls ask Omni for gzip (compression.ts). Default 'auto'. */
  gzip?: CompressionPolicy;
  /** Read limits; unset ones are body.ts DEFAULT_READ_LIMITS (`listItems` is `--max-list-items`). */
  limits?: Partial<ReadLimits>;
}

export interface CallContext {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
  /** The resource the call is about, for error messages. */
  resource?: Pointer | undefined;
  /** Called before the call is sent again after a failed attempt (that attempt may have reached Omni). */
  onRetry?: (() => void) | undefined;
}

/** An open NDJSON stream whose first message has arrived. Iterate for the rest; `close` to stop. */
export interface OpenStream<T = unknown> extends AsyncIterable<T> {
  first: T;
  close(): void;
}

export interface TransportStats {
  callsByMethod: Record<string, number>;
}

/** Skew beyond which we sign with the server's time (Omni accepts 5 minutes). */
const MAX_SKEW_MS = 4 * 60_000;
/**
 * The largest offset adopted from a Date header. Beyond it one of the clocks is badly wrong, or the
 * header is not Omni's (a proxy, an attacker): signing a month ahead would only spread the damage.
 */
export const MAX_ADOPTED_OFFSET_MS = 24 * 3_600_000;
const RETRIABLE_CAUSES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'Z_BUF_ERROR',
]);
const retriable = new WeakSet<Error>();
const STREAM_METHODS = new Set<MethodName>(['List', 'Watch']);
const serverDates = new WeakMap<Error, string>();
const USER_AGENT = `stub-provider/${VERSION}`;

/** One call's cancellation: the caller's signal, the deadline, and close(). */
interface Scope {
  signal: AbortSignal;
  closeAbort(): void;
  stopTimer(): void;
  dispose(): void;
  /** The error to throw once `signal` has aborted: why it aborted decides which. */
  abortError(): OmniError;
}

/** Calls that share one slot at most. */
const SLOT_SHARING = 8;

/**
 * The cancellation shared by the unary and List calls that have the same caller's signal and a
 * deadline in the same slot: one AbortController and one timer per slot instead of one per call.
 * Per-call controllers and timers live across the round trip, survive young-generation collections
 * and are promoted to the old space as garbage (bench: about a third of what a call promoted), which
 * is what grew the heap. A slot is timeoutMs/16 wide, at most 1 s: a deadline fires up to that late.
 */
class DeadlineSlot {
  readonly ac = new AbortController();
  why: 'caller' | 'timeout' | 'closed' | undefined;
  refs = 0;
  timer: NodeJS.Timeout | undefined;
  unsubscribe: (() => void) | undefined;
  callerSignal: AbortSignal | undefined;
  /** `owner` undefined: a slot of one call's own (a Watch), never shared and never looked up. */
  constructor(
    readonly owner: Map<AbortSignal | undefined, Map<number, DeadlineSlot>> | undefined,
    readonly key: number,
  ) {
    // Every call of the slot passes this signal to undici, which listens on it while the call lasts.
    setMaxListeners(0, this.ac.signal);
  }

  abort(why: 'caller' | 'timeout' | 'closed', reason: unknown): void {
    this.why ??= why;
    this.detach();
    this.ac.abort(reason);
  }

  closeAbort(): void {
    this.abort('closed', new Error('client closed'));
  }

  /** Forgets the slot: calls made from now on get a fresh one. */
  detach(): void {
    clearTimeout(this.timer);
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    const slots = this.owner?.get(this.callerSignal);
    if (slots?.get(this.key) === this) {
      slots.delete(this.key);
      if (slots.size === 0) this.owner?.delete(this.callerSignal);
    }
  }
}

/** One call's view of a shared DeadlineSlot (methods on the prototype: no closures per call). */
class SlotScope implements Scope {
  constructor(
    readonly slot: DeadlineSlot,
    readonly method: MethodName,
    readonly ctx: CallContext,
    readonly timeoutMs: number,
    readonly inflight: Set<Cancellable>,
  ) {}

  get signal(): AbortSignal {
    return this.slot.ac.signal;
  }

  closeAbort(): void {
    this.slot.closeAbort();
  }

  stopTimer(): void {
    // A shared slot's timer serves other calls too; only openStream stops one, on a slot of its own.
    if (!this.slot.owner) clearTimeout(this.slot.timer);
  }

  dispose(): void {
    const slot = this.slot;
    if (--slot.refs > 0) return;
    slot.detach();
    this.inflight.delete(slot);
  }

  abortError(): OmniError {
    return abortErrorFor(this.slot.why, this.method, this.ctx, this.timeoutMs);
  }
}

interface Cancellable {
  closeAbort(): void;
}

function abortErrorFor(why: 'caller' | 'timeout' | 'closed' | undefined, method: MethodName, ctx: CallContext, timeoutMs: number): OmniError {
  const c = errCtx(method, ctx);
  if (why === 'timeout') return new DeadlineExceededError(`no answer within ${timeoutMs} ms (client deadline)`, c);
  if (why === 'caller' || why === undefined) return new CanceledError('cancelled by the caller', { ...c, cause: ctx.signal?.reason });
  return new CanceledError('the client was closed', c);
}

export type DispatcherKind = 'direct' | 'proxy';

export class Transport {
  readonly endpoint: Endpoint;
  readonly dispatcherKind: DispatcherKind;
  #dispatcher: Dispatcher;
  #streamDispatcher: Dispatcher;
  #signer: RequestSigner;
  #timeoutMs: number;
  #retries: number;
  #backoff: BackoffOptions;
  #log: Logger;
  #now: () => number;
  #delay: DelayFn;
  #random: () => number;
  #gzip: GzipChoice;
  #limits: ReadLimits;
  #budget: ReadBudget;
  #offsetMs = 0;
  #calls: Record<string, number> = {};
  #inflight = new Set<Cancellable>();
  #headers = new WeakMap<Record<string, string>, Record<string, string>>();
  #slots = new Map<AbortSignal | undefined, Map<number, DeadlineSlot>>();
  #closed = false;

  constructor(opts: TransportOptions) {
    this.endpoint = normalizeEndpoint(opts.endpoint);
    this.#signer = opts.signer;
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#retries = opts.retries ?? 4;
    this.#backoff = opts.backoff ?? { baseMs: 100, capMs: 5_000 };
    this.#log = opts.logger ?? silentLogger();
    this.#now = opts.now ?? Date.now;
    this.#delay = opts.delay ?? defaultDelay;
    this.#random = opts.random ?? Math.random;
    this.#limits = { ...DEFAULT_READ_LIMITS, ...definedOnly(opts.limits ?? {}) };
    this.#budget = new ReadBudget(this.#limits.bufferedBytes);

    const tlsOpts = tlsOptions(opts);
    const env = opts.env ?? process.env;
    const httpProxy = env['http_proxy'] ?? env['HTTP_PROXY'] ?? '';
    const httpsProxy = env['https_proxy'] ?? env['HTTPS_PROXY'] ?? '';
    const noProxy = env['no_proxy'] ?? env['NO_PROXY'] ?? '';
    // undici's EnvHttpProxyAgent falls back from the https proxy to the http one, like curl and Go.
    const proxy = this.endpoint.tls ? httpsProxy || httpProxy : httpProxy;
    const dispatcher = (connections: number | undefined): Dispatcher => {
      const agentOpts: Agent.Options = {
        ...(connections !== undefined ? { connections } : {}),
        // Omni's server sets no idle timeout; keep connections for reuse across bursts of calls.
        keepAliveTimeout: 30_000,
        keepAliveMaxTimeout: 600_000,
        connect: tlsOpts,
      };
      // Passed explicitly (empty = none) so that only `env` counts, not whatever process.env holds.
      return proxy ? new EnvHttpProxyAgent({ ...agentOpts, httpProxy, httpsProxy, noProxy, requestTls: tlsOpts }) : new Agent(agentOpts);
    };
    this.#dispatcher = dispatcher(opts.connections ?? 16);
    // A Watch holds its connection for as long as it is open: watches get connections of their own,
    // as many as are open (one per kind watched), so that they never take the calls' connections
    // (with --concurrency 2 and two watches open, no call could be sent at all).
    this.#streamDispatcher = dispatcher(undefined);
    this.dispatcherKind = proxy ? 'proxy' : 'direct';
    this.#gzip = gzipChoice(opts.gzip ?? 'auto', this.endpoint.origin, proxy !== '');
    if (proxy) this.#log.debug({ proxy: redactUrl(proxy), noProxy }, 'using an HTTP proxy from the environment for Omni');
  }

  /** Milliseconds added to the local clock when signing (0 unless Omni's clock was adopted). */
  clockOffsetMs(): number {
    return this.#offsetMs;
  }

  stats(): TransportStats {
    return { callsByMethod: { ...this.#calls } };
  }

  /** Cancels every call in flight (streams included) and closes the connections. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const scope of this.#inflight) scope.closeAbort();
    await Promise.all([this.#dispatcher.close(), this.#streamDispatcher.close()]);
  }

  /** A unary call: the JSON answer, passed through `decode` (which may throw a WireError). */
  async unary<T = unknown>(method: MethodName, body: unknown, ctx: CallContext = {}, decode: (answer: unknown) => T = (a) => a as T): Promise<T> {
    const scope = this.#sharedScope(method, ctx);
    try {
      return await this.#withRetries(method, ctx, scope, async () => {
        const res = await this.#send(method, body, scope.signal);
        if (res.statusCode !== 200) throw await this.#httpError(method, ctx, res);
        return decode(parseJson(await this.#readBody(res), 'an answer'));
      });
    } finally {
      scope.dispose();
    }
  }

  /**
   * A server stream read to the end (List): the `result` of every line, each passed through `map` as
   * it arrives (so that a large List never holds its raw JSON and its decoded form at once).
   * At most `limits.listItems` results. Retried as a whole: `reader` makes the `map` of each attempt,
   * so that what it remembers (the IDs seen) starts over with the answer.
   */
  async collect<T = unknown>(method: MethodName, body: unknown, ctx: CallContext = {}, reader: () => (result: unknown) => T = () => (r) => r as T): Promise<T[]> {
    const scope = this.#sharedScope(method, ctx);
    const max = this.#limits.listItems;
    try {
      return await this.#withRetries(method, ctx, scope, async () => {
        const res = await this.#send(method, body, scope.signal);
        if (res.statusCode !== 200) throw await this.#httpError(method, ctx, res);
        const out: T[] = [];
        const map = reader();
        for await (const r of this.#results(method, ctx, res)) {
          if (out.length >= max) throw new WireError(`more than ${max} items in one ${method}`, 'STUB_LIST_TOO_LONG');
          out.push(map(r));
        }
        return out;
      });
    } finally {
      scope.dispose();
    }
  }

  /**
   * Opens a server stream (Watch) and waits for its first message; the deadline covers only that.
   * Every message, the first included, is passed through `map` (which may throw a WireError).
   * Failures before the first message are retried; later ones are thrown to the reader.
   */
  async openStream<T = unknown>(method: MethodName, body: unknown, ctx: CallContext = {}, map: (result: unknown) => T = (r) => r as T): Promise<OpenStream<T>> {
    const scope = this.#scope(method, ctx);
    let opened: { first: T; it: AsyncIterator<unknown>; res: Dispatcher.ResponseData };
    try {
      opened = await this.#withRetries(method, ctx, scope, async () => {
        const res = await this.#send(method, body, scope.signal, { bodyTimeout: 0 });
        if (res.statusCode !== 200) throw await this.#httpError(method, ctx, res);
        const it = this.#results(method, ctx, res)[Symbol.asyncIterator]();
        let r: IteratorResult<unknown>;
        try {
          r = await it.next();
        } catch (e) {
          discard(res.body);
          throw e;
        }
        if (r.done) {
          const e = new TransportError(`${where(method, ctx)}: the stream ended before its first message`);
          retriable.add(e);
          throw e;
        }
        try {
          return { first: map(r.value), it, res };
        } catch (e) {
          discard(res.body);
          throw e;
        }
      });
    } catch (e) {
      scope.dispose();
      throw e;
    }
    scope.stopTimer();
    const { first, it, res } = opened;
    const close = (): void => {
      res.body.destroy();
      scope.dispose();
    };
    const classify = (e: unknown): Error => this.#classify(method, ctx, scope, e);
    return {
      first,
      close,
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<T>> => {
          try {
            const r = await it.next();
            if (r.done) {
              close();
              return { done: true, value: undefined };
            }
            return { done: false, value: map(r.value) };
          } catch (e) {
            close();
            throw classify(e);
          }
        },
        return: async () => {
          close();
          return { done: true, value: undefined };
        },
      }),
    };
  }

  // -------------------------------------------------------------------------------------------

  /** A scope on the shared slot of this caller's signal and deadline (see DeadlineSlot). */
  #sharedScope(method: MethodName, ctx: CallContext): Scope {
    const timeoutMs = ctx.timeoutMs ?? this.#timeoutMs;
    const now = Date.now();
    const width = Math.min(1000, Math.max(1, Math.floor(timeoutMs / 16)));
    const key = timeoutMs > 0 ? Math.ceil((now + timeoutMs) / width) * width : Infinity;
    const callerSignal = ctx.signal;
    let slots = this.#slots.get(callerSignal);
    let slot = slots?.get(key);
    // A full slot is replaced for new calls (it lives on for its own): undici adds an abort listener
    // per call, and Node's EventTarget checks every listener already there on each add.
    if (!slot || slot.ac.signal.aborted || slot.refs >= SLOT_SHARING) {
      if (!slots) {
        slots = new Map();
        this.#slots.set(callerSignal, slots);
      }
      slot = this.#newSlot(this.#slots, key, timeoutMs > 0 ? key - now : undefined, callerSignal);
      slots.set(key, slot);
    }
    slot.refs++;
    return new SlotScope(slot, method, ctx, timeoutMs, this.#inflight);
  }

  /** A scope of its own (Watch): its deadline is stopped after the first message, so it is not shared. */
  #scope(method: MethodName, ctx: CallContext): Scope {
    const timeoutMs = ctx.timeoutMs ?? this.#timeoutMs;
    const slot = this.#newSlot(undefined, 0, timeoutMs > 0 ? timeoutMs : undefined, ctx.signal);
    slot.refs = 1;
    return new SlotScope(slot, method, ctx, timeoutMs, this.#inflight);
  }

  #newSlot(owner: DeadlineSlot['owner'], key: number, deadlineInMs: number | undefined, callerSignal: AbortSignal | undefined): DeadlineSlot {
    const s = new DeadlineSlot(owner, key);
    s.callerSignal = callerSignal;
    this.#inflight.add(s);
    if (deadlineInMs !== undefined) s.timer = setTimeout(() => s.abort('timeout', new Error('timeout')), deadlineInMs);
    if (callerSignal) s.unsubscribe = onAbort(callerSignal, () => s.abort('caller', callerSignal.reason));
    if (this.#closed) s.closeAbort();
    return s;
  }

  async #withRetries<T>(method: MethodName, ctx: CallContext, scope: Scope, attempt: () => Promise<T>): Promise<T> {
    let retries = 0;
    let skewRetried = false;
    for (;;) {
      // The offset this attempt signs with: a concurrent call may adopt Omni's clock meanwhile.
      const signedWithOffset = this.#offsetMs;
      try {
        if (scope.signal.aborted) throw scope.abortError();
        return await attempt();
      } catch (raw) {
        const e = this.#classify(method, ctx, scope, raw);
        if (scope.signal.aborted) throw e;
        if (e instanceof UnauthenticatedError && /invalid signature/i.test(e.omniMessage)) {
          if (!skewRetried && (this.#offsetMs !== signedWithOffset || this.#adoptServerClock(method, serverDates.get(e)))) {
            skewRetried = true;
            continue;
          }
          throw this.#refused(method, ctx, e);
        }
        if (!retriable.has(e) || retries >= this.#retries) throw e;
        ctx.onRetry?.();
        const ms = jitteredBackoff(retries++, this.#backoff, this.#random);
        this.#log.debug({ method, attempt: retries, delayMs: ms, err: e.message }, 'retrying an Omni call');
        try {
          await this.#delay(ms, scope.signal);
        } catch {
          throw scope.abortError();
        }
      }
    }
  }

  #classify(method: MethodName, ctx: CallContext, scope: Scope, raw: unknown): Error {
    if (scope.signal.aborted) return scope.abortError();
    if (raw instanceof OmniError || raw instanceof ClientError) return raw;
    if (raw instanceof WireError) {
      return new ProtocolError(raw.code, `${where(method, ctx)}: bad answer from Omni at ${this.endpoint.origin}: ${escapeControl(raw.message)}`);
    }
    const err = raw as NodeJS.ErrnoException;
    const code = typeof err?.code === 'string' ? err.code : undefined;
    const e = new TransportError(`${where(method, ctx)}: cannot reach Omni at ${this.endpoint.origin}: ${code ? `${code} ` : ''}${escapeControl(err?.message ?? String(raw))}`, { cause: raw });
    if (code && RETRIABLE_CAUSES.has(code)) retriable.add(e);
    return e;
  }

  /**
   * Adopts the server's clock when it differs by more than MAX_SKEW_MS from what we sign with, and by
   * at most MAX_ADOPTED_OFFSET_MS from the local clock; beyond that, a ClockSkewError naming both.
   */
  #adoptServerClock(method: MethodName, date: string | undefined): boolean {
    if (!date) return false;
    const serverMs = Date.parse(date);
    if (Number.isNaN(serverMs)) return false;
    const local = this.#now();
    if (Math.abs(serverMs - (local + this.#offsetMs)) <= MAX_SKEW_MS) return false;
    const offset = serverMs - local;
    if (Math.abs(offset) > MAX_ADOPTED_OFFSET_MS) {
      const hours = (Math.abs(offset) / 3_600_000).toFixed(1);
      throw new ClockSkewError(
        `${fullMethod(method)}: Omni at ${this.endpoint.origin} refused the signature ("invalid signature"); its Date header says ` +
          `${new Date(serverMs).toISOString()} and this machine's clock ${new Date(local).toISOString()}, ${hours} h ${offset > 0 ? 'behind' : 'ahead of'} it, ` +
          `more than the ${MAX_ADOPTED_OFFSET_MS / 3_600_000} h the client adopts: fix the clock that is wrong (NTP); if both are right, something between the stub and Omni rewrites the Date header`,
      );
    }
    this.#offsetMs = offset;
    this.#log.warn(
      { method: fullMethod(method), offsetMs: this.#offsetMs, serverDate: date },
      'the local clock differs from Omni\'s by more than 4 minutes; signing with Omni\'s time from now on (fix the clock: NTP)',
    );
    return true;
  }

  #refused(method: MethodName, ctx: CallContext, e: UnauthenticatedError): UnauthenticatedError {
    return new UnauthenticatedError(
      `${e.omniMessage}: Omni refused identity "${this.#signer.name}" with key fingerprint ${this.#signer.fingerprint} ` +
        '(the key is unknown to this Omni, expired, revoked or not confirmed; check the endpoint and the key)',
      { ...errCtx(method, ctx), ...(e.httpStatus !== undefined ? { httpStatus: e.httpStatus } : {}) },
    );
  }

  async #send(method: MethodName, body: unknown, signal: AbortSignal, extra: { bodyTimeout?: number } = {}): Promise<Dispatcher.ResponseData> {
    const fm = fullMethod(method);
    const ts = Math.floor((this.#now() + this.#offsetMs) / 1000);
    const signed = await this.#signer.headers(fm, ts);
    this.#calls[method] = (this.#calls[method] ?? 0) + 1;
    // The signer hands out the same object for a method within a second: the full header set is
    // built once per signature, not per call.
    let headers = this.#headers.get(signed);
    if (!headers) {
      headers = {
        'content-type': 'application/json',
        accept: 'application/json',
        // Omni's gzip handler picks only a bare `gzip` token; its `deflate` is raw DEFLATE (omni-wire.md 1.3).
        // No header at all (not `identity`) when gzip is not wanted: Omni then answers uncompressed.
        ...((STREAM_METHODS.has(method) ? this.#gzip.streams : this.#gzip.unary) ? { 'accept-encoding': 'gzip' } : {}),
        'user-agent': USER_AGENT,
        ...signed,
      };
      this.#headers.set(signed, headers);
    }
    return (method === 'Watch' ? this.#streamDispatcher : this.#dispatcher).request({
      origin: this.endpoint.origin,
      path: `/api${fm}`,
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal,
      ...extra,
    });
  }

  /** A unary body (or an error body), within the read limits. */
  #readBody(res: Dispatcher.ResponseData): Promise<Buffer> {
    return readBody(res.body, encodingOfAnswer(res), res.headers['content-length'], this.#limits, this.#budget);
  }

  /**
   * A non-200 answer. Only a google.rpc.Status body whose code maps to this very HTTP status is
   * Omni's error (a NotFound is evidence, so a bare 404 page of a proxy must never read as one). A
   * redirect is a configuration error; 502/503/504 without a status stay retriable transport errors.
   */
  async #httpError(method: MethodName, ctx: CallContext, res: Dispatcher.ResponseData): Promise<Error> {
    const http = res.statusCode;
    if (http >= 300 && http < 400) {
      discard(res.body);
      const loc = res.headers['location'];
      const target = Array.isArray(loc) ? loc[0] : loc;
      return new RedirectError(
        `${where(method, ctx)}: ${this.endpoint.origin} answered HTTP ${http} redirecting to ${target ? snippet(target, 300) : '(no Location header)'}: ` +
          "Omni's API never redirects, so a proxy, an ingress or a login page is in the way, or the endpoint is not Omni's API; " +
          "set --omni-api-endpoint to the URL of Omni's API itself",
      );
    }
    const raw = await this.#readBody(res);
    const st = parseStatusBody(raw);
    if (st && httpStatusFromGrpcCode(st.code) === http) {
      const e = errorFromStatus(st.code, st.message, { ...errCtx(method, ctx), httpStatus: http });
      if (e instanceof UnavailableError) retriable.add(e);
      const date = res.headers['date'];
      if (typeof date === 'string') serverDates.set(e, date);
      return e;
    }
    const what = `${where(method, ctx)}: ${this.endpoint.origin} answered HTTP ${http} without a gRPC status (google.rpc.Status) for it: ${snippet(raw)}`;
    if (http === 502 || http === 503 || http === 504) {
      const e = new TransportError(`${what}; a proxy or load balancer in front of Omni could not reach it`);
      retriable.add(e);
      return e;
    }
    return new ProtocolError('STUB_HTTP_STATUS', what);
  }

  /** The `result` of each NDJSON line; an `{"error":..}` line (after a 200) becomes the typed error. */
  async *#results(method: MethodName, ctx: CallContext, res: Dispatcher.ResponseData): AsyncGenerator<unknown> {
    const { src, meter } = streamOf(res.body, encodingOfAnswer(res), this.#limits);
    for await (const line of ndjsonLines(src, { maxLineBytes: this.#limits.lineBytes, budget: this.#budget, meter })) {
      const msg = parseJsonText(line, 'a stream line');
      if (!isObject(msg)) throw new WireError(`a stream line that is not a JSON object: ${snippet(line)}`);
      const o = msg as { result?: unknown; error?: unknown };
      if (o.error !== undefined && o.error !== null) {
        const st = statusOf(o.error);
        if (!st) throw new WireError(`a stream error line without a gRPC status: ${snippet(line)}`);
        const e = errorFromStatus(st.code, st.message, { ...errCtx(method, ctx), httpStatus: res.statusCode });
        if (e instanceof UnavailableError) retriable.add(e);
        throw e;
      }
      if (!isObject(o.result)) throw new WireError(`a stream line without a result object: ${snippet(line)}`);
      yield o.result;
    }
  }
}

/** The answer's Content-Encoding; one that was not asked for ends the exchange (the body is dropped). */
function encodingOfAnswer(res: Dispatcher.ResponseData): Encoding {
  try {
    return encodingOf(res.headers['content-encoding']);
  } catch (e) {
    discard(res.body);
    throw e;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function tlsOptions(opts: TransportOptions): tls.ConnectionOptions {
  const out: tls.ConnectionOptions = {};
  if (opts.insecureSkipTlsVerify) out.rejectUnauthorized = false;
  const getCAs = (tls as unknown as { getCACertificates?: (k: string) => string[] }).getCACertificates;
  // Node >= 22.15 can read the OS store; on Node 20 the default is Node's bundled store (plus
  // NODE_EXTRA_CA_CERTS, or the OS store with --use-openssl-ca).
  const base = (): string[] => {
    if (typeof getCAs !== 'function') return [...tls.rootCertificates];
    let system: string[] = [];
    try {
      system = getCAs('system');
    } catch {
      // no readable OS store
    }
    return [...getCAs('default'), ...system];
  };
  if (opts.caFile !== undefined) {
    let pem: string;
    try {
      pem = readFileSync(opts.caFile, 'utf8');
    } catch (e) {
      throw new ClientError('STUB_CONFIG', `cannot read the CA file ${opts.caFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new ClientError('STUB_CONFIG', `the CA file ${opts.caFile} holds no PEM certificate`);
    out.ca = [...base(), pem];
  } else if (typeof getCAs === 'function') {
    out.ca = base();
  }
  return out;
}

/** `{"code","message"}` or `{"error":{"code","message"}}` with a code 1..16 (a gRPC error), else undefined. */
function statusOf(v: unknown): { code: number; message: string } | undefined {
  if (!isObject(v)) return undefined;
  const o = isObject(v['error']) ? v['error'] : v;
  const code = o['code'];
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 1 || code > 16) return undefined;
  const message = o['message'];
  if (message !== undefined && typeof message !== 'string') return undefined;
  return { code, message: message ?? '' };
}

/** The status in an error body (a unary one, or the first line of a stream's), strictly UTF-8 and JSON. */
function parseStatusBody(raw: Buffer): { code: number; message: string } | undefined {
  if (!isUtf8(raw)) return undefined;
  const text = raw.toString('utf8');
  try {
    return statusOf(JSON.parse(text));
  } catch {
    const first = text.split('\n').find((l) => l.trim() !== '');
    try {
      return first !== undefined ? statusOf(JSON.parse(first)) : undefined;
    } catch {
      return undefined;
    }
  }
}

function errCtx(method: MethodName, ctx: CallContext): OmniErrorContext {
  return { method: fullMethod(method), ...(ctx.resource ? { resource: ctx.resource } : {}) };
}

/** The call and its resource (whose ID may come from a server: escaped). */
function where(method: MethodName, ctx: CallContext): string {
  return `${fullMethod(method)}${ctx.resource ? ` ${escapeControl(describePointer(ctx.resource))}` : ''}`;
}

function redactUrl(u: string): string {
  try {
    const url = new URL(u);
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return '(unparsable proxy URL)';
  }
}
