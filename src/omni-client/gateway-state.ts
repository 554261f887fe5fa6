// The COSI core State (src/omni-api/state.ts `CoreState`) over the gateway transport; wrap.ts makes it a State.
// Requests are built with the schemas of src/omni-api/wire.ts (proto names, zero values omitted, optional fields
// present only when set); every answer is validated (docs/design.md rule 11).
//
// There is no Teardown here: wrap.ts tears down with Get + Update of the phase, never the Teardown
// RPC, which Omni before 1.8 has no gateway route for (404 code 5, indistinguishable from a missing
// resource: docs/omni-behaviour.md, "Resources and routes").

import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { SpecOmittedError } from './errors.js';
import type { Pointer, Resource } from '../omni-api/resource.js';
import { describePointer, pointerOf } from '../omni-api/resource.js';
import type { CallContext } from './transport/call.js';
import { defaultDelay, type DelayFn } from './transport/retry.js';
import type { Transport } from './transport/transport.js';
import {
  observeWrite,
  type DeferOutcome,
  type DeferringOptions,
  type WriteIntent,
  type WriteObserver,
} from './write/observer.js';
import type {
  CallOptions,
  CoreState,
  LabelQuery,
  OwnerOptions,
  QueryOptions,
  UpdateOptions,
  WatchEvent,
  WatchKindOptions,
} from '../omni-api/state.js';
import { LIST_PROGRESS_EVERY } from '../omni-api/state.js';
import {
  CreateRequestSchema,
  DestroyRequestSchema,
  GetRequestSchema,
  LabelTermOperation,
  ListRequestSchema,
  UpdateRequestSchema,
  resourceToWire,
  type MessageSchema,
} from '../omni-api/wire.js';
import { WireError } from '../omni-api/wire.js';
import { encodeMessage } from '../omni-api/protojson.js';
import { answerAbout, emptyAnswer, resourceOf } from './answers.js';
import { KindWatch, WATCH_DEFAULTS, type WatchHost, type WatchRetry } from './watch.js';

/** The transport surface the State needs (a Transport, or a test double). */
export type StateTransport = Pick<Transport, 'unary' | 'collect' | 'openStream'>;

export interface GatewayStateOptions extends Partial<WatchRetry> {
  logger?: Logger;
  delay?: DelayFn;
  random?: () => number;
  /** Told of every Create, Update and Destroy before it is sent and of its outcome (the audit log). */
  onWrite?: WriteObserver;
}

export class GatewayState implements CoreState {
  #t: StateTransport;
  #watchHost: WatchHost;
  #onWrite: WriteObserver | undefined;

  constructor(transport: StateTransport, opts: GatewayStateOptions = {}) {
    this.#t = transport;
    this.#watchHost = {
      t: transport,
      log: opts.logger ?? silentLogger(),
      delay: opts.delay ?? defaultDelay,
      random: opts.random ?? Math.random,
      retry: {
        watchBackoff: opts.watchBackoff ?? WATCH_DEFAULTS.watchBackoff,
        watchMaxReconnects: opts.watchMaxReconnects ?? WATCH_DEFAULTS.watchMaxReconnects,
        watchStableMs: opts.watchStableMs ?? WATCH_DEFAULTS.watchStableMs,
      },
    };
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
        return opts.keep ? opts.keep(r) : r;
      };
    });
  }

  async create(r: Resource, opts: OwnerOptions = {}): Promise<Resource> {
    refuseOmittedSpec(r, 'Create');
    // Omni refuses a metadata owner that differs from the option (docs/cosi-semantics.md, "Owners"): default to it.
    const owner = opts.owner ?? r.metadata.owner;
    const body = encode(CreateRequestSchema, { resource: resourceToWire(r), options: { owner } });
    const ptr = pointerOf(r);
    const intent = { method: 'Create', resource: ptr, owner, sent: r } as const;
    return observeWrite(
      this.#onWrite,
      intent,
      (onRetry) => this.#t.unary('Create', body, ctx(opts, ptr, onRetry), answerAbout(ptr)),
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
    const ptr = pointerOf(r);
    const intent: WriteIntent = { method: 'Update', resource: ptr, owner: String(options['owner']), sent: r };
    addWriteContext(intent, opts);
    return observeWrite(
      this.#onWrite,
      intent,
      (onRetry) => this.#t.unary('Update', body, ctx(opts, ptr, onRetry), answerAbout(ptr)),
      (v) => v,
      opts.signal,
      deferOf(opts),
    );
  }

  async destroy(p: Pointer, opts: OwnerOptions = {}): Promise<void> {
    const ptr = pointerOf(p);
    const body = encode(DestroyRequestSchema, { ...ptr, options: { owner: opts.owner ?? '' } });
    const intent: WriteIntent = { method: 'Destroy', resource: ptr, owner: opts.owner ?? '' };
    addWriteContext(intent, opts);
    await observeWrite(
      this.#onWrite,
      intent,
      (onRetry) => this.#t.unary('Destroy', body, ctx(opts, ptr, onRetry), emptyAnswer),
      () => undefined,
      opts.signal,
      deferOf(opts),
    );
  }

  watchKind(namespace: string, type: string, opts: WatchKindOptions = {}): AsyncIterable<WatchEvent[]> {
    return {
      [Symbol.asyncIterator]: () => new KindWatch(this.#watchHost, namespace, type, queryOptions(opts), opts).events(),
    };
  }
}

/** A call's context; a write's is told of every retry (one object of one shape for every call, no spreads). */
function ctx(opts: CallOptions, resource: Pointer, onRetry?: () => void): CallContext {
  return { signal: opts.signal, timeoutMs: opts.timeoutMs, resource, onRetry };
}

/** What the write observer hears besides the write itself, set on its intent (no objects to spread per write). */
function addWriteContext(intent: WriteIntent, opts: UpdateOptions): void {
  if (opts.before) intent.before = opts.before;
  if (opts.expectedPhase !== undefined) intent.expectedPhase = opts.expectedPhase;
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

/** The back-pressure layer's offer to settle a failed send's outcome after its read-back (observer.ts). */
function deferOf(opts: OwnerOptions): DeferOutcome | undefined {
  return (opts as DeferringOptions).deferOutcome;
}
