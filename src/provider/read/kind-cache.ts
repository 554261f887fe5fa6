// One kind's informer-like cache (cache.ts keeps one per kind): a Watch without bootstrap contents,
// one List once Omni says the watch is established, the events that came meanwhile applied over it
// in order, every later one as it comes; listed again when the client's bookmark is refused.
// A kind the run does not follow (no wait on it, not in the plan's kinds: cache.ts `follow`) has its
// events counted, not read; it is then stale, and listed again before anything is read from it by a
// query (a snapshot, a wait). A kind whose watch cannot stay established (CACHE_DEFAULTS.unstableBreaks streams
// in a row broke before they delivered anything) is read with Lists instead: one per query, and one every
// so often while someone waits on it (docs/design.md rule 10's waits then rest on Lists and Gets).
// What it knows by ID and what it knows gone are kept apart from what it holds: an absence from it
// is never evidence (design rules 4 and 10).

import type { Resource } from '../../omni-api/resource.js';
import { versionNumber } from '../../omni-api/resource.js';
import type { State, WatchEvent } from '../../omni-api/state.js';
import { hasCode } from '../../omni-client/errors.js';
import { ExitCode, StubError } from '../../exit-codes.js';
import type { WaitOutcome, WaitUntil } from './reads.js';
import type { Logger } from 'pino';

export interface CacheOptions {
  providerId: string;
  /** Told when a kind's watch is given up for Lists. */
  logger?: Logger;
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
}

/** The caches' bounds, retries and timings, in one place (docs/architecture.md, "A write, layer by layer"). */
export const CACHE_DEFAULTS = {
  /** How long a new watch may take to say it is established before its List goes anyway. */
  establishMs: 1_000,
  /** As many as one List may hold (`--max-list-items`' default). */
  maxPerKind: 250_000,
  /** Times a kind whose watch or List failed is started again, on the next query, before the failure stays. */
  restarts: 3,
  /** Streams in a row that broke before delivering anything, after which a kind is read with Lists instead. */
  unstableBreaks: 3,
  /** Between two Lists of a kind read without a watch while someone waits: at least this, twice the last List. */
  pollMinMs: 1_000,
  pollMaxMs: 30_000,
} as const;

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
  /** The one copy of an ID (slim.ts), for what is remembered of it. */
  intern(s: string): string;
  /** What the caches hold changed (--wait plans again). */
  markChanged(): void;
  /** How many resources of `type` its List has brought so far (while it streams). */
  listProgress(type: string, count: number): void;
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
  /** Whether the run follows this kind (cache.ts `follow`): its events are read even when nobody waits. */
  followed = true;
  /** Events were left unread since the last List: what it holds may be out of date. */
  private stale = false;
  /** Events left unread, in all. */
  skipped = 0;
  /** Read with Lists, its watch given up (CACHE_DEFAULTS.unstableBreaks). */
  polling = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private listStartedAt = 0;
  private lastListMs = 0;

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
    if (!this.c.o.live || this.polling) {
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
        // Read while listing, while someone waits, or while the run follows the kind.
        skip: () => !this.followed && this.buffer === undefined && this.waiters.size === 0,
        onSkipped: () => {
          this.stale = true;
          this.skipped++;
        },
        onBreak: (inARow) => {
          if (inARow >= CACHE_DEFAULTS.unstableBreaks) this.toPolling(inARow);
        },
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
    this.timer = setTimeout(() => this.list(), this.c.o.establishMs ?? CACHE_DEFAULTS.establishMs);
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

  /**
   * The watch broke `inARow` times before delivering anything: it is given up, and the kind is read
   * with Lists from now on (a query lists it; so does a timer while someone waits on it).
   */
  private toPolling(inARow: number): void {
    if (this.polling) return;
    this.polling = true;
    this.ac?.abort();
    this.c.o.logger?.warn(
      { namespace: this.namespace, type: this.type, breaks: inARow },
      'the watch of this kind breaks before it delivers anything: reading it with Lists instead',
    );
    this.stale = true;
    const stop = new AbortController();
    this.c.linkAbort(stop);
    const poll = (): void => {
      if (stop.signal.aborted) return;
      if (this.waiters.size > 0) this.refresh();
      const ms = Math.min(CACHE_DEFAULTS.pollMaxMs, Math.max(CACHE_DEFAULTS.pollMinMs, 2 * this.lastListMs));
      this.pollTimer = setTimeout(poll, ms);
      this.pollTimer.unref();
    };
    stop.signal.addEventListener('abort', () => clearTimeout(this.pollTimer), { once: true });
    // Until the watch's List: no List of its own yet.
    if (this.synced) poll();
    else {
      this.pollTimer = setTimeout(poll, CACHE_DEFAULTS.pollMinMs);
      this.pollTimer.unref();
    }
  }

  private list(): void {
    if (this.listing) return;
    this.listing = true;
    clearTimeout(this.timer);
    this.listStartedAt = performance.now();
    const gen = this.gen;
    this.c.state
      .list(this.namespace, this.type, {
        signal: this.c.o.signal,
        onProgress: (n) => this.c.listProgress(this.type, n),
      })
      .then((rs) => {
        if (gen !== this.gen) return;
        this.lastListMs = performance.now() - this.listStartedAt;
        // A kind read with Lists is out of date again as soon as it is read.
        if (this.polling) this.stale = true;
        const fresh = new Map<string, Resource>();
        for (const r of rs) {
          this.missed.delete(r.metadata.id);
          if (!this.keep(r)) continue;
          // Keyed by the slimmed resource's ID: the string shared by all kinds, not the List's copy.
          const kept = this.c.slim(r, true);
          fresh.set(kept.metadata.id, kept);
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

  /**
   * Resolves once the kind is listed; a kind whose watch or List failed is started again (a few times),
   * one whose events were left unread is listed again.
   */
  async whenReady(): Promise<void> {
    if (this.failure !== undefined) {
      if (this.restarts >= CACHE_DEFAULTS.restarts || this.c.o.signal?.aborted) throw this.failure;
      this.restarts++;
      this.start();
    } else if (this.stale) this.refresh();
    await this.ready;
  }

  /** Lists a stale kind again (its watch is up): what comes meanwhile is applied over the List. */
  private refresh(): void {
    if (!this.stale || !this.synced) return;
    this.stale = false;
    // Followed until the run says otherwise: what comes before its next `follow` is read.
    this.followed = true;
    this.ready = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.ready.catch(() => undefined);
    this.synced = false;
    this.gen++;
    this.buffer = [];
    this.listing = false;
    this.list();
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
    const id = this.c.intern(e.resource.metadata.id);
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
    const kept = this.c.slim(r);
    this.entries.set(kept.metadata.id, kept);
    this.bound(this.entries.size);
    return true;
  }

  private remember(id: string): void {
    if (this.named.size < 4 * this.max()) this.named.add(this.c.intern(id));
  }

  private max(): number {
    return this.c.o.maxPerKind ?? CACHE_DEFAULTS.maxPerKind;
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
    this.goneIds.add(this.c.intern(id));
    this.check(id);
  }

  readById(id: string): void {
    this.remember(id);
  }

  /** This run destroyed it, or a NotFound for what was read by its ID showed it gone. */
  destroyed(id: string): void {
    this.remember(id);
    this.entries.delete(id);
    id = this.c.intern(id);
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
    // A kind read with Lists is listed again for its waiters by its timer, not once per wait.
    if (!this.polling) this.refresh();
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
    this.c.state.get({ namespace: this.namespace, type: this.type, id }, { signal: this.c.o.signal }).then(
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
