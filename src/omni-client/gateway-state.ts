// The COSI core State (src/omni-api/state.ts `CoreState`) over the gateway transport; wrap.ts makes it a State.
// Requests are built with the schemas of src/omni-api/wire.ts (proto names, zero values omitted, optional fields
// present only when set); every answer is validated (docs/design.md rule 11).
//
// There is no Teardown here: wrap.ts tears down with Get + Update of the phase, never the Teardown
// RPC, which Omni before 1.8 has no gateway route for (404 code 5, indistinguishable from a missing
// resource: docs/omni-behaviour.md, "Resources and routes").

import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { FailedPreconditionError, WatchErroredError } from '../omni-api/errors.js';
import { SpecOmittedError, TransportError, brokeInTransit, hasCode } from './errors.js';
import type { Phase, Pointer, Resource } from '../omni-api/resource.js';
import { VERSION_UNDEFINED, describePointer, pointerOf } from '../omni-api/resource.js';
import type { CallContext } from './transport/call.js';
import { defaultDelay, jitteredBackoff, type BackoffOptions, type DelayFn } from './transport/retry.js';
import type { OpenStream, Transport } from './transport/transport.js';
import { SKIPPED } from './transport/ndjson.js';
import { observeWrite, type DeferOutcome, type DeferringOptions, type WriteObserver } from './write/observer.js';
import type {
  CallOptions,
  CoreState,
  LabelQuery,
  OwnerOptions,
  QueryOptions,
  UpdateOptions,
  WatchEvent,
  WatchEventType,
  WatchKindOptions,
} from '../omni-api/state.js';
import { LIST_PROGRESS_EVERY } from '../omni-api/state.js';
import {
  CreateRequestSchema,
  DestroyRequestSchema,
  DestroyResponseSchema,
  GetRequestSchema,
  LabelTermOperation,
  ListRequestSchema,
  ResourceSchema,
  UpdateRequestSchema,
  WatchRequestSchema,
  WatchResponseSchema,
  fullMethod,
  resourceFromWire,
  resourceToWire,
  type MessageSchema,
} from '../omni-api/wire.js';
import { WireError } from '../omni-api/wire.js';
import { decodeMessage, encodeMessage } from '../omni-api/protojson.js';

/** The transport surface the State needs (a Transport, or a test double). */
export type StateTransport = Pick<Transport, 'unary' | 'collect' | 'openStream'>;

export interface GatewayStateOptions {
  logger?: Logger;
  delay?: DelayFn;
  random?: () => number;
  /** Backoff between watch reconnects. */
  watchBackoff?: BackoffOptions;
  /** Consecutive failed watch reconnects (no message in between) before giving up. */
  watchMaxReconnects?: number;
  /** A stream that lived this long (ms) before it broke counts as established (`onBreak`). */
  watchStableMs?: number;
  /** Told of every Create, Update and Destroy before it is sent and of its outcome (the audit log). */
  onWrite?: WriteObserver;
}

/** The watches' retries and their backoff, in one place (docs/architecture.md, "A write, layer by layer"). */
export const WATCH_DEFAULTS = {
  watchBackoff: { baseMs: 250, capMs: 15_000 },
  watchMaxReconnects: 10,
  watchStableMs: 30_000,
} as const satisfies GatewayStateOptions;

const DECODE = { strict: false } as const;
const EVENT_TYPES: WatchEventType[] = ['created', 'updated', 'destroyed', 'bootstrapped', 'errored', 'noop'];

export class GatewayState implements CoreState {
  #t: StateTransport;
  #log: Logger;
  #delay: DelayFn;
  #random: () => number;
  #watchBackoff: BackoffOptions;
  #watchMaxReconnects: number;
  #watchStableMs: number;
  #onWrite: WriteObserver | undefined;

  constructor(transport: StateTransport, opts: GatewayStateOptions = {}) {
    this.#t = transport;
    this.#log = opts.logger ?? silentLogger();
    this.#delay = opts.delay ?? defaultDelay;
    this.#random = opts.random ?? Math.random;
    this.#watchBackoff = opts.watchBackoff ?? WATCH_DEFAULTS.watchBackoff;
    this.#watchMaxReconnects = opts.watchMaxReconnects ?? WATCH_DEFAULTS.watchMaxReconnects;
    this.#watchStableMs = opts.watchStableMs ?? WATCH_DEFAULTS.watchStableMs;
    this.#onWrite = opts.onWrite;
  }

  async get(p: Pointer, opts: CallOptions = {}): Promise<Resource> {
    const ptr = pointerOf(p);
    const body = encode(GetRequestSchema, { ...ptr, options: {} });
    return this.#t.unary('Get', body, ctx(opts, ptr), answerAbout(ptr));
  }

  /** Every line a resource of this namespace and type, each ID once (docs/design.md rules 11, 12). */
  async list(namespace: string, type: string, opts: QueryOptions = {}): Promise<Resource[]> {
    const body = encode(ListRequestSchema, { namespace, type, options: queryOptions(opts) });
    const kind = { namespace, type };
    return this.#t.collect('List', body, ctx(opts, { namespace, type, id: '' }), () => {
      const ids = new Set<string>();
      return (line) => {
        const r = resourceOf(line, kind, 'a List line');
        if (ids.has(r.metadata.id))
          throw new WireError(`the same ID twice in one List: ${JSON.stringify(r.metadata.id)}`, 'STUB_DUPLICATE_ID');
        ids.add(r.metadata.id);
        if (ids.size % LIST_PROGRESS_EVERY === 0) opts.onProgress?.(ids.size);
        return r;
      };
    });
  }

  async create(r: Resource, opts: OwnerOptions = {}): Promise<Resource> {
    refuseOmittedSpec(r, 'Create');
    // Omni refuses a metadata owner that differs from the option (docs/cosi-semantics.md, "Owners"): default to it.
    const owner = opts.owner ?? r.metadata.owner;
    const body = encode(CreateRequestSchema, { resource: resourceToWire(r), options: { owner } });
    const intent = { method: 'Create', resource: pointerOf(r), owner, sent: r } as const;
    return observeWrite(
      this.#onWrite,
      intent,
      (onRetry) => this.#t.unary('Create', body, { ...ctx(opts, pointerOf(r)), onRetry }, answerAbout(pointerOf(r))),
      (v) => v,
      opts.signal,
      deferOf(opts),
    );
  }

  async update(r: Resource, opts: UpdateOptions = {}): Promise<Resource> {
    refuseOmittedSpec(r, 'Update');
    const options: Record<string, unknown> = { owner: opts.owner ?? r.metadata.owner };
    if (opts.expectedPhase !== undefined) options['expected_phase'] = opts.expectedPhase;
    const body = encode(UpdateRequestSchema, { new_resource: resourceToWire(r), options });
    const intent = {
      method: 'Update',
      resource: pointerOf(r),
      owner: String(options['owner']),
      sent: r,
      ...writeContext(opts),
    } as const;
    return observeWrite(
      this.#onWrite,
      intent,
      (onRetry) => this.#t.unary('Update', body, { ...ctx(opts, pointerOf(r)), onRetry }, answerAbout(pointerOf(r))),
      (v) => v,
      opts.signal,
      deferOf(opts),
    );
  }

  async destroy(p: Pointer, opts: OwnerOptions = {}): Promise<void> {
    const ptr = pointerOf(p);
    const body = encode(DestroyRequestSchema, { ...ptr, options: { owner: opts.owner ?? '' } });
    const intent = { method: 'Destroy', resource: ptr, owner: opts.owner ?? '', ...writeContext(opts) } as const;
    await observeWrite(
      this.#onWrite,
      intent,
      (onRetry) => this.#t.unary('Destroy', body, { ...ctx(opts, ptr), onRetry }, emptyAnswer),
      () => undefined,
      opts.signal,
      deferOf(opts),
    );
  }

  watchKind(namespace: string, type: string, opts: WatchKindOptions = {}): AsyncIterable<WatchEvent[]> {
    return { [Symbol.asyncIterator]: () => this.#watch(namespace, type, opts) };
  }

  async *#watch(namespace: string, type: string, opts: WatchKindOptions): AsyncGenerator<WatchEvent[]> {
    const kind: Pointer = { namespace, type, id: '' };
    const query = queryOptions(opts);
    const signal = opts.signal;
    let bookmark: Uint8Array | undefined;
    let deliveredSinceStart = false;
    let failures = 0;
    let quickBreaks = 0;
    for (;;) {
      if (signal?.aborted) return;
      const options: Record<string, unknown> = { ...query, aggregated: true };
      // Resuming: no bootstrap, just the events after the bookmark (like the Go client's retry).
      const resumed = bookmark !== undefined;
      let eventsOnStream = 0;
      if (bookmark) options['start_from_bookmark'] = bookmark;
      else Object.assign(options, { bootstrap_contents: opts.bootstrapContents ?? true, bootstrap_bookmark: true });
      const body = encode(WatchRequestSchema, { namespace, type, options, api_version: 1 });
      // A resumed stream's first message is always read: it may be the ERRORED event of a refused bookmark.
      let readOnStream = !resumed;
      const skip = opts.skip && ((): boolean => readOnStream && opts.skip!());
      let stream: OpenStream<WatchEvent[]> | undefined;
      let failure: unknown;
      let openedAt: number | undefined;
      try {
        // Every message is decoded as it arrives: a malformed one ends the watch with a ProtocolError
        // (not a broken stream: reconnecting would only read it again).
        stream = await this.#t.openStream(
          'Watch',
          body,
          { signal, timeoutMs: opts.timeoutMs, resource: kind },
          (msg) => decodeEvents(msg, { namespace, type }),
          skip,
        );
        openedAt = performance.now();
        // The first message only says that the watch is established (docs/cosi-semantics.md, "Watches"); dropped.
        for await (const events of stream) {
          failures = 0;
          if (events === SKIPPED) {
            eventsOnStream++;
            opts.onSkipped?.();
            continue;
          }
          readOnStream = true;
          const erroredAt = events.findIndex((e) => e.type === 'errored');
          if (erroredAt === 0 && resumed && eventsOnStream === 0) {
            // Omni's etcd refuses a revision it has compacted away only once the watch is established,
            // with an ERRORED event before anything else (state-etcd's invalid-bookmark error, which
            // is FailedPrecondition when it comes before the watch): the bookmark is refused.
            failure = new FailedPreconditionError(events[0]?.error ?? 'ERRORED event', {
              method: fullMethod('Watch'),
              resource: kind,
            });
            break;
          }
          const ok = erroredAt >= 0 ? events.slice(0, erroredAt) : events;
          eventsOnStream += ok.length;
          for (const e of ok) if (e.bookmark) bookmark = e.bookmark;
          if (ok.length > 0) {
            deliveredSinceStart = true;
            yield ok;
          }
          if (erroredAt >= 0) {
            throw new WatchErroredError(`the watch failed: ${events[erroredAt]?.error ?? 'ERRORED event'}`, {
              method: fullMethod('Watch'),
              resource: kind,
            });
          }
        }
        // Omni never ends a watch by itself: an end is a broken connection (a proxy, a restart).
        failure ??= new TransportError(`${fullMethod('Watch')} ${namespace}/${type}: the watch stream ended`);
      } catch (e) {
        if (hasCode(e, 'OMNI_WATCH_ERRORED')) throw e;
        if (signal?.aborted) return;
        failure = e;
      } finally {
        stream?.close();
      }

      if (bookmark && hasCode(failure, 'OMNI_FAILED_PRECONDITION')) {
        // The bookmark is too old or from another server process: start over from a fresh bootstrap.
        this.#log.warn({ namespace, type, err: failure.message }, 'watch bookmark refused; listing again from scratch');
        bookmark = undefined;
        deliveredSinceStart = false;
        opts.onReset?.();
      } else if (brokeInTransit(failure)) {
        if (!bookmark && deliveredSinceStart) {
          // Events were delivered but there is nothing to resume from: the consumer must rebuild.
          deliveredSinceStart = false;
          opts.onReset?.();
        }
      } else {
        throw failure;
      }
      const stayed =
        eventsOnStream > 0 || (openedAt !== undefined && performance.now() - openedAt >= this.#watchStableMs);
      quickBreaks = stayed ? 0 : quickBreaks + 1;
      opts.onBreak?.(quickBreaks);
      if (signal?.aborted) return;
      failures++;
      if (failures > this.#watchMaxReconnects) throw failure;
      const ms = jitteredBackoff(failures - 1, this.#watchBackoff, this.#random);
      this.#log.info(
        {
          namespace,
          type,
          attempt: failures,
          delayMs: ms,
          resume: bookmark !== undefined,
          err: (failure as Error).message,
        },
        'watch broken; reconnecting',
      );
      try {
        await this.#delay(ms, signal);
      } catch {
        return;
      }
    }
  }
}

function ctx(opts: CallOptions, resource: Pointer): CallContext {
  return { signal: opts.signal, timeoutMs: opts.timeoutMs, resource };
}

/** What the write observer hears besides the write itself. */
function writeContext(opts: UpdateOptions): { before?: Resource; expectedPhase?: Phase } {
  return {
    ...(opts.before ? { before: opts.before } : {}),
    ...(opts.expectedPhase !== undefined ? { expectedPhase: opts.expectedPhase } : {}),
  };
}

function encode(schema: MessageSchema, obj: Record<string, unknown>): Record<string, unknown> {
  return encodeMessage(schema, obj);
}

/** A resource read without its spec (Spec.omitted) would erase the spec in Omni if written back. */
function refuseOmittedSpec(r: Resource, method: 'Create' | 'Update'): void {
  if (r.spec.omitted) {
    throw new SpecOmittedError(
      `refusing to ${method.toLowerCase()} ${describePointer(r.metadata)}: its spec was not kept when it was read; ` +
        `read it again first`,
    );
  }
}

/** What an answer must be about: the kind listed or watched, or (with `id`) the very resource asked for. */
interface Expected {
  namespace: string;
  type: string;
  id?: string;
}

/** The decoder of a Get, Create or Update answer: the resource asked for, nothing else. */
function answerAbout(p: Pointer): (answer: unknown) => Resource {
  return (answer) => resourceOf(answer, p, 'an answer');
}

/** A Destroy answer (DestroyResponse): an object, whatever it holds. */
function emptyAnswer(answer: unknown): void {
  decodeMessage(DestroyResponseSchema, answer, DECODE);
}

/**
 * The `resource` of a Get/Create/Update answer or a List line, validated (docs/design.md rule 11): present,
 * the strict metadata rules of wire.ts, a stored version (a number), a non-empty ID, of the namespace
 * and type asked for, and the ID asked for. Unknown fields (a newer Omni) are ignored.
 */
function resourceOf(msg: unknown, expected: Expected, what: string): Resource {
  // GetResponse, ListResponse, CreateResponse and UpdateResponse are all `{resource}`: read that
  // field directly (a decodeMessage of the wrapper per List item is most of the cost of these checks).
  if (typeof msg !== 'object' || msg === null || Array.isArray(msg))
    throw new WireError(`${what} that is not a JSON object`);
  const w = (msg as Record<string, unknown>)['resource'];
  if (w === undefined || w === null) throw new WireError(`${what} without a resource`);
  return checked(decodeMessage(ResourceSchema, w, DECODE, 'resource'), expected, what, 'stored');
}

/** 'stored': version a number. 'last': also `undefined` (a DESTROYED tombstone). 'tombstone': ID "" too. */
type Kept = 'stored' | 'last' | 'tombstone';

function checked(decoded: unknown, expected: Expected, what: string, kept: Kept): Resource {
  const r = resourceFromWire(decoded, true);
  const md = r.metadata;
  if (kept === 'stored' && md.version === VERSION_UNDEFINED)
    throw new WireError(`${what} with version "undefined" (not a stored resource): ${describePointer(md)}`);
  if (kept !== 'tombstone' && md.id === '') throw new WireError(`${what} with an empty ID`);
  if (
    md.namespace !== expected.namespace ||
    md.type !== expected.type ||
    (expected.id !== undefined && md.id !== expected.id)
  ) {
    const asked =
      expected.id !== undefined ? describePointer(expected as Pointer) : `${expected.namespace}/${expected.type}`;
    throw new WireError(`${what} about ${describePointer(md)}, not ${asked} that was asked for`);
  }
  return r;
}

function labelQueries(qs: LabelQuery[] | undefined): unknown[] {
  return (qs ?? []).map((terms) => ({
    terms: terms.map((t) => ({
      key: t.key,
      op: LabelTermOperation[t.op],
      value: t.value ?? [],
      invert: t.invert ?? false,
    })),
  }));
}

function queryOptions(opts: QueryOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const lq = labelQueries(opts.labelQueries);
  if (lq.length > 0) out['label_query'] = lq;
  if (opts.idRegexp) out['id_query'] = { regexp: opts.idRegexp };
  return out;
}

/** How much of a resource each event type must carry (docs/design.md, "What an answer must be"). */
const EVENT_RESOURCE: Record<WatchEventType, Kept | undefined> = {
  created: 'stored',
  updated: 'stored',
  // The last state; a single-resource watch sends a tombstone instead.
  destroyed: 'last',
  bootstrapped: 'tombstone',
  noop: 'tombstone',
  // The watch cannot go on: nothing is read from it but its error.
  errored: undefined,
};

/**
 * One Watch message: an empty one (the first, or an empty batch) is no events; every event but an
 * ERRORED one must carry a resource of the kind watched (CREATED, UPDATED, DESTROYED: with an ID),
 * since a DESTROYED event is evidence that the resource is gone.
 */
function decodeEvents(msg: unknown, kind: Expected): WatchEvent[] {
  const resp = decodeMessage(WatchResponseSchema, msg, DECODE);
  return (resp['event'] as Record<string, unknown>[]).map((e) => {
    const type = EVENT_TYPES[e['event_type'] as number] ?? 'noop';
    const kept = EVENT_RESOURCE[type];
    let resource: Resource;
    if (kept === undefined) {
      resource = resourceFromWire(e['resource'] ?? { metadata: { namespace: kind.namespace, type: kind.type } });
    } else {
      if (e['resource'] === undefined) throw new WireError(`a Watch event (${type}) without a resource`);
      resource = checked(e['resource'], kind, `a Watch event (${type})`, kept);
    }
    const out: WatchEvent = { type, resource };
    if (e['old'] !== undefined)
      out.old = checked(
        e['old'],
        { ...kind, id: resource.metadata.id },
        `the old resource of a Watch event (${type})`,
        'last',
      );
    if (typeof e['error'] === 'string') out.error = e['error'];
    if (e['bookmark'] instanceof Uint8Array) out.bookmark = e['bookmark'];
    return out;
  });
}

/** The back-pressure layer's offer to settle a failed send's outcome after its read-back (observer.ts). */
function deferOf(opts: OwnerOptions): DeferOutcome | undefined {
  return (opts as DeferringOptions).deferOutcome;
}
