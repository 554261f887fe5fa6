// src/provider/read: what the provider knows of Omni: the caches of a run (this file; one
// kind-cache.ts per kind; what is kept of a resource, slim.ts), what the executor reads through them
// (reads.ts), and a pass's snapshot (snapshot.ts) with the evidence a step may rest on (evidence.ts). An
// absence from any of them is never evidence.
//
// The one way the provider reads Omni's collections: one informer-like cache per kind (after
// kubernetes' client-node `cache.ts`). A run opens a Watch of the kind without bootstrap contents;
// once Omni says it is established (the bootstrap bookmark's NOOP), one List; the events that came
// meanwhile are applied over it in order, and every later event as it comes. The client resumes a
// broken watch from its last bookmark; when Omni refuses the bookmark, the kind is listed again.
// The snapshot of every pass, the waits for Omni's finalizers, the settle and the change detection
// of --wait are queries on it; `plan` lists once and watches nothing.
//
// Positive evidence (design rules 4 and 10): a resource absent from a kind's cache (from its List or
// its watch) is an absence, never evidence. Evidence that an ID named something is a live event
// naming it, a Get that found it or a write of this run that succeeded (`namedById`); evidence that

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_MACHINE_REQUEST, NS_DEFAULT, T } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import type { CacheOptions, KindHost, Waiter } from './cache-options.js';
import { KindCache } from './kind-cache.js';
import { safeVersion } from './kind-store.js';
import { isOurResource, machineCarriesProvider } from '../ownership.js';
import type { ItemSource, Reads, WaitOutcome, WaitUntil } from './reads.js';
import { Slimmer } from './slim.js';

/**
 * The caches of one run (or of one `plan`), by kind; the provider's own records (ProviderStatus,
 * heartbeat), read by a Get in every pass, beside them. Implements what the executor reads.
 */
export class ProviderCache implements Reads, ItemSource, KindHost {
  private readonly kinds = new Map<string, KindCache>();
  /** The same, by namespace then type: looked up for every answer and step without building a key. */
  private readonly byNamespace = new Map<string, Map<string, KindCache>>();
  /** Resources of kinds not cached (the provider's records), as the last Get or write of this run left them. */
  private readonly records = new Map<string, Resource | null>();
  private readonly ac = new AbortController();
  private readonly unlink: () => void;
  /** Every wait in progress, ended at once on abort: no abort listener per waiting resource. */
  private readonly pending = new Set<(o: WaitOutcome) => void>();
  private readonly slimmer: Slimmer;
  /** The kinds' watches, aborted with the run. */
  private readonly watches = new Set<AbortController>();
  private dirty = false;
  private wake: (() => void) | undefined;

  constructor(
    readonly state: State,
    readonly o: CacheOptions,
  ) {
    this.slimmer = new Slimmer(o.providerId);
    const onAbort = () => this.ac.abort(o.signal?.reason);
    o.signal?.addEventListener('abort', onAbort, { once: true });
    this.unlink = () => o.signal?.removeEventListener('abort', onAbort);
    this.ac.signal.addEventListener(
      'abort',
      () => {
        for (const ac of this.watches) ac.abort();
        for (const finish of [...this.pending]) finish('aborted');
        this.wake?.();
      },
      { once: true },
    );
  }

  /** A kind's watch stops with the run (one listener for all of them: no MaxListenersExceededWarning). */
  linkAbort(ac: AbortController): void {
    if (this.ac.signal.aborted) ac.abort();
    else this.watches.add(ac);
  }

  private kind(p: Pick<Pointer, 'namespace' | 'type'>): KindCache {
    const key = kindKey(p);
    let k = this.kinds.get(key);
    if (!k) {
      const id = this.o.providerId;
      const keep =
        p.namespace === NS_DEFAULT && p.type === T.Machine
          ? (r: Resource) => machineCarriesProvider(r.metadata, id)
          : (r: Resource) => isOurResource(r.metadata, id);
      k = new KindCache(this, p.namespace, p.type, keep);
      this.kinds.set(key, k);
      let types = this.byNamespace.get(p.namespace);
      if (!types) this.byNamespace.set(p.namespace, (types = new Map()));
      types.set(p.type, k);
    }
    return k;
  }

  private cached(p: Pick<Pointer, 'namespace' | 'type'>): KindCache | undefined {
    return this.byNamespace.get(p.namespace)?.get(p.type);
  }

  /**
   * The kinds the run follows from now on: their events are read as they come. The others' watches
   * are closed at the first event nobody reads while nobody waits on them (most of a run's events are
   * the echo of its own writes, which their answers already told the caches), and such a kind is
   * watched and listed again before a query reads it. 'all' (the default, and --wait, which plans
   * again on every change): every kind.
   */
  follow(kinds: 'all' | Iterable<Pick<Pointer, 'namespace' | 'type'>>): void {
    const keys = kinds === 'all' ? undefined : new Set([...kinds].map((k) => kindKey(k)));
    for (const [key, k] of this.kinds) k.follow(keys === undefined || keys.has(key));
  }

  /** What the cache holds of a kind once it is listed (ours only: labelled with the ID or in its namespace). */
  async list(namespace: string, type: string): Promise<Resource[]> {
    const k = this.kind({ namespace, type });
    await k.whenReady();
    return [...k.entries.values()];
  }

  current(p: Pointer): Resource | undefined {
    const k = this.cached(p);
    if (k) return k.entries.get(p.id);
    return this.records.get(recordKey(p)) ?? undefined;
  }

  get(p: Pointer): Resource | undefined {
    return this.current(p);
  }

  labelledFor(requestId: string, kind: Pick<Pointer, 'namespace' | 'type'>): Resource[] {
    const k = this.cached(kind);
    return k ? [...k.entries.values()].filter((r) => r.metadata.labels[LABEL_MACHINE_REQUEST] === requestId) : [];
  }

  configPatchRequestsOf(requestId: string): Resource[] {
    const k = [...this.kinds.values()].find((x) => x.type === T.ConfigPatchRequest);
    return k ? [...k.entries.values()].filter((r) => r.metadata.labels[LABEL_MACHINE_REQUEST] === requestId) : [];
  }

  observe(r: Resource): void {
    const k = this.cached(r.metadata);
    if (k) k.observe(r);
    else this.records.set(recordKey(r.metadata), r);
  }

  /** A Get found what the cache of its kind did not hold (its List had left it out). */
  observeMissed(r: Resource): void {
    const k = this.cached(r.metadata);
    if (k) k.observeMissed(r);
    else this.observe(r);
  }

  /** Whether its kind's List left it out and a Get found it: that List was not complete. */
  wasMissed(p: Pointer): boolean {
    return this.cached(p)?.wasMissed(p.id) ?? false;
  }

  /** A Get answered NotFound. */
  observeNotFound(p: Pointer): void {
    const k = this.cached(p);
    if (k) k.observeNotFound(p.id);
    else this.records.set(recordKey(p), null);
  }

  readById(p: Pointer): void {
    this.cached(p)?.readById(p.id);
  }

  gone(p: Pointer): void {
    const k = this.cached(p);
    if (k) k.destroyed(p.id);
    else this.records.set(recordKey(p), null);
  }

  isGone(p: Pointer): boolean {
    const k = this.cached(p);
    return k ? k.isGone(p.id) : this.records.get(recordKey(p)) === null;
  }

  namedById(p: Pointer): boolean {
    return this.cached(p)?.namedById(p.id) ?? false;
  }

  finalizersOf(p: Pointer): readonly string[] | 'gone' | undefined {
    return this.cached(p)?.finalizersOf(p.id);
  }

  wait(p: Pointer, until: WaitUntil, timeoutMs: number, minVersion = '0'): Promise<WaitOutcome> {
    if (this.ac.signal.aborted) return Promise.resolve('aborted');
    const k = this.kind(p);
    return new Promise<WaitOutcome>((resolve, reject) => {
      const timer: { t?: NodeJS.Timeout } = {};
      const end = () => {
        clearTimeout(timer.t);
        this.pending.delete(finish);
        k.unwait(p.id, w);
      };
      const finish = (o: WaitOutcome) => {
        end();
        resolve(o);
      };
      const w: Waiter = {
        until,
        minVersion: safeVersion(minVersion),
        resolve: finish,
        reject: (e) => {
          end();
          reject(e);
        },
      };
      // No limit (`--wait --timeout 0`): no timer; setTimeout fires at once for what it cannot hold.
      if (Number.isFinite(timeoutMs)) timer.t = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
      this.pending.add(finish);
      k.wait(p.id, w);
    });
  }

  /** What changed so far is in the snapshot being taken now. */
  clearChanged(): void {
    this.dirty = false;
  }

  markChanged(): void {
    this.dirty = true;
    this.wake?.();
  }

  /** Told how far each kind's List got while it streams, while a snapshot is read (snapshot.ts). */
  onListProgress: ((type: string, count: number) => void) | undefined;

  listProgress(type: string, count: number): void {
    this.onListProgress?.(type, count);
  }

  /**
   * --wait: resolves true on a change of what the caches hold (at once if one came since the last call), false after
   * `ms`.
   */
  async changed(ms: number): Promise<boolean> {
    if (this.dirty) {
      this.dirty = false;
      return true;
    }
    if (this.ac.signal.aborted) return false;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => done(false), Math.max(0, ms));
      const done = (changed: boolean) => {
        clearTimeout(timer);
        this.wake = undefined;
        if (changed) this.dirty = false;
        resolve(changed);
      };
      this.wake = () => done(!this.ac.signal.aborted);
    });
  }

  close(): void {
    this.unlink();
    this.ac.abort();
  }

  /** What is kept of a resource read (slim.ts). */
  slim(r: Resource, listed = false): Resource {
    return this.slimmer.slim(r, listed);
  }

  intern(s: string): string {
    return this.slimmer.intern(s);
  }
}

function kindKey(p: Pick<Pointer, 'namespace' | 'type'>): string {
  return `${p.namespace}\u0000${p.type}`;
}

function recordKey(p: Pointer): string {
  return `${p.namespace}\u0000${p.type}\u0000${p.id}`;
}
