// src/omni-client/transport: one call to Omni's gateway and its answer, nothing about what the call
// is for: the endpoint, TLS and proxies, signatures (auth.ts) and their clock, deadlines and aborts,
// retries of what never left, error answers, and answers read within their limits. This file is the
// folder's face; the State over it is ../gateway-state.ts.
//
// Calls to Omni's HTTP/JSON gateway: `POST /api/cosi.resource.State/<Method>`, unary JSON bodies and
// NDJSON streams, over the undici dispatchers of one client. The Transport composes one part per
// concept:
//   endpoint.ts    the endpoint an operator gives          tls.ts       the CAs trusted
//   dispatcher.ts  direct or through the proxy; calls and watches on connections of their own
//   signing.ts     the signed headers of a call (built once per signature), gzip asked for or not
//   deadline.ts    per-call deadlines and cancellation     clock.ts     the clock signatures use
//   retry.ts       what a failure is, and what is retried  status.ts    what an error answer is
//   body.ts        a unary body within the read limits     ndjson.ts    a stream's lines and messages
// What a caller decodes from an answer runs inside the call (`decode`/`map`): a WireError it throws,
// like one from reading the body, becomes a ProtocolError naming the call and the endpoint, and is
// never retried.

import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { silentLogger } from '../../log.js';
import { DEFAULT_READ_LIMITS, ReadBudget, discard, parseJson, readAnswer, type ReadLimits } from './body.js';
import { where, type CallContext } from './call.js';
import { SigningClock } from './clock.js';
import { DEFAULT_COMPRESSION_POLICY, gzipChoice, type CompressionPolicy } from './compression.js';
import { Deadlines, type StreamLimits } from './deadline.js';
import { createDispatchers, type DispatcherKind, type Dispatchers } from './dispatcher.js';
import { normalizeEndpoint, type Endpoint } from './endpoint.js';
import { TransportError } from '../errors.js';
import { type ApiError } from '../../omni-api/errors.js';
import { SKIPPED, results } from './ndjson.js';
import { Retrier, defaultDelay, type BackoffOptions, type DelayFn } from './retry.js';
import { RequestHeaders, type RequestSigner } from './signing.js';
import { errorOfAnswer } from './status.js';
import { tlsOptions } from './tls.js';
import { WireError } from '../../omni-api/wire.js';
import { fullMethod, type MethodName } from '../../omni-api/wire.js';

export interface TransportOptions {
  endpoint: string;
  signer: RequestSigner;
  caFile?: string;
  insecureSkipTlsVerify?: boolean;
  /** Upper bound of connections to Omni (per origin). Default 16. */
  connections?: number;
  /** Default per-call deadline of a unary call in ms (0 = none). */
  timeoutMs?: number;
  /** How long a List or a Watch's opening may go without receiving anything (ms; 0 = no limit). */
  streamIdleMs?: number;
  /** The slowest average pace of a List or a Watch's opening (bytes/s) beyond its idle deadline. */
  streamMinBytesPerSecond?: number;
  /** Extra attempts on Unavailable and broken connections. */
  retries?: number;
  backoff?: BackoffOptions;
  logger?: Logger;
  now?: () => number;
  delay?: DelayFn;
  random?: () => number;
  /** Where proxy variables are read from; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Which calls ask Omni for gzip (compression.ts). Default DEFAULT_COMPRESSION_POLICY. */
  gzip?: CompressionPolicy;
  /** Read limits; unset ones are body.ts DEFAULT_READ_LIMITS (`listItems` is `--max-list-items`). */
  limits?: Partial<ReadLimits>;
}

/** The transport's defaults, deadlines and retries, in one place (docs/architecture.md, "A write, layer by layer"). */
export const TRANSPORT_DEFAULTS = {
  connections: 16,
  timeoutMs: 30_000,
  streamIdleMs: 30_000,
  streamMinBytesPerSecond: 1024,
  retries: 4,
  backoff: { baseMs: 100, capMs: 5_000 },
} as const satisfies Partial<TransportOptions>;

/**
 * An open NDJSON stream whose first message has arrived. Iterate for the rest (SKIPPED for a line that
 * `skip` declined); `close` to stop.
 */
export interface OpenStream<T = unknown> extends AsyncIterable<T | typeof SKIPPED> {
  first: T;
  close(): void;
}

export interface TransportStats {
  callsByMethod: Record<string, number>;
}

export class Transport {
  readonly endpoint: Endpoint;
  readonly dispatcherKind: DispatcherKind;
  #dispatchers: Dispatchers;
  #headers: RequestHeaders;
  #clock: SigningClock;
  #deadlines: Deadlines;
  #retrier: Retrier;
  #limits: ReadLimits;
  #streams: StreamLimits;
  #budget: ReadBudget;
  #calls: Record<string, number> = {};

  constructor(opts: TransportOptions) {
    this.endpoint = normalizeEndpoint(opts.endpoint);
    const log = opts.logger ?? silentLogger();
    this.#limits = { ...DEFAULT_READ_LIMITS, ...definedOnly(opts.limits ?? {}) };
    this.#budget = new ReadBudget(this.#limits.bufferedBytes);
    this.#clock = new SigningClock(opts.now ?? Date.now, this.endpoint.origin, log);
    this.#deadlines = new Deadlines(opts.timeoutMs ?? TRANSPORT_DEFAULTS.timeoutMs);
    this.#streams = {
      idleMs: opts.streamIdleMs ?? TRANSPORT_DEFAULTS.streamIdleMs,
      minBytesPerSecond: opts.streamMinBytesPerSecond ?? TRANSPORT_DEFAULTS.streamMinBytesPerSecond,
    };
    this.#retrier = new Retrier(
      {
        retries: opts.retries ?? TRANSPORT_DEFAULTS.retries,
        backoff: opts.backoff ?? TRANSPORT_DEFAULTS.backoff,
        delay: opts.delay ?? defaultDelay,
        random: opts.random ?? Math.random,
        log,
      },
      this.#clock,
      this.endpoint.origin,
      (method, ctx, e) => this.#headers.refused(method, ctx, e),
    );
    this.#dispatchers = createDispatchers(this.endpoint, {
      connections: opts.connections ?? TRANSPORT_DEFAULTS.connections,
      env: opts.env ?? process.env,
      tls: tlsOptions(opts),
      log,
    });
    this.dispatcherKind = this.#dispatchers.kind;
    this.#headers = new RequestHeaders(
      opts.signer,
      gzipChoice(opts.gzip ?? DEFAULT_COMPRESSION_POLICY, this.endpoint.origin, this.dispatcherKind === 'proxy'),
    );
  }

  /** Milliseconds added to the local clock when signing (0 unless Omni's clock was adopted). */
  clockOffsetMs(): number {
    return this.#clock.offsetMs;
  }

  stats(): TransportStats {
    return { callsByMethod: { ...this.#calls } };
  }

  /** Cancels every call in flight (streams included) and closes the connections. */
  async close(): Promise<void> {
    this.#deadlines.closeAll();
    await this.#dispatchers.close();
  }

  /** A unary call: the JSON answer, passed through `decode` (which may throw a WireError). */
  async unary<T = unknown>(
    method: MethodName,
    body: unknown,
    ctx: CallContext = {},
    decode: (answer: unknown) => T = (a) => a as T,
  ): Promise<T> {
    const scope = this.#deadlines.shared(method, ctx);
    try {
      return await this.#retrier.run(method, ctx, scope, async () => {
        const res = await this.#send(method, body, scope.signal);
        if (res.statusCode !== 200) throw await this.#errorOf(method, ctx, res);
        return decode(parseJson(await readAnswer(res, this.#limits, this.#budget), 'an answer'));
      });
    } finally {
      scope.dispose();
    }
  }

  /**
   * A server stream read to the end (List): the `result` of every line, each passed through `map` as
   * it arrives (so that a large List never holds its raw JSON and its decoded form at once).
   * At most `limits.listItems` results. Retried as a whole: `reader` makes the `map` of each attempt,
   * so that what it remembers (the IDs seen) starts over with the answer. No deadline for the whole
   * List: an idle deadline and a pace limit (deadline.ts), however long it takes to deliver.
   */
  async collect<T = unknown>(
    method: MethodName,
    body: unknown,
    ctx: CallContext = {},
    reader: () => (result: unknown) => T = () => (r) => r as T,
  ): Promise<T[]> {
    const scope = this.#deadlines.stream(method, ctx, this.#streams);
    const progress = (bytes: number): void => scope.progress(bytes);
    const max = this.#limits.listItems;
    try {
      return await this.#retrier.run(method, ctx, scope, async () => {
        const res = await this.#send(method, body, scope.signal, 0);
        if (res.statusCode !== 200) throw await this.#errorOf(method, ctx, res);
        const out: T[] = [];
        const map = reader();
        for await (const r of results(method, ctx, res, this.#limits, this.#budget, { onBytes: progress })) {
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
   * Opens a server stream (Watch) and waits for its first message; the stream's idle deadline covers
   * only that (an open watch may be quiet for hours).
   * Every message, the first included, is passed through `map` (which may throw a WireError).
   * Failures before the first message are retried; later ones are thrown to the reader.
   */
  async openStream<T = unknown>(
    method: MethodName,
    body: unknown,
    ctx: CallContext = {},
    map: (result: unknown) => T = (r) => r as T,
    skip?: () => boolean,
  ): Promise<OpenStream<T>> {
    const scope = this.#deadlines.stream(method, ctx, this.#streams);
    const progress = (bytes: number): void => scope.progress(bytes);
    let opened: { first: T; it: AsyncIterator<unknown>; res: Dispatcher.ResponseData };
    try {
      opened = await this.#retrier.run(method, ctx, scope, async () => {
        const res = await this.#send(method, body, scope.signal, 0);
        if (res.statusCode !== 200) throw await this.#errorOf(method, ctx, res);
        // The first message is always read (it says that the stream is open).
        let opening = true;
        const skipAfterFirst = skip && ((): boolean => !opening && skip());
        const it = results(method, ctx, res, this.#limits, this.#budget, {
          onBytes: progress,
          skip: skipAfterFirst,
        })[Symbol.asyncIterator]();
        let r: IteratorResult<unknown>;
        try {
          r = await it.next();
        } catch (e) {
          discard(res.body);
          throw e;
        }
        opening = false;
        if (r.done)
          throw new TransportError(`${where(method, ctx)}: the stream ended before its first message`, {
            retriable: true,
          });
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
    const failure = (e: unknown): ApiError => this.#retrier.failure(method, ctx, scope, e);
    return {
      first,
      close,
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<T | typeof SKIPPED>> => {
          try {
            const r = await it.next();
            if (r.done) {
              close();
              return { done: true, value: undefined };
            }
            return { done: false, value: r.value === SKIPPED ? SKIPPED : map(r.value) };
          } catch (e) {
            close();
            throw failure(e);
          }
        },
        return: async () => {
          close();
          return { done: true, value: undefined };
        },
      }),
    };
  }

  /** One request; `bodyTimeout` 0 for a stream (its deadlines are deadline.ts's). */
  async #send(
    method: MethodName,
    body: unknown,
    signal: AbortSignal,
    bodyTimeout?: number,
  ): Promise<Dispatcher.ResponseData> {
    const route = routeOf(method);
    const ts = this.#clock.timestampSec();
    const signer = this.#headers.signer;
    const signed = signer.ready?.(route.fullMethod, ts) ?? (await signer.headers(route.fullMethod, ts));
    this.#calls[method] = (this.#calls[method] ?? 0) + 1;
    const request: Dispatcher.RequestOptions = {
      origin: this.endpoint.origin,
      path: route.path,
      method: 'POST',
      headers: this.#headers.of(method, signed),
      body: JSON.stringify(body),
      signal,
    };
    if (bodyTimeout !== undefined) request.bodyTimeout = bodyTimeout;
    return (method === 'Watch' ? this.#dispatchers.watches : this.#dispatchers.calls).request(request);
  }

  #errorOf(method: MethodName, ctx: CallContext, res: Dispatcher.ResponseData): Promise<ApiError> {
    return errorOfAnswer(method, ctx, this.endpoint.origin, res, this.#limits, this.#budget);
  }
}

/** A method's full name and path, made once per method (not two strings per call). */
interface Route {
  fullMethod: string;
  path: string;
}

const ROUTES = new Map<MethodName, Route>();

function routeOf(method: MethodName): Route {
  let r = ROUTES.get(method);
  if (!r) {
    const fm = fullMethod(method);
    r = { fullMethod: fm, path: `/api${fm}` };
    ROUTES.set(method, r);
  }
  return r;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
