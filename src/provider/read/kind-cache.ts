// One kind's informer-like cache (cache.ts keeps one per kind): a Watch without bootstrap contents,
// one List once Omni says the watch is established, the events that came meanwhile applied over it
// in order, every later one as it comes; listed again when the client's bookmark is refused.
// A kind the run does not follow (no wait on it, not in the plan's kinds: cache.ts `follow`) has its
// watch closed at the first event nobody reads (most of a run's events are the echo of its own
// writes): it is then stale, and opened again and listed before anything is read from it by a query
// (a snapshot, a wait) or the run follows it again. A kind whose watch cannot stay established
// (CACHE_DEFAULTS.unstableBreaks streams in a row broke before they delivered anything) is read with
// Lists instead: one per query, and one every so often while someone waits on it (docs/design.md
// rule 10's waits then rest on Lists and Gets). What it holds, what it knows by ID and what it
// knows gone are kind-store.ts's: an absence from it is never evidence (design rules 4 and 10).

import type { Resource } from '../../omni-api/resource.js';
import type { WatchEvent } from '../../omni-api/state.js';
import { hasCode } from '../../omni-client/errors.js';
import type { WaitOutcome } from './reads.js';
import { CACHE_DEFAULTS } from './cache-options.js';
import type { KindHost, Waiter } from './cache-options.js';
import { KindStore, safeVersion } from './kind-store.js';

/** One kind: its List and watch, what they showed (kind-store.ts), the waits on it. */
export class KindCache extends KindStore {
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
  private followed = true;
  /** Its watch was closed while nobody read its events: opened again (and listed) before it is read. */
  private dormant = false;
  /** Events were left unread since the last List: what it holds may be out of date. */
  private stale = false;
  /** Read with Lists, its watch given up (CACHE_DEFAULTS.unstableBreaks). */
  polling = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private listStartedAt = 0;
  private lastListMs = 0;

  constructor(
    private readonly c: KindHost,
    namespace: string,
    type: string,
    keep: (r: Resource) => boolean,
  ) {
    super(c, namespace, type, keep);
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
        // What the cache holds is each event's resource: the previous state of an UPDATED one is
        // never read (a third of what its events bring at 10 000 machines, docs/performance.md).
        previous: false,
        signal,
        onReset: () => this.relist(),
        // Read while listing, while someone waits, or while the run follows the kind.
        skip: () => !this.followed && this.buffer === undefined && this.waiters.size === 0,
        onSkipped: () => this.sleep(),
        onBreak: (inARow) => {
          if (inARow >= CACHE_DEFAULTS.unstableBreaks) this.toPolling(inARow);
        },
      }),
      signal,
    );
  }

  /** The run follows the kind from now on, or not; a kind followed again whose watch sleeps is woken. */
  follow(on: boolean): void {
    this.followed = on;
    if (on && this.dormant) this.refresh();
  }

  /**
   * An event came that nobody reads (the kind is not followed, nobody waits on it): its watch is
   * closed, and what the kind holds is stale until it is listed again over a new watch.
   */
  private sleep(): void {
    this.stale = true;
    if (this.dormant || this.polling) return;
    this.dormant = true;
    this.ac?.abort();
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
        // What is kept of each (replaceAll), as it comes.
        keep: (r) => (this.keep(r) ? this.c.slim(r, true) : r),
      })
      .then((rs) => {
        if (gen !== this.gen) return;
        this.lastListMs = performance.now() - this.listStartedAt;
        // A kind read with Lists is out of date again as soon as it is read.
        if (this.polling) this.stale = true;
        this.replaceAll(rs);
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
    if (this.dormant) {
      this.dormant = false;
      this.start();
      return;
    }
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

  protected max(): number {
    return this.c.o.maxPerKind ?? CACHE_DEFAULTS.maxPerKind;
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
  protected check(id: string): void {
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
