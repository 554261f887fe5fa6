// Waits for Omni to act on resources we tore down (its own finalizers to clear) or to destroy
// resources we released, with ONE kind watch per type shared by every waiter, never polling.

import { NotFoundError } from '../omni-client/errors.js';
import type { Pointer, Resource } from '../omni-client/resource.js';
import { versionNumber } from '../omni-client/resource.js';
import type { State, WatchEvent } from '../omni-client/types.js';

export type WaitOutcome = 'released' | 'gone' | 'timeout' | 'aborted';
export type WaitUntil = 'no-finalizers' | 'gone';

interface Seen {
  version: bigint;
  /** Shared between resources holding the same finalizers (a fleet has a few such lists). */
  finalizers: readonly string[];
  /** Named by a live event (not the bootstrap's contents) or found by a Get of its ID. */
  byId: boolean;
}

interface Waiter {
  until: WaitUntil;
  minVersion: bigint;
  resolve: (o: WaitOutcome) => void;
  reject: (e: unknown) => void;
}

/**
 * Omni before 1.0 drops BOOTSTRAPPED from a provider's aggregated watch, so "not seen" cannot be read
 * as "gone" there. A wait that has not seen the watch bootstrap after this long reads the resource once.
 */
export const BOOTSTRAP_FALLBACK_MS = 1_000;

const NO_FINALIZERS: readonly string[] = Object.freeze([]);
const MAX_FINALIZER_LISTS = 1024;

/**
 * What one kind watch tells about the resources of its type. Its bootstrap is a List by another
 * name: a resource missing from it is an absence, not evidence (design rule 10). A `no-finalizers`
 * wait, whose outcome a step acts on, ends as `gone` only on a DESTROYED event or a Get of the ID
 * that answers NotFound; a resource absent from the bootstrap is read by its ID first. A `gone`
 * wait (released parents, which only paces the next pass; that pass reads everything again) also
 * ends on the absence.
 */
class KindWatch {
  readonly seen = new Map<string, Seen>();
  /** IDs whose DESTROYED event we saw: positive evidence, valid before BOOTSTRAPPED too. */
  readonly destroyed = new Set<string>();
  /** IDs a Get answered NotFound for. */
  readonly notFound = new Set<string>();
  readonly waiters = new Map<string, Set<Waiter>>();
  private readonly reading = new Set<string>();
  /** One array per distinct list of finalizers seen, bounded by MAX_FINALIZER_LISTS. */
  private readonly lists = new Map<string, readonly string[]>();
  bootstrapped = false;
  failure: unknown;

  constructor(private readonly state: State, private readonly namespace: string, private readonly type: string, private readonly signal: AbortSignal) {
    void this.consume(state.watchKind(namespace, type, { signal, onReset: () => this.reset() }), signal);
  }

  private reset(): void {
    this.seen.clear();
    this.destroyed.clear();
    this.notFound.clear();
    this.bootstrapped = false;
  }

  /** Whether this watch has positive evidence of the ID: a live event for it, or a Get that found it. */
  sawById(id: string): boolean {
    return this.destroyed.has(id) || this.seen.get(id)?.byId === true;
  }

  /** A resource read outside the watch (a Get of its ID); older than what the watch saw is ignored. */
  observe(id: string, r: Resource | undefined): void {
    if (!r) {
      if (!this.seen.has(id)) this.notFound.add(id);
    } else {
      const version = safeVersion(r.metadata.version);
      const cur = this.seen.get(id);
      if (!cur || cur.version < version) this.seen.set(id, { version, finalizers: this.shared(r.metadata.finalizers), byId: true });
      else cur.byId = true;
    }
    this.check(id);
  }

  /** One Get of the ID at a time; what it answers is observed. Any other error: the wait goes on and ends by the watch or its timeout. */
  read(id: string): void {
    if (this.reading.has(id) || this.signal.aborted) return;
    this.reading.add(id);
    this.state.get({ namespace: this.namespace, type: this.type, id }, { signal: this.signal }).then(
      (r) => { this.reading.delete(id); this.observe(id, r); },
      (err: unknown) => {
        this.reading.delete(id);
        if (err instanceof NotFoundError) this.observe(id, undefined);
      },
    );
  }

  private async consume(events: AsyncIterable<WatchEvent[]>, signal: AbortSignal): Promise<void> {
    try {
      for await (const batch of events) {
        for (const e of batch) this.apply(e);
        if (signal.aborted) break;
      }
    } catch (err) {
      this.failure = err;
      for (const set of this.waiters.values()) for (const w of set) w.reject(err);
      this.waiters.clear();
    }
  }

  private apply(e: WatchEvent): void {
    const id = e.resource.metadata.id;
    if (e.type === 'bootstrapped') {
      this.bootstrapped = true;
      for (const wid of [...this.waiters.keys()]) this.check(wid);
      return;
    }
    if (e.type === 'destroyed') {
      this.seen.delete(id);
      this.destroyed.add(id);
    } else if (e.type === 'created' || e.type === 'updated') {
      this.destroyed.delete(id);
      this.notFound.delete(id);
      // The bootstrap's contents are CREATED events before BOOTSTRAPPED: listed, not named by ID.
      const byId = e.type === 'updated' || this.bootstrapped || this.seen.get(id)?.byId === true;
      this.seen.set(id, { version: safeVersion(e.resource.metadata.version), finalizers: this.shared(e.resource.metadata.finalizers), byId });
    } else return;
    this.check(id);
  }

  /**
   * The same array for the same finalizers: a kind watch holds one entry per resource of the kind
   * (every InfraMachine of a fleet), and their finalizers repeat. A list never seen before is kept
   * as it came once the pool is full.
   */
  private shared(fs: string[]): readonly string[] {
    if (fs.length === 0) return NO_FINALIZERS;
    const key = fs.join('\u0000');
    const known = this.lists.get(key);
    if (known) return known;
    if (this.lists.size < MAX_FINALIZER_LISTS) this.lists.set(key, fs);
    return fs;
  }

  /** The finalizers of the resource as this watch saw it last; 'gone' once it is known gone. */
  current(id: string): readonly string[] | 'gone' | undefined {
    const s = this.seen.get(id);
    if (s) return s.finalizers;
    return this.destroyed.has(id) || this.notFound.has(id) ? 'gone' : undefined;
  }

  check(id: string): void {
    const set = this.waiters.get(id);
    if (!set) return;
    const s = this.seen.get(id);
    const gone = this.destroyed.has(id) || this.notFound.has(id);
    // Without BOOTSTRAPPED, only positive evidence counts: an event showing it released, or destroyed.
    if (!s && !gone && !this.bootstrapped) return;
    let absent = false;
    for (const w of [...set]) {
      let out: WaitOutcome | undefined;
      if (s) {
        if (w.until === 'no-finalizers' && s.finalizers.length === 0 && s.version >= w.minVersion) out = 'released';
      } else if (gone || w.until === 'gone') {
        out = 'gone';
      } else {
        absent = true;
      }
      if (out) {
        set.delete(w);
        w.resolve(out);
      }
    }
    if (set.size === 0) this.waiters.delete(id);
    if (absent) this.read(id);
  }
}

export class FinalizerWaiter {
  private readonly kinds = new Map<string, KindWatch>();
  private readonly ac = new AbortController();
  /** Every wait in progress, ended at once on abort: no abort listener per waiting resource. */
  private readonly pending = new Set<(o: WaitOutcome) => void>();
  private readonly unlink: () => void;

  constructor(private readonly state: State, signal?: AbortSignal) {
    const onAbort = () => this.ac.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.unlink = () => signal?.removeEventListener('abort', onAbort);
    this.ac.signal.addEventListener('abort', () => {
      for (const finish of [...this.pending]) finish('aborted');
    }, { once: true });
  }

  /**
   * Resolves once the resource has no finalizers at a version at least `minVersion` (the version our
   * teardown wrote), or is gone (see KindWatch for what counts as gone); or on timeout. A broken
   * watch that cannot resume rejects.
   */
  wait(p: Pointer, until: WaitUntil, timeoutMs: number, minVersion = '0'): Promise<WaitOutcome> {
    if (this.ac.signal.aborted) return Promise.resolve('aborted');
    const kindKey = kindKeyOf(p);
    let kind = this.kinds.get(kindKey);
    if (!kind) {
      kind = new KindWatch(this.state, p.namespace, p.type, this.ac.signal);
      this.kinds.set(kindKey, kind);
    }
    if (kind.failure) return Promise.reject(kind.failure);
    const k = kind;
    return new Promise<WaitOutcome>((resolve, reject) => {
      const timer: { t?: NodeJS.Timeout } = {};
      const finish = (o: WaitOutcome) => {
        clearTimeout(timer.t);
        this.pending.delete(finish);
        const set = k.waiters.get(p.id);
        set?.delete(w);
        if (set && set.size === 0) k.waiters.delete(p.id);
        resolve(o);
      };
      const w: Waiter = {
        until,
        minVersion: safeVersion(minVersion),
        resolve: finish,
        reject: (e) => {
          clearTimeout(timer.t);
          this.pending.delete(finish);
          reject(e);
        },
      };
      // No limit (`--wait --timeout 0`): no timer; setTimeout fires at once for what it cannot hold.
      if (Number.isFinite(timeoutMs)) timer.t = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
      this.pending.add(finish);
      let set = k.waiters.get(p.id);
      if (!set) k.waiters.set(p.id, (set = new Set()));
      set.add(w);
      k.check(p.id);
      if (this.pending.has(finish) && !k.bootstrapped) this.fallbackRead(k, p, finish);
    });
  }

  /** One Get if the watch has still not bootstrapped after BOOTSTRAP_FALLBACK_MS (Omni before 1.0). */
  private fallbackRead(k: KindWatch, p: Pointer, finish: (o: WaitOutcome) => void): void {
    const t = setTimeout(() => {
      if (!this.pending.has(finish) || k.bootstrapped || this.ac.signal.aborted) return;
      k.read(p.id);
    }, BOOTSTRAP_FALLBACK_MS);
    t.unref();
  }

  /**
   * Whether a watch of this run named the resource by its ID (a live event, or a Get that found it):
   * evidence that a later NotFound for it means done (design rule 4).
   */
  sawById(p: Pointer): boolean {
    return this.kinds.get(kindKeyOf(p))?.sawById(p.id) ?? false;
  }

  /**
   * The resource's finalizers as a watch of this run saw them last, 'gone' when it saw it go, or
   * undefined when no watch of its kind has seen it.
   */
  finalizersOf(p: Pointer): readonly string[] | 'gone' | undefined {
    return this.kinds.get(kindKeyOf(p))?.current(p.id);
  }

  close(): void {
    this.unlink();
    this.ac.abort();
  }
}

function kindKeyOf(p: Pointer): string {
  return `${p.namespace}\u0000${p.type}`;
}

function safeVersion(v: string): bigint {
  try {
    return versionNumber(v);
  } catch {
    return 0n;
  }
}
