// One kind's informer-like cache (cache.ts keeps one per kind): a Watch without bootstrap contents,
// one List once Omni says the watch is established, the events that came meanwhile applied over it
// in order, every later one as it comes; listed again when the client's bookmark is refused.
// What it knows by ID and what it knows gone are kept apart from what it holds: an absence from it
// is never evidence (design rules 4 and 10).

import type { Resource } from '../../omni-api/resource.js';
import { versionNumber } from '../../omni-api/resource.js';
import type { State, WatchEvent } from '../../omni-api/state.js';
import { hasCode } from '../../omni-client/errors.js';
import { ExitCode, StubError } from '../../exit-codes.js';
import type { Limiter } from '../run/limiter.js';
import type { WaitOutcome, WaitUntil } from './reads.js';

export interface CacheOptions {
  providerId: string;
  /** Keep every kind up to date with a Watch (a run); false: one List per kind, nothing after (`plan`). */
  live: boolean;
  signal?: AbortSignal;
  /**
   * How long a new watch may take to say it is established before the List goes anyway (Omni before 1.0 filters that
   * NOOP out).
   */
  establishMs?: number;
  /** Resources kept of one kind at most, and events held while its List is read (design rule 12). */
  maxPerKind?: number;
  /** The run's call limiter, for the Gets of a wait (a watch holds no slot). */
  limiter?: Limiter;
}

export const ESTABLISH_FALLBACK_MS = 1_000;
/** As many as one List may hold (`--max-list-items`' default). */
const DEFAULT_MAX_PER_KIND = 250_000;
/** Times a kind whose watch or List failed is started again, on the next query, before the failure stays. */
const MAX_RESTARTS = 3;

export interface Waiter {
  until: WaitUntil;
  minVersion: bigint;
  resolve: (o: WaitOutcome) => void;
  reject: (e: unknown) => void;
}

/** What a kind's cache needs of the run's caches. */
export interface KindHost {
  readonly state: State;
  readonly o: CacheOptions;
  /** The kind's watch stops with the run. */
  linkAbort(ac: AbortController): void;
  /** What is kept of a resource (slim.ts). */
  slim(r: Resource, listed?: boolean): Resource;
  /** What the caches hold changed (--wait plans again). */
  markChanged(): void;
}

/** One kind: its resources as last known, what is known by ID, the waits on it. */
export class KindCache {
  entries = new Map<string, Resource>();
  /** IDs a live event, a Get that found it or a write of this run named: they named something (rule 4). */
  private readonly named = new Set<string>();
  /** Known gone: a DESTROYED event, a Destroy of this run, a Get answering NotFound (until it shows up again). */
  private readonly goneIds = new Set<string>();
  /** IDs a Get found that the kind's List had left out: that List was not complete (design rule 10). */
  private readonly missed = new Set<string>();
  /** Destroyed by this run and its DESTROYED event not seen yet: older events of it are stale. */
  private readonly destroyedByUs = new Set<string>();
  /**
   * What a DESTROYED event showed last of an ID (its creation time and version), until the watch
   * shows that ID again. A Get's or a write's answer may arrive after the watch's DESTROYED event of
   * the same resource (the owner destroyed it as soon as our write let go): such an answer is older
   * than the event and must not bring the resource back.
   */
  private readonly destroyedAt = new Map<string, { created: string | undefined; version: bigint }>();
  readonly waiters = new Map<string, Set<Waiter>>();
  private readonly reading = new Set<string>();
  /** Events that came while the List was read, applied over it; undefined once listed. */
  private buffer: WatchEvent[] | undefined;
  private listing = false;
  private synced = false;
  private failure: unknown;
  private restarts = 0;
  /** Which start or re-list a List belongs to: one that a re-list overtook is dropped. */
  private gen = 0;
  private ready!: Promise<void>;
  private settle!: { resolve: () => void; reject: (e: unknown) => void };
  private ac: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly c: KindHost,
    readonly namespace: string,
    readonly type: string,
    private readonly keep: (r: Resource) => boolean,
  ) {
    this.start();
  }

  private start(): void {
    this.synced = false;
    this.failure = undefined;
    this.ready = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.ready.catch(() => undefined);
    if (!this.c.o.live) {
      this.gen++;
      this.buffer = [];
      this.listing = false;
      this.list();
      return;
    }
    this.ac = new AbortController();
    const signal = this.ac.signal;
    this.c.linkAbort(this.ac);
    this.awaitEstablished();
    void this.consume(
      this.c.state.watchKind(this.namespace, this.type, {
        bootstrapContents: false,
        signal,
        onReset: () => this.relist(),
      }),
      signal,
    );
  }

  /** The events from now on are held, and the kind is listed again once the watch is established. */
  private awaitEstablished(): void {
    this.gen++;
    this.buffer = [];
    this.listing = false;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.list(), this.c.o.establishMs ?? ESTABLISH_FALLBACK_MS);
    this.timer.unref();
  }

  /** The client restarts the watch from scratch (its bookmark was refused): what came meanwhile is lost. */
  private relist(): void {
    this.ready = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.ready.catch(() => undefined);
    this.synced = false;
    this.awaitEstablished();
    this.c.markChanged();
  }

  private async consume(events: AsyncIterable<WatchEvent[]>, signal: AbortSignal): Promise<void> {
    try {
      for await (const batch of events) {
        // The first message after the empty one: the watch is established (the bootstrap bookmark's NOOP).
        this.list();
        for (const e of batch) this.event(e);
        if (signal.aborted) break;
      }
    } catch (err) {
      if (!signal.aborted) this.fail(err);
    } finally {
      // Stopped (the run's signal, the caches closed) before it was listed: whoever waits for it is
      // told, or a run interrupted while a watch opens would wait on nothing and exit 0 without a result.
      if (signal.aborted && !this.synced && this.ac?.signal === signal) {
        clearTimeout(this.timer);
        this.settle.reject(this.c.o.signal?.aborted ? this.c.o.signal.reason : new Error('the watch was stopped'));
      }
    }
  }

  private list(): void {
    if (this.listing) return;
    this.listing = true;
    clearTimeout(this.timer);
    const gen = this.gen;
    this.c.state
      .list(this.namespace, this.type, { signal: this.c.o.signal })
      .then((rs) => {
        if (gen !== this.gen) return;
        const fresh = new Map<string, Resource>();
        for (const r of rs) {
          this.missed.delete(r.metadata.id);
          if (this.keep(r)) fresh.set(r.metadata.id, this.c.slim(r, true));
        }
        this.bound(fresh.size);
        this.entries = fresh;
        const held = this.buffer ?? [];
        this.buffer = undefined;
        for (const e of held) this.apply(e);
        this.synced = true;
        this.settle.resolve();
        for (const id of [...this.waiters.keys()]) this.check(id);
        this.c.markChanged();
      })
      .catch((err: unknown) => {
        if (gen === this.gen) this.fail(err);
      });
  }

  private fail(err: unknown): void {
    this.failure = err;
    this.synced = false;
    clearTimeout(this.timer);
    this.ac?.abort();
    this.settle.reject(err);
    for (const set of this.waiters.values()) for (const w of set) w.reject(err);
    this.waiters.clear();
    this.c.markChanged();
  }

  /** Resolves once the kind is listed; a kind whose watch or List failed is started again (a few times). */
  async whenReady(): Promise<void> {
    if (this.failure !== undefined) {
      if (this.restarts >= MAX_RESTARTS || this.c.o.signal?.aborted) throw this.failure;
      this.restarts++;
      this.start();
    }
    await this.ready;
  }

  get failed(): unknown {
    return this.failure;
  }

  private event(e: WatchEvent): void {
    if (e.type !== 'created' && e.type !== 'updated' && e.type !== 'destroyed') return;
    if (this.buffer) {
      this.buffer.push(e);
      this.bound(this.buffer.length);
      return;
    }
    if (this.apply(e)) this.c.markChanged();
  }

  /** Applies a live event; whether what the cache holds changed. */
  private apply(e: WatchEvent): boolean {
    const id = e.resource.metadata.id;
    this.remember(id);
    if (e.type === 'destroyed') {
      this.destroyedByUs.delete(id);
      this.goneIds.add(id);
      if (this.destroyedAt.size < 4 * this.max())
        this.destroyedAt.set(id, {
          created: e.resource.metadata.created,
          version: safeVersion(e.resource.metadata.version),
        });
      const had = this.entries.delete(id);
      this.check(id);
      return had;
    }
    // Our Destroy came first: an event of it from before that is stale.
    if (this.destroyedByUs.has(id)) return false;
    // The watch is in order: what it shows after a DESTROYED event is the ID created anew.
    this.destroyedAt.delete(id);
    const changed = this.put(e.resource);
    this.check(id);
    return changed;
  }

  /** Keeps `r` unless what is held is newer (this run's own write); whether anything changed. */
  private put(r: Resource): boolean {
    const id = r.metadata.id;
    const cur = this.entries.get(id);
    this.goneIds.delete(id);
    if (!this.keep(r)) return cur !== undefined && this.entries.delete(id);
    if (cur && safeVersion(cur.metadata.version) >= safeVersion(r.metadata.version)) return false;
    this.entries.set(id, this.c.slim(r));
    this.bound(this.entries.size);
    return true;
  }

  private remember(id: string): void {
    if (this.named.size < 4 * this.max()) this.named.add(id);
  }

  private max(): number {
    return this.c.o.maxPerKind ?? DEFAULT_MAX_PER_KIND;
  }

  private bound(n: number): void {
    if (n > this.max())
      throw new StubError(
        'STUB_CACHE_TOO_LARGE',
        ExitCode.Incomplete,
        `${this.namespace}/${this.type}: more than ${this.max()} resources or pending events (design rule 12); check ` +
          `what answers in front of Omni`,
      );
  }

  /** A Get of this run found it, or a write of this run answered it: read by its ID. */
  observe(r: Resource): void {
    this.remember(r.metadata.id);
    const d = this.destroyedAt.get(r.metadata.id);
    // An answer from before the DESTROYED event the watch already showed: stale, still gone.
    if (d && r.metadata.created === d.created && safeVersion(r.metadata.version) <= d.version) {
      this.check(r.metadata.id);
      return;
    }
    this.destroyedByUs.delete(r.metadata.id);
    this.put(r);
    this.check(r.metadata.id);
  }

  /** A Get found what neither the List nor the watch had shown. */
  observeMissed(r: Resource): void {
    if (this.missed.size < this.max()) this.missed.add(r.metadata.id);
    this.observe(r);
  }

  /** Whether the kind's List left this ID out and a Get found it. */
  wasMissed(id: string): boolean {
    return this.missed.has(id);
  }

  /** A Get of this run answered NotFound. Not evidence that the ID ever named anything. */
  observeNotFound(id: string): void {
    this.entries.delete(id);
    this.goneIds.add(id);
    this.check(id);
  }

  readById(id: string): void {
    this.remember(id);
  }

  /** This run destroyed it, or a NotFound for what was read by its ID showed it gone. */
  destroyed(id: string): void {
    this.remember(id);
    this.entries.delete(id);
    this.goneIds.add(id);
    this.destroyedByUs.add(id);
    this.check(id);
  }

  isGone(id: string): boolean {
    return this.goneIds.has(id) && !this.entries.has(id);
  }

  namedById(id: string): boolean {
    return this.named.has(id);
  }

  /** The finalizers as last known, 'gone' once known gone. */
  finalizersOf(id: string): readonly string[] | 'gone' | undefined {
    const r = this.entries.get(id);
    if (r) return r.metadata.finalizers;
    return this.goneIds.has(id) ? 'gone' : undefined;
  }

  wait(id: string, w: Waiter): void {
    if (this.failure !== undefined) {
      w.reject(this.failure);
      return;
    }
    let set = this.waiters.get(id);
    if (!set) this.waiters.set(id, (set = new Set()));
    set.add(w);
    this.check(id);
  }

  unwait(id: string, w: Waiter): void {
    const set = this.waiters.get(id);
    set?.delete(w);
    if (set && set.size === 0) this.waiters.delete(id);
  }

  /**
   * Settles the waits on `id` that what is known decides. Before the List only evidence counts. A
   * `no-finalizers` wait, whose outcome a step acts on, ends as gone only on evidence; a resource
   * absent from the cache is read by its ID first. A `gone` wait (what was released, which only
   * paces the next pass or a sentence of the report) also ends on the absence.
   */
  private check(id: string): void {
    const set = this.waiters.get(id);
    if (!set) return;
    const r = this.entries.get(id);
    const gone = this.isGone(id);
    if (!r && !gone && !this.synced) return;
    let absent = false;
    for (const w of [...set]) {
      let out: WaitOutcome | undefined;
      if (r) {
        if (
          w.until === 'no-finalizers' &&
          r.metadata.finalizers.length === 0 &&
          safeVersion(r.metadata.version) >= w.minVersion
        )
          out = 'released';
      } else if (gone || w.until === 'gone') {
        out = 'gone';
      } else {
        absent = true;
      }
      if (out) w.resolve(out);
    }
    if (absent) this.read(id);
  }

  /**
   * One Get of the ID at a time; what it answers is observed. Any other error: the wait goes on, to its end or its
   * timeout.
   */
  private read(id: string): void {
    if (this.reading.has(id) || this.c.o.signal?.aborted) return;
    this.reading.add(id);
    const get = () => this.c.state.get({ namespace: this.namespace, type: this.type, id }, { signal: this.c.o.signal });
    (this.c.o.limiter ? this.c.o.limiter.run(get) : get()).then(
      (r) => {
        this.reading.delete(id);
        this.observe(r);
      },
      (err: unknown) => {
        this.reading.delete(id);
        if (hasCode(err, 'OMNI_NOT_FOUND')) this.observeNotFound(id);
      },
    );
  }
}

export function safeVersion(v: string): bigint {
  try {
    return versionNumber(v);
  } catch {
    return 0n;
  }
}
