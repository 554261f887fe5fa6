// The sim's COSI state: an in-memory store with the semantics of docs/omni-wire.md 2.2-2.7 and docs/cosi-semantics.md, and no
// access rules (the identity argument is ignored; access.ts wraps this store with Omni's rules).
//
// Where Omni's backends differ (backend.ts), each kind answers as the backend Omni keeps it in:
// etcd for most, memory for `ephemeral`, `meta` and provider health statuses. That decides the
// wording of errors and the Update check order (etcd: exists -> version -> owner -> expected phase;
// in memory: exists -> owner -> version -> expected phase).
// Choices where the sim simplifies (documented so tests can rely on them):
// - Bookmarks are the backend's: etcd's revision (8 bytes, big-endian; one counter for the whole
//   store, as etcd's revision is), or the in-memory backend's per-process cookie + position (16
//   bytes). etcd refuses a bookmark of the wrong length when the watch is asked for, and one older
//   than its retained (compacted) history with an ERRORED event once the watch is established; a
//   revision from the future waits for it. Memory refuses anything it did not issue, up front.
// - A restart (faults.ts) behaves as a restart after which etcd's history is compacted: the revision
//   moves on, every bookmark issued before is refused (etcd: ERRORED; memory: a new cookie).
// - tail_events is served only for Omni's in-memory namespaces; elsewhere it fails like etcd does.
// Everything goes in and out as deep copies: callers can never mutate stored state.

import { randomBytes } from 'node:crypto';
import type { Pointer, Resource } from '../omni-client/resource.js';
import { cloneResource, PHASE_TEARING_DOWN, newMetadata, pointerOf } from '../omni-client/resource.js';
import { errorFromStatus, GrpcCode } from '../omni-client/errors.js';
import { EventType } from '../omni-client/wire.js';
import type { Identity, Query, SimClock, SimEvent, StateApi, WatchBatches, WatchParams } from './api.js';
import { backendMessage as msg, backendOf, goQuote, resourceString } from './backend.js';
import { compileQuery, isEmptyQuery, type Matcher } from './query.js';
import { marshaledSize } from './throttle.js';

export const DEFAULT_HISTORY_CAPACITY = 10_000;
/** The in-memory backend's bookmark: 8-byte process cookie + 8-byte position. */
export const INMEM_BOOKMARK_LENGTH = 16;
/** etcd's bookmark: the 8-byte revision. */
export const ETCD_BOOKMARK_LENGTH = 8;
/** etcd's answer to a watch from a revision it no longer has (clientv3's ErrCompacted). */
export const ETCD_COMPACTED = 'etcdserver: mvcc: required revision has been compacted';
const EPOCH = '1970-01-01T00:00:00Z';

/** A Timestamp as protojson prints it: RFC 3339 UTC, fractional digits only when non-zero. */
export function formatTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

/** One stored change, as controllers and watches see it. */
export interface StoreEvent {
  /** EventType.CREATED, UPDATED or DESTROYED. */
  eventType: number;
  /** The stored object itself, shared with the store and every listener: read it, never change it. */
  resource: Resource;
  old?: Resource;
  /** Position in the store's history (1, 2, ...). */
  pos: number;
}

export interface StoreOptions {
  clock: SimClock;
  /** Events kept for resuming from bookmarks (Omni: 10000). */
  historyCapacity?: number;
  /** Undelivered events a watch may hold before it gets ERRORED "buffer overrun". */
  watchBufferCapacity?: number;
  /**
   * Omni's etcd write limiter (faults.ts, throttle.ts): called by every write to an etcd-backed kind
   * after its checks and before it changes anything (a Create's existence check comes after it, as
   * in Omni's etcd state), with the size the write costs; it may throw (wait, or refuse).
   */
  writeGate?: WriteGate;
}

export type WriteGate = (who: Identity, type: string, bytes: () => number) => void;

/** Thrown into open watches by `restart()`: the gateway cuts their connections. */
export class StreamBrokenError extends Error {
  readonly code = 'SIM_STREAM_BROKEN';
  constructor(message = 'stream broken by a simulated restart') {
    super(message);
    this.name = 'StreamBrokenError';
  }
}

const keyOf = (p: Pointer) => `${p.namespace}\u0000${p.type}\u0000${p.id}`;
const kindOf = (p: { namespace: string; type: string }) => `${p.namespace}\u0000${p.type}`;
const byId = (a: Resource, b: Resource) => (a.metadata.id < b.metadata.id ? -1 : a.metadata.id > b.metadata.id ? 1 : 0);

/** COSI's tombstone (markers, a missing watched resource): version `undefined`, created = updated = now, as NewMetadata makes it. */
function tombstone(p: { namespace: string; type: string; id?: string }, nowMs: number): Resource {
  const at = formatTimestamp(nowMs);
  return { metadata: newMetadata({ namespace: p.namespace, type: p.type, id: p.id ?? '' }, { created: at, updated: at }), spec: { protoSpec: new Uint8Array(0) } };
}

const err = (code: number, message: string, resource?: Pointer) =>
  errorFromStatus(code, message, resource ? { resource } : {});

interface Watcher {
  kind: string;
  id: string | undefined;
  queue: StoreEvent[];
  /** Events up to this position are not this watch's (a resume from a future etcd revision). */
  after: number;
  overrun: boolean;
  /** An ERRORED event to deliver next, after which the watch ends. */
  errored: string | undefined;
  broken: Error | undefined;
  wake: (() => void) | undefined;
}

export class SimStore implements StateApi {
  private readonly clock: SimClock;
  private readonly writeGate: WriteGate | undefined;
  private readonly historyCapacity: number;
  private readonly watchBufferCapacity: number;
  private readonly resources = new Map<string, Resource>();
  /** The same resources by kind (namespace + type): a List reads one kind, not the whole store. */
  private readonly byKind = new Map<string, Map<string, Resource>>();
  /** Events from `historyHead` on are the retained history; the head moves instead of shifting the array per event. */
  private history: StoreEvent[] = [];
  private historyHead = 0;
  private pos = 0;
  private cookie: Buffer = randomBytes(8);
  private readonly watchers = new Set<Watcher>();
  private readonly listeners = new Set<(e: StoreEvent) => void>();
  private readonly pending: StoreEvent[] = [];
  private dispatching = false;

  constructor(opts: StoreOptions) {
    this.clock = opts.clock;
    this.writeGate = opts.writeGate;
    this.historyCapacity = opts.historyCapacity ?? DEFAULT_HISTORY_CAPACITY;
    this.watchBufferCapacity = opts.watchBufferCapacity ?? DEFAULT_HISTORY_CAPACITY;
  }

  // ------------------------------------------------------------------------------------------
  // Internal helpers for the sim itself (scenarios, faults, Omni's controllers)

  /** Inserts resources as given (version, timestamps kept), without events: the scenario's initial state. */
  seed(resources: Resource[]): void {
    for (const r of resources) this.put(cloneResource(r));
  }

  /** Every resource, sorted by namespace, type, ID. */
  all(): Resource[] {
    return [...this.resources.values()]
      .sort((a, b) => {
        const ka = kindOf(a.metadata);
        const kb = kindOf(b.metadata);
        return ka < kb ? -1 : ka > kb ? 1 : byId(a, b);
      })
      .map(cloneResource);
  }

  /** The stored resource or undefined (no error). */
  peek(p: Pointer): Resource | undefined {
    const r = this.resources.get(keyOf(p));
    return r ? cloneResource(r) : undefined;
  }

  /** Subscribes to every change, in order; returns the unsubscribe function. */
  onEvent(cb: (e: StoreEvent) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** A concurrent writer's no-op Update: only version and `updated` change (version-conflict storms). */
  bumpVersion(p: Pointer): boolean {
    const cur = this.resources.get(keyOf(p));
    if (!cur) return false;
    const next = cloneResource(cur);
    next.metadata.version = String(BigInt(cur.metadata.version) + 1n);
    next.metadata.updated = formatTimestamp(this.clock.now());
    this.put(next);
    this.emit(EventType.UPDATED, next, cur);
    return true;
  }

  /** A simulated Omni restart: state kept, every open watch broken, every bookmark invalid. */
  restart(): void {
    this.cookie = randomBytes(8);
    this.history = [];
    this.historyHead = 0;
    // Omni writes as it starts (its SysVersion, for one): the revision moves on, so that bookmarks of
    // now resume and every older one is refused.
    this.pos++;
    for (const w of this.watchers) {
      w.broken = new StreamBrokenError();
      w.wake?.();
    }
  }

  /** Every open watch gets an ERRORED event with this error and then ends (fault injection). */
  failWatches(error: string): void {
    for (const w of this.watchers) {
      w.errored = error;
      w.wake?.();
    }
  }

  /** The bookmark of the current position for a kind (default: an etcd-backed one). */
  currentBookmark(kind: { namespace: string; type: string } = { namespace: 'default', type: '' }): Uint8Array {
    return this.bookmark(kind, this.pos);
  }

  // ------------------------------------------------------------------------------------------
  // StateApi

  get(_who: Identity, p: Pointer): Resource {
    const r = this.resources.get(keyOf(p));
    if (!r) throw err(GrpcCode.NotFound, msg.notFound(backendOf(p), 'get', p), pointerOf(p));
    return cloneResource(r);
  }

  /** The stored resources of one kind, unsorted and NOT copied: read them, never change them. */
  viewKind(namespace: string, type: string): Iterable<Readonly<Resource>> {
    return this.byKind.get(kindOf({ namespace, type }))?.values() ?? [];
  }

  view(p: Pointer): Readonly<Resource> | undefined {
    return this.resources.get(keyOf(p));
  }

  list(_who: Identity, namespace: string, type: string, q: Query): Resource[] {
    const m = compileQuery(q);
    return [...(this.byKind.get(kindOf({ namespace, type }))?.values() ?? [])]
      .filter((r) => m(r.metadata))
      .sort(byId)
      .map(cloneResource);
  }

  create(who: Identity, r: Resource, owner: string): Resource {
    const p = pointerOf(r.metadata);
    if (r.metadata.owner !== '' && r.metadata.owner !== owner) {
      // Omni raises this as a plain error while decoding the request (gRPC Unknown).
      throw err(GrpcCode.Unknown, 'owner is already set', p);
    }
    const stored = cloneResource(r);
    stored.metadata.owner = owner;
    stored.metadata.version = '1';
    stored.metadata.created = formatTimestamp(this.clock.now());
    stored.metadata.updated = r.metadata.updated ?? EPOCH;
    this.gate(who, stored);
    if (this.resources.has(keyOf(p))) {
      throw err(GrpcCode.AlreadyExists, msg.alreadyExists(backendOf(p), p, r.metadata.version), p);
    }
    this.put(stored);
    this.emit(EventType.CREATED, stored);
    return cloneResource(stored);
  }

  update(who: Identity, r: Resource, owner: string, expectedPhase?: string): Resource {
    const p = pointerOf(r.metadata);
    const cur = this.resources.get(keyOf(p));
    const b = backendOf(p);
    if (!cur) throw err(GrpcCode.NotFound, msg.notFound(b, 'update', p, r.metadata.version), p);
    if (b === 'inmem') this.checkOwner(cur, owner, 'update');
    if (r.metadata.version !== cur.metadata.version) {
      throw err(GrpcCode.FailedPrecondition, msg.versionConflict(b, p, cur.metadata.version, r.metadata.version), p);
    }
    if (b === 'etcd') this.checkOwner(cur, owner, 'update');
    if (expectedPhase !== undefined && cur.metadata.phase !== expectedPhase) {
      throw err(GrpcCode.InvalidArgument, msg.phaseConflict(b, p, cur.metadata.version, expectedPhase), p);
    }
    const next = cloneResource(r);
    next.metadata.version = String(BigInt(cur.metadata.version) + 1n);
    if (cur.metadata.created !== undefined) next.metadata.created = cur.metadata.created;
    else delete next.metadata.created;
    next.metadata.updated = formatTimestamp(this.clock.now());
    this.gate(who, next);
    this.put(next);
    this.emit(EventType.UPDATED, next, cur);
    return cloneResource(next);
  }

  destroy(who: Identity, p: Pointer, owner: string): void {
    const cur = this.resources.get(keyOf(p));
    const b = backendOf(p);
    if (!cur) throw err(GrpcCode.NotFound, msg.notFound(b, 'destroy', p), pointerOf(p));
    this.checkOwner(cur, owner, 'destroy');
    if (cur.metadata.finalizers.length > 0) {
      throw err(GrpcCode.FailedPrecondition, msg.pendingFinalizers(b, p, cur.metadata.version, cur.metadata.finalizers), pointerOf(p));
    }
    // A Destroy costs what it deletes.
    this.gate(who, cur);
    this.remove(cur.metadata);
    this.emit(EventType.DESTROYED, cur);
  }

  teardown(who: Identity, p: Pointer, owner: string): boolean {
    const cur = this.get(who, p);
    if (cur.metadata.phase === PHASE_TEARING_DOWN) return cur.metadata.finalizers.length === 0;
    const next = cloneResource(cur);
    next.metadata.phase = PHASE_TEARING_DOWN;
    next.metadata.owner = cur.metadata.owner;
    // The owner check of this Update is the teardown's owner check.
    const stored = this.update(who, next, owner, 'running');
    return stored.metadata.finalizers.length === 0;
  }

  async teardownAndDestroy(who: Identity, p: Pointer, owner: string, signal: AbortSignal): Promise<void> {
    this.teardown(who, p, owner);
    await this.waitFor(p, (r) => r === undefined || r.metadata.finalizers.length === 0, signal);
    this.destroy(who, p, owner);
  }

  /** Resolves once `cond` holds for the resource (undefined = absent); wakes on store events only. */
  waitFor(p: Pointer, cond: (r: Resource | undefined) => boolean, signal: AbortSignal): Promise<void> {
    const key = keyOf(p);
    const holds = () => cond(this.resources.get(key));
    if (holds()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const canceled = () => errorFromStatus(GrpcCode.Canceled, 'context canceled', { resource: pointerOf(p) });
      if (signal.aborted) {
        reject(canceled());
        return;
      }
      const done = () => {
        unsubscribe();
        signal.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        done();
        reject(canceled());
      };
      const unsubscribe = this.onEvent((e) => {
        if (keyOf(e.resource.metadata) === key && holds()) {
          done();
          resolve();
        }
      });
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  watch(_who: Identity, params: WatchParams, signal: AbortSignal): WatchBatches {
    const single = params.id !== undefined;
    const q = params.query;
    if (single && params.bootstrapContents) {
      throw err(GrpcCode.Unimplemented, 'bootstrap contents are not supported for single resource watch');
    }
    if (single && q.labelQueries.length > 0) {
      throw err(GrpcCode.Unimplemented, 'label queries are not supported for single resource watch');
    }
    const fromBookmark = params.startFromBookmark !== undefined;
    if (params.bootstrapContents && params.tailEvents > 0) {
      throw err(GrpcCode.Unknown, 'bootstrap contents and tail events are mutually exclusive');
    }
    if (params.bootstrapContents && fromBookmark) {
      throw err(GrpcCode.Unknown, 'bootstrap contents and start from bookmark are mutually exclusive');
    }
    if (params.tailEvents > 0 && fromBookmark) {
      throw err(GrpcCode.Unknown, 'tail events and start from bookmark are mutually exclusive');
    }
    if (params.tailEvents > 0 && backendOf(params) !== 'inmem') {
      throw err(GrpcCode.Unknown, 'tail events are not supported by the persistent store');
    }
    const matcher = compileQuery(q);
    const resume = fromBookmark ? this.resumeFrom(params, params.startFromBookmark as Uint8Array) : { pos: this.pos };
    const startPos = resume.pos;

    const w: Watcher = {
      kind: kindOf(params),
      id: params.id,
      queue: [],
      after: startPos,
      overrun: false,
      errored: resume.errored,
      broken: undefined,
      wake: undefined,
    };
    // Replayed history (bookmark or tail) goes through the same queue as live events.
    if (fromBookmark && resume.errored === undefined) w.queue.push(...this.retainedHistory().filter((e) => e.pos > startPos && this.concerns(w, e)));
    if (params.tailEvents > 0) w.queue.push(...this.retainedHistory().filter((e) => this.concerns(w, e)).slice(-params.tailEvents));

    const initial = this.initialEvents(params, matcher);
    this.watchers.add(w);
    const unsubscribe = () => {
      this.watchers.delete(w);
      w.wake?.();
    };
    signal.addEventListener('abort', unsubscribe, { once: true });

    const convert = (e: StoreEvent): SimEvent | undefined => this.convert(e, matcher, isEmptyQuery(q));
    const keep = (e: SimEvent) => params.apiVersion > 0 || (e.eventType !== EventType.BOOTSTRAPPED && e.eventType !== EventType.ERRORED);
    const aggregated = params.aggregated;
    const erroredEvent = (error: string): SimEvent => ({ eventType: EventType.ERRORED, resource: tombstone(params, this.clock.now()), error });

    async function* batches(): AsyncGenerator<SimEvent[]> {
      try {
        for (const group of initial) {
          const first = group.filter(keep);
          if (aggregated && first.length > 0) yield first;
          else for (const e of first) yield [e];
        }
        for (;;) {
          if (signal.aborted) return;
          if (w.broken) throw w.broken;
          if (w.overrun || w.errored !== undefined) {
            const e = erroredEvent(w.errored ?? 'buffer overrun');
            if (keep(e)) yield [e];
            return;
          }
          if (w.queue.length === 0) {
            await new Promise<void>((resolve) => {
              w.wake = resolve;
            });
            w.wake = undefined;
            continue;
          }
          const taken = aggregated ? w.queue.splice(0) : w.queue.splice(0, 1);
          const events = taken.map(convert).filter((e): e is SimEvent => e !== undefined).filter(keep);
          if (events.length > 0) yield events;
        }
      } finally {
        signal.removeEventListener('abort', unsubscribe);
        unsubscribe();
      }
    }
    return batches();
  }

  // ------------------------------------------------------------------------------------------

  /** Omni's write limiter, for the kinds Omni keeps in etcd. */
  private gate(who: Identity, r: Resource): void {
    if (this.writeGate && backendOf(r.metadata) === 'etcd') this.writeGate(who, r.metadata.type, () => marshaledSize(r));
  }

  private put(r: Resource): void {
    const kind = kindOf(r.metadata);
    let m = this.byKind.get(kind);
    if (!m) this.byKind.set(kind, (m = new Map()));
    m.set(r.metadata.id, r);
    this.resources.set(keyOf(r.metadata), r);
  }

  private remove(p: Pointer): void {
    const kind = kindOf(p);
    const m = this.byKind.get(kind);
    m?.delete(p.id);
    if (m && m.size === 0) this.byKind.delete(kind);
    this.resources.delete(keyOf(p));
  }

  private checkOwner(cur: Resource, owner: string, op: 'update' | 'destroy'): void {
    if (cur.metadata.owner !== owner) {
      const p = pointerOf(cur.metadata);
      throw err(GrpcCode.PermissionDenied, msg.ownerConflict(backendOf(p), op, p, cur.metadata.version, cur.metadata.owner), p);
    }
  }

  private retainedHistory(): StoreEvent[] {
    return this.history.slice(this.historyHead);
  }

  private bookmark(kind: { namespace: string; type: string }, pos: number): Uint8Array {
    if (backendOf(kind) === 'etcd') {
      const b = Buffer.alloc(ETCD_BOOKMARK_LENGTH);
      b.writeBigUInt64BE(BigInt(pos));
      return new Uint8Array(b);
    }
    const b = Buffer.alloc(INMEM_BOOKMARK_LENGTH);
    this.cookie.copy(b, 0);
    b.writeBigUInt64BE(BigInt(pos), 8);
    return new Uint8Array(b);
  }

  /**
   * Where a watch resumed from `bm` starts, with the ERRORED it gets instead of events when etcd no
   * longer has that revision; refusals made before the watch is established are thrown.
   */
  private resumeFrom(params: WatchParams, bm: Uint8Array): { pos: number; errored?: string } {
    // Events after the bookmark are all still known when the first retained one follows it.
    const oldest = this.history[this.historyHead]?.pos ?? this.pos + 1;
    if (backendOf(params) === 'etcd') {
      if (bm.length !== ETCD_BOOKMARK_LENGTH) {
        const what = goQuote(resourceString({ namespace: params.namespace, type: params.type, id: params.id ?? '' }));
        throw err(GrpcCode.FailedPrecondition, `failed to ${params.id !== undefined ? 'watch' : 'watchKind'} ${what}: invalid bookmark length: ${bm.length}`);
      }
      const pos = Number(Buffer.from(bm).readBigUInt64BE(0));
      return pos < oldest - 1 ? { pos, errored: ETCD_COMPACTED } : { pos };
    }
    const invalid = () => err(GrpcCode.FailedPrecondition, 'invalid watch bookmark');
    if (bm.length !== INMEM_BOOKMARK_LENGTH) throw invalid();
    const b = Buffer.from(bm);
    if (!b.subarray(0, 8).equals(this.cookie)) throw invalid();
    const pos = Number(b.readBigUInt64BE(8));
    if (pos > this.pos || pos < oldest - 1) throw invalid();
    return { pos };
  }

  /**
   * What a watch sends before live events, in the batches an aggregated watch gets them in (etcd and
   * memory backends alike; the recordings show it): a single-resource watch's current state (or a
   * DESTROYED tombstone) with the bookmark of now; bootstrap contents as CREATED events without a
   * bookmark, then the BOOTSTRAPPED marker with it, in one batch; the bootstrap bookmark's NOOP in a
   * batch of its own.
   */
  private initialEvents(params: WatchParams, m: Matcher): SimEvent[][] {
    const out: SimEvent[][] = [];
    const bm = this.bookmark(params, this.pos);
    const now = this.clock.now();
    if (params.id !== undefined && params.startFromBookmark === undefined && params.tailEvents <= 0) {
      const r = this.resources.get(keyOf({ namespace: params.namespace, type: params.type, id: params.id }));
      out.push([
        r && m(r.metadata)
          ? { eventType: EventType.CREATED, resource: cloneResource(r), bookmark: bm }
          : { eventType: EventType.DESTROYED, resource: tombstone(params, now), bookmark: bm },
      ]);
    }
    if (params.bootstrapContents) {
      const contents: SimEvent[] = this.list(INTERNAL_READER, params.namespace, params.type, params.query)
        .map((r) => ({ eventType: EventType.CREATED, resource: r }));
      out.push([...contents, { eventType: EventType.BOOTSTRAPPED, resource: tombstone(params, now), bookmark: bm }]);
    }
    if (params.bootstrapBookmark) out.push([{ eventType: EventType.NOOP, resource: tombstone(params, now), bookmark: bm }]);
    return out;
  }

  private concerns(w: Watcher, e: StoreEvent): boolean {
    return kindOf(e.resource.metadata) === w.kind && (w.id === undefined || e.resource.metadata.id === w.id);
  }

  /** A stored event as this watch sees it: query match transitions become CREATED/DESTROYED. */
  private convert(e: StoreEvent, m: Matcher, noQuery: boolean): SimEvent | undefined {
    const bookmark = this.bookmark(e.resource.metadata, e.pos);
    const out = (eventType: number, old?: Resource): SimEvent => ({
      eventType,
      resource: cloneResource(e.resource),
      ...(old ? { old: cloneResource(old) } : {}),
      bookmark,
    });
    if (noQuery) return out(e.eventType, e.old);
    const now = m(e.resource.metadata);
    if (e.eventType !== EventType.UPDATED || !e.old) return now ? out(e.eventType) : undefined;
    const before = m(e.old.metadata);
    if (before && now) return out(EventType.UPDATED, e.old);
    if (now) return out(EventType.CREATED);
    if (before) return out(EventType.DESTROYED);
    return undefined;
  }

  private emit(eventType: number, resource: Resource, old?: Resource): void {
    // No copies: stored resources are never changed in place (a write stores a new object), and
    // every reader of an event (watch conversion, controllers) copies before changing anything.
    const e: StoreEvent = { eventType, resource, ...(old ? { old } : {}), pos: ++this.pos };
    this.history.push(e);
    if (this.history.length - this.historyHead > this.historyCapacity) this.historyHead++;
    // Compacting once per `historyCapacity` events keeps the cost per event constant.
    if (this.historyHead >= this.historyCapacity) {
      this.history = this.history.slice(this.historyHead);
      this.historyHead = 0;
    }
    for (const w of this.watchers) {
      if (!this.concerns(w, e) || w.overrun || e.pos <= w.after) continue;
      if (w.queue.length >= this.watchBufferCapacity) {
        w.overrun = true;
        w.queue = [];
      } else {
        w.queue.push(e);
      }
      w.wake?.();
    }
    // Listeners run in event order even when one of them writes to the store (no re-entrancy).
    this.pending.push(e);
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (let next = this.pending.shift(); next; next = this.pending.shift()) {
        for (const cb of [...this.listeners]) {
          try {
            cb(next);
          } catch {
            // A failing listener (an Omni controller) must not break the write that triggered it.
          }
        }
      }
    } finally {
      this.dispatching = false;
    }
  }
}

const INTERNAL_READER: Identity = { name: 'store', email: 'store', role: 'Admin', internal: true };
