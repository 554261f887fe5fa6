// src/omni-sim/store: COSI's state semantics in memory, without access rules: the store and its CRUD
// (this file), its history, open watches and listeners (events.ts), the watch machinery as pure
// functions (watch.ts), label and ID queries (query.ts), how the backend Omni keeps a kind in words
// its errors (backend.ts), and what a resource costs in etcd (marshaled-size.ts).
//
// The sim's COSI state: an in-memory store with the semantics of docs/omni-wire.md 2.2-2.7 and
// docs/cosi-semantics.md, and no access rules (the identity argument is ignored; access.ts wraps this
// store with Omni's rules).
//
// Where Omni's backends differ (backend.ts), each kind answers as the backend Omni keeps it in:
// etcd for most, memory for `ephemeral`, `meta` and provider health statuses. That decides the
// wording of errors and the Update check order (etcd: exists -> version -> owner -> expected phase;
// in memory: exists -> owner -> version -> expected phase).
// Every change is an event of events.ts (history, watches, listeners); watches (bookmarks, initial
// events, query transitions, batches) are watch.ts's pure functions over what the two files own.
// Everything goes in and out as deep copies: callers can never mutate stored state.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { cloneResource, PHASE_TEARING_DOWN, pointerOf } from '../../omni-api/resource.js';
import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import { EventType } from '../../omni-api/wire.js';
import type { Identity, Query, SimClock, StateApi, WatchBatches, WatchParams } from '../api.js';
import { backendMessage as msg, backendOf } from './backend.js';
import { compileQuery } from './query.js';
import { formatTimestamp, kindOf, type StoreEvent } from './watch.js';
import { StoreEvents } from './events.js';
import { marshaledSize } from './marshaled-size.js';

export const DEFAULT_HISTORY_CAPACITY = 10_000;
const EPOCH = '1970-01-01T00:00:00Z';

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

const keyOf = (p: Pointer) => `${p.namespace}\u0000${p.type}\u0000${p.id}`;
const byId = (a: Resource, b: Resource) => (a.metadata.id < b.metadata.id ? -1 : a.metadata.id > b.metadata.id ? 1 : 0);

const err = (code: number, message: string, resource?: Pointer) =>
  errorFromStatus(code, message, resource ? { resource } : {});

export class SimStore implements StateApi {
  private readonly clock: SimClock;
  private readonly writeGate: WriteGate | undefined;
  private readonly events: StoreEvents;
  private readonly resources = new Map<string, Resource>();
  /** The same resources by kind (namespace + type): a List reads one kind, not the whole store. */
  private readonly byKind = new Map<string, Map<string, Resource>>();

  constructor(opts: StoreOptions) {
    this.clock = opts.clock;
    this.writeGate = opts.writeGate;
    this.events = new StoreEvents(
      opts.clock,
      opts.historyCapacity ?? DEFAULT_HISTORY_CAPACITY,
      opts.watchBufferCapacity ?? DEFAULT_HISTORY_CAPACITY,
    );
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

  /** How many resources are stored. */
  get size(): number {
    return this.resources.size;
  }

  /** The stored resource or undefined (no error). */
  peek(p: Pointer): Resource | undefined {
    const r = this.resources.get(keyOf(p));
    return r ? cloneResource(r) : undefined;
  }

  /** Subscribes to every change, in order; returns the unsubscribe function. */
  onEvent(cb: (e: StoreEvent) => void): () => void {
    return this.events.onEvent(cb);
  }

  /** A concurrent writer's no-op Update: only version and `updated` change (version-conflict storms). */
  bumpVersion(p: Pointer): boolean {
    const cur = this.resources.get(keyOf(p));
    if (!cur) return false;
    const next = cloneResource(cur);
    next.metadata.version = String(BigInt(cur.metadata.version) + 1n);
    next.metadata.updated = formatTimestamp(this.clock.now());
    this.put(next);
    this.events.emit(EventType.UPDATED, next, cur);
    return true;
  }

  /** A simulated Omni restart: state kept, every open watch broken, every bookmark invalid. */
  restart(): void {
    this.events.restart();
  }

  /** Every open watch gets an ERRORED event with this error and then ends (fault injection). */
  failWatches(error: string): void {
    this.events.failWatches(error);
  }

  /** The bookmark of the current position for a kind (default: an etcd-backed one). */
  currentBookmark(kind: { namespace: string; type: string } = { namespace: 'default', type: '' }): Uint8Array {
    return this.events.currentBookmark(kind);
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
    this.events.emit(EventType.CREATED, stored);
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
    this.events.emit(EventType.UPDATED, next, cur);
    return cloneResource(next);
  }

  destroy(who: Identity, p: Pointer, owner: string): void {
    const cur = this.resources.get(keyOf(p));
    const b = backendOf(p);
    if (!cur) throw err(GrpcCode.NotFound, msg.notFound(b, 'destroy', p), pointerOf(p));
    this.checkOwner(cur, owner, 'destroy');
    if (cur.metadata.finalizers.length > 0) {
      throw err(
        GrpcCode.FailedPrecondition,
        msg.pendingFinalizers(b, p, cur.metadata.version, cur.metadata.finalizers),
        pointerOf(p),
      );
    }
    // A Destroy costs what it deletes.
    this.gate(who, cur);
    this.remove(cur.metadata);
    this.events.emit(EventType.DESTROYED, cur);
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
    return this.events.watch(params, signal, {
      current: () => this.resources.get(keyOf({ namespace: params.namespace, type: params.type, id: params.id ?? '' })),
      contents: () => this.list(INTERNAL_READER, params.namespace, params.type, params.query),
    });
  }

  // ------------------------------------------------------------------------------------------

  /** Omni's write limiter, for the kinds Omni keeps in etcd. */
  private gate(who: Identity, r: Resource): void {
    if (this.writeGate && backendOf(r.metadata) === 'etcd')
      this.writeGate(who, r.metadata.type, () => marshaledSize(r));
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
      throw err(
        GrpcCode.PermissionDenied,
        msg.ownerConflict(backendOf(p), op, p, cur.metadata.version, cur.metadata.owner),
        p,
      );
    }
  }
}

const INTERNAL_READER: Identity = { name: 'store', email: 'store', role: 'Admin', internal: true };
