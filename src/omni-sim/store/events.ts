// The store's events and who hears of them: the retained history (Omni: 10000 events) that bookmarks
// resume from, the revision and the cookie that bookmarks carry, the open watches (each with its
// bounded queue), and the listeners (Omni's controllers), called in event order. Apart from store.ts,
// which owns the resources and decides what a write is; this file only records what happened and
// delivers it. A restart (faults.ts) behaves as a restart after which etcd's history is compacted: the
// revision moves on, every bookmark issued before is refused (etcd: ERRORED; memory: a new cookie).

import { randomBytes } from 'node:crypto';
import type { Resource } from '../../omni-api/resource.js';
import { EventType } from '../../omni-api/wire.js';
import type { SimClock, WatchBatches, WatchParams } from '../api.js';
import { compileQuery, isEmptyQuery } from './query.js';
import {
  checkWatchParams,
  concerns,
  encodeBookmark,
  initialEvents,
  kindOf,
  resumeFrom,
  tombstone,
  watchBatches,
  WatchView,
  type StoreEvent,
  type Watcher,
} from './watch.js';

/** Thrown into open watches by `restart()`: the gateway cuts their connections. */
export class StreamBrokenError extends Error {
  readonly code = 'SIM_STREAM_BROKEN';
  constructor(message = 'stream broken by a simulated restart') {
    super(message);
    this.name = 'StreamBrokenError';
  }
}

/** What a new watch reads of the store's state for its initial events. */
export interface WatchedState {
  /** The watched resource (a watch by ID), as stored. */
  current: () => Resource | undefined;
  /** The watched kind's resources that match the query, sorted by ID (bootstrap contents). */
  contents: () => Resource[];
}

export class StoreEvents {
  /** Events from `historyHead` on are the retained history; the head moves instead of shifting the array per event. */
  private history: StoreEvent[] = [];
  private historyHead = 0;
  private pos = 0;
  private cookie: Buffer = randomBytes(8);
  private readonly watchers = new Set<Watcher>();
  private readonly listeners = new Set<(e: StoreEvent) => void>();
  private readonly pending: StoreEvent[] = [];
  private dispatching = false;

  constructor(
    private readonly clock: SimClock,
    private readonly historyCapacity: number,
    private readonly watchBufferCapacity: number,
  ) {}

  /** Subscribes to every change, in order; returns the unsubscribe function. */
  onEvent(cb: (e: StoreEvent) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** A simulated Omni restart: every open watch broken, every bookmark invalid. */
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

  /** The bookmark of the current position for a kind. */
  currentBookmark(kind: { namespace: string; type: string }): Uint8Array {
    return this.bookmark(kind, this.pos);
  }

  /** Opens a watch: replayed history (bookmark or tail) and live events go through one queue. */
  watch(params: WatchParams, signal: AbortSignal, state: WatchedState): WatchBatches {
    checkWatchParams(params);
    const fromBookmark = params.startFromBookmark !== undefined;
    const matcher = compileQuery(params.query);
    const history = { cookie: this.cookie, pos: this.pos, oldest: this.history[this.historyHead]?.pos };
    const resume = fromBookmark
      ? resumeFrom(params, params.startFromBookmark as Uint8Array, history)
      : { pos: this.pos };
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
    if (fromBookmark && resume.errored === undefined)
      w.queue.push(...this.retainedHistory().filter((e) => e.pos > startPos && concerns(w, e)));
    if (params.tailEvents > 0)
      w.queue.push(
        ...this.retainedHistory()
          .filter((e) => concerns(w, e))
          .slice(-params.tailEvents),
      );

    const initial = initialEvents(params, matcher, {
      bookmark: this.bookmark(params, this.pos),
      nowMs: this.clock.now(),
      current: state.current,
      contents: state.contents,
    });
    this.watchers.add(w);
    const unsubscribe = () => {
      this.watchers.delete(w);
      w.wake?.();
    };
    signal.addEventListener('abort', unsubscribe, { once: true });

    const view = new WatchView(matcher, isEmptyQuery(params.query));
    return watchBatches(w, {
      params,
      initial,
      signal,
      convert: (e) => view.convert(e, this.bookmark(e.resource.metadata, e.pos)),
      erroredEvent: (error) => ({ eventType: EventType.ERRORED, resource: tombstone(params, this.clock.now()), error }),
      unsubscribe,
    });
  }

  /** Records a change and delivers it: to the open watches it concerns, then to every listener. */
  emit(eventType: number, resource: Resource, old?: Resource): void {
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
      if (!concerns(w, e) || w.overrun || e.pos <= w.after) continue;
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

  private retainedHistory(): StoreEvent[] {
    return this.history.slice(this.historyHead);
  }

  private bookmark(kind: { namespace: string; type: string }, pos: number): Uint8Array {
    return encodeBookmark(kind, pos, this.cookie);
  }
}
