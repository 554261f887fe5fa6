// The watch machinery of the sim's COSI store (docs/omni-wire.md 2.2-2.7, docs/cosi-semantics.md):
// bookmarks as each backend encodes and refuses them, what a watch sends before live events, a stored
// event as one watch sees it, and the batches a watch yields. store.ts owns the state (resources,
// history, open watches) and calls these; nothing here keeps state of its own.
// Choices where the sim simplifies (documented so tests can rely on them):
// - Bookmarks are the backend's: etcd's revision (8 bytes, big-endian; one counter for the whole
//   store, as etcd's revision is), or the in-memory backend's per-process cookie + position (16
//   bytes). etcd refuses a bookmark of the wrong length when the watch is asked for, and one older
//   than its retained (compacted) history with an ERRORED event once the watch is established; a
//   revision from the future waits for it. Memory refuses anything it did not issue, up front.
// - tail_events is served only for Omni's in-memory namespaces; elsewhere it fails like etcd does.

import type { Resource } from '../../omni-api/resource.js';
import { cloneResource, newMetadata } from '../../omni-api/resource.js';
import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import { EventType } from '../../omni-api/wire.js';
import type { SimEvent, WatchParams } from '../api.js';
import { backendOf, goQuote, resourceString } from './backend.js';
import type { Matcher } from './query.js';

/** The in-memory backend's bookmark: 8-byte process cookie + 8-byte position. */
export const INMEM_BOOKMARK_LENGTH = 16;
/** etcd's bookmark: the 8-byte revision. */
export const ETCD_BOOKMARK_LENGTH = 8;
/** etcd's answer to a watch from a revision it no longer has (clientv3's ErrCompacted). */
export const ETCD_COMPACTED = 'etcdserver: mvcc: required revision has been compacted';

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

export const kindOf = (p: { namespace: string; type: string }) => `${p.namespace}\u0000${p.type}`;

/**
 * COSI's tombstone (markers, a missing watched resource): version `undefined`, created = updated = now, as NewMetadata
 * makes it.
 */
export function tombstone(p: { namespace: string; type: string; id?: string }, nowMs: number): Resource {
  const at = formatTimestamp(nowMs);
  return {
    metadata: newMetadata({ namespace: p.namespace, type: p.type, id: p.id ?? '' }, { created: at, updated: at }),
    spec: { protoSpec: new Uint8Array(0) },
  };
}

/** One open watch as the store feeds it. */
export interface Watcher {
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

/** Whether a stored event is of the watch's kind (and resource, for a single-resource watch). */
export function concerns(w: Watcher, e: StoreEvent): boolean {
  return kindOf(e.resource.metadata) === w.kind && (w.id === undefined || e.resource.metadata.id === w.id);
}

/** The refusals of a watch's options that Omni makes before it watches anything. */
export function checkWatchParams(params: WatchParams): void {
  const single = params.id !== undefined;
  const fromBookmark = params.startFromBookmark !== undefined;
  const refuse = (code: number, message: string) => errorFromStatus(code, message, {});
  if (single && params.bootstrapContents) {
    throw refuse(GrpcCode.Unimplemented, 'bootstrap contents are not supported for single resource watch');
  }
  if (single && params.query.labelQueries.length > 0) {
    throw refuse(GrpcCode.Unimplemented, 'label queries are not supported for single resource watch');
  }
  if (params.bootstrapContents && params.tailEvents > 0) {
    throw refuse(GrpcCode.Unknown, 'bootstrap contents and tail events are mutually exclusive');
  }
  if (params.bootstrapContents && fromBookmark) {
    throw refuse(GrpcCode.Unknown, 'bootstrap contents and start from bookmark are mutually exclusive');
  }
  if (params.tailEvents > 0 && fromBookmark) {
    throw refuse(GrpcCode.Unknown, 'tail events and start from bookmark are mutually exclusive');
  }
  if (params.tailEvents > 0 && backendOf(params) !== 'inmem') {
    throw refuse(GrpcCode.Unknown, 'tail events are not supported by the persistent store');
  }
}

/** The bookmark of history position `pos` for a kind, as its backend encodes it (`cookie`: memory's process cookie). */
export function encodeBookmark(kind: { namespace: string; type: string }, pos: number, cookie: Buffer): Uint8Array {
  if (backendOf(kind) === 'etcd') {
    const b = Buffer.alloc(ETCD_BOOKMARK_LENGTH);
    b.writeBigUInt64BE(BigInt(pos));
    return new Uint8Array(b);
  }
  const b = Buffer.alloc(INMEM_BOOKMARK_LENGTH);
  cookie.copy(b, 0);
  b.writeBigUInt64BE(BigInt(pos), 8);
  return new Uint8Array(b);
}

/** Where the store is: its memory cookie, its position, the position of its oldest retained event (if any). */
export interface HistoryState {
  cookie: Buffer;
  pos: number;
  oldest: number | undefined;
}

/**
 * Where a watch resumed from `bm` starts, with the ERRORED it gets instead of events when etcd no
 * longer has that revision; refusals made before the watch is established are thrown.
 */
export function resumeFrom(params: WatchParams, bm: Uint8Array, h: HistoryState): { pos: number; errored?: string } {
  // Events after the bookmark are all still known when the first retained one follows it.
  const oldest = h.oldest ?? h.pos + 1;
  if (backendOf(params) === 'etcd') {
    if (bm.length !== ETCD_BOOKMARK_LENGTH) {
      const what = goQuote(resourceString({ namespace: params.namespace, type: params.type, id: params.id ?? '' }));
      throw errorFromStatus(
        GrpcCode.FailedPrecondition,
        `failed to ${params.id !== undefined ? 'watch' : 'watchKind'} ${what}: invalid bookmark length: ${bm.length}`,
        {},
      );
    }
    const pos = Number(Buffer.from(bm).readBigUInt64BE(0));
    return pos < oldest - 1 ? { pos, errored: ETCD_COMPACTED } : { pos };
  }
  const invalid = () => errorFromStatus(GrpcCode.FailedPrecondition, 'invalid watch bookmark', {});
  if (bm.length !== INMEM_BOOKMARK_LENGTH) throw invalid();
  const b = Buffer.from(bm);
  if (!b.subarray(0, 8).equals(h.cookie)) throw invalid();
  const pos = Number(b.readBigUInt64BE(8));
  if (pos > h.pos || pos < oldest - 1) throw invalid();
  return { pos };
}

/**
 * What the store holds for a watch's start: the watched resource (single-resource watch), the kind's matching contents.
 */
export interface WatchStart {
  bookmark: Uint8Array;
  nowMs: number;
  current: () => Resource | undefined;
  contents: () => Resource[];
}

/**
 * What a watch sends before live events, in the batches an aggregated watch gets them in (etcd and
 * memory backends alike; the recordings show it): a single-resource watch's current state (or a
 * DESTROYED tombstone) with the bookmark of now; bootstrap contents as CREATED events without a
 * bookmark, then the BOOTSTRAPPED marker with it, in one batch; the bootstrap bookmark's NOOP in a
 * batch of its own.
 */
export function initialEvents(params: WatchParams, m: Matcher, s: WatchStart): SimEvent[][] {
  const out: SimEvent[][] = [];
  const bm = s.bookmark;
  const now = s.nowMs;
  if (params.id !== undefined && params.startFromBookmark === undefined && params.tailEvents <= 0) {
    const r = s.current();
    out.push([
      r && m(r.metadata)
        ? { eventType: EventType.CREATED, resource: cloneResource(r), bookmark: bm }
        : { eventType: EventType.DESTROYED, resource: tombstone(params, now), bookmark: bm },
    ]);
  }
  if (params.bootstrapContents) {
    const contents: SimEvent[] = s.contents().map((r) => ({ eventType: EventType.CREATED, resource: r }));
    out.push([...contents, { eventType: EventType.BOOTSTRAPPED, resource: tombstone(params, now), bookmark: bm }]);
  }
  if (params.bootstrapBookmark)
    out.push([{ eventType: EventType.NOOP, resource: tombstone(params, now), bookmark: bm }]);
  return out;
}

/** One watch's view of stored events: its label/ID query, under which match transitions become CREATED/DESTROYED. */
export class WatchView {
  constructor(
    private readonly m: Matcher,
    private readonly noQuery: boolean,
  ) {}

  /** A stored event as this watch sees it, with its bookmark; undefined when the watch does not see it. */
  convert(e: StoreEvent, bookmark: Uint8Array): SimEvent | undefined {
    const m = this.m;
    const out = (eventType: number, old?: Resource): SimEvent => ({
      eventType,
      resource: cloneResource(e.resource),
      ...(old ? { old: cloneResource(old) } : {}),
      bookmark,
    });
    if (this.noQuery) return out(e.eventType, e.old);
    const now = m(e.resource.metadata);
    if (e.eventType !== EventType.UPDATED || !e.old) return now ? out(e.eventType) : undefined;
    const before = m(e.old.metadata);
    if (before && now) return out(EventType.UPDATED, e.old);
    if (now) return out(EventType.CREATED);
    if (before) return out(EventType.DESTROYED);
    return undefined;
  }
}

export interface BatchOptions {
  params: WatchParams;
  initial: SimEvent[][];
  signal: AbortSignal;
  convert: (e: StoreEvent) => SimEvent | undefined;
  erroredEvent: (error: string) => SimEvent;
  /** Called once the watch ends, however it ends. */
  unsubscribe: () => void;
}

/**
 * The batches a watch yields: its initial events, then its queue as the store fills it (one event per
 * batch, or all that wait when aggregated), ending with an ERRORED on overrun or injected failure and
 * throwing when the store breaks it (a restart). Markers and ERRORED only for API version 1 and later.
 */
export async function* watchBatches(w: Watcher, o: BatchOptions): AsyncGenerator<SimEvent[]> {
  const { params, signal } = o;
  const keep = (e: SimEvent) =>
    params.apiVersion > 0 || (e.eventType !== EventType.BOOTSTRAPPED && e.eventType !== EventType.ERRORED);
  const aggregated = params.aggregated;
  try {
    for (const group of o.initial) {
      const first = group.filter(keep);
      if (aggregated && first.length > 0) yield first;
      else for (const e of first) yield [e];
    }
    for (;;) {
      if (signal.aborted) return;
      if (w.broken) throw w.broken;
      if (w.overrun || w.errored !== undefined) {
        const e = o.erroredEvent(w.errored ?? 'buffer overrun');
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
      const events = taken
        .map(o.convert)
        .filter((e): e is SimEvent => e !== undefined)
        .filter(keep);
      if (events.length > 0) yield events;
    }
  } finally {
    signal.removeEventListener('abort', o.unsubscribe);
    o.unsubscribe();
  }
}
