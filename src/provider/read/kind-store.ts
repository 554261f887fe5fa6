// What one kind's cache knows (kind-cache.ts keeps it up to date from the kind's List and watch):
// its resources as last known, and apart from them what is known by ID and what is known gone, from
// the watch's events, this run's Gets and this run's writes. An absence from what it holds is never
// evidence (design rules 4 and 10); the store only records, the cache decides when to ask Omni.

import type { Resource } from '../../omni-api/resource.js';
import { versionNumber } from '../../omni-api/resource.js';
import type { WatchEvent } from '../../omni-api/state.js';
import { ExitCode, StubError } from '../../exit-codes.js';

/** What the store needs of the run's caches. */
export interface StoreHost {
  /** What is kept of a resource (slim.ts). */
  slim(r: Resource, listed?: boolean): Resource;
  /** The one copy of an ID (slim.ts), for what is remembered of it. */
  intern(s: string): string;
}

/** One kind: its resources as last known, what is known by ID. The waits on it are the cache's. */
export abstract class KindStore {
  entries = new Map<string, Resource>();
  /**
   * What is known of each ID apart from what is held of it (the Fact bits): one entry per ID, so that
   * a Destroy of this run or a DESTROYED event records all it shows with one lookup, not one per set.
   */
  private readonly facts = new Map<string, number>();
  /** IDs with Fact.Named, Fact.Missed: each bounded (design rule 12). */
  private namedIds = 0;
  private missedIds = 0;
  /**
   * What a DESTROYED event showed last of an ID (its creation time and version), until the watch
   * shows that ID again. A Get's or a write's answer may arrive after the watch's DESTROYED event of
   * the same resource (the owner destroyed it as soon as our write let go): such an answer is older
   * than the event and must not bring the resource back.
   */
  private readonly destroyedAt = new Map<string, { created: string | undefined; version: bigint }>();

  constructor(
    private readonly h: StoreHost,
    readonly namespace: string,
    readonly type: string,
    protected readonly keep: (r: Resource) => boolean,
  ) {}

  /** Resources (and pending events) of this kind held at most (design rule 12). */
  protected abstract max(): number;

  /** Settles the waits on `id` that what is known now decides. */
  protected abstract check(id: string): void;

  /** What a List answered replaces what is held (what is known by ID stays). */
  protected replaceAll(rs: readonly Resource[]): void {
    const fresh = new Map<string, Resource>();
    for (const r of rs) {
      this.note(r.metadata.id, 0, Fact.Missed);
      if (!this.keep(r)) continue;
      // Keyed by the slimmed resource's ID: the string shared by all kinds, not the List's copy.
      const kept = this.h.slim(r, true);
      fresh.set(kept.metadata.id, kept);
    }
    this.bound(fresh.size);
    this.entries = fresh;
  }

  /** Applies a live event; whether what the cache holds changed. */
  protected apply(e: WatchEvent): boolean {
    const id = this.h.intern(e.resource.metadata.id);
    if (e.type === 'destroyed') {
      this.note(id, Fact.Named | Fact.Gone, Fact.DestroyedByUs);
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
    if (this.note(id, Fact.Named) & Fact.DestroyedByUs) return false;
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
    this.note(id, 0, Fact.Gone);
    if (!this.keep(r)) return cur !== undefined && this.entries.delete(id);
    if (cur && versionAtLeast(cur.metadata.version, r.metadata.version)) return false;
    const kept = this.h.slim(r);
    this.entries.set(kept.metadata.id, kept);
    this.bound(this.entries.size);
    return true;
  }

  /**
   * Sets the facts `on` of `id` and clears those `off` (Fact.Named and Fact.Missed only while their
   * bound has room); what is known of it now.
   */
  private note(id: string, on: number, off = 0): number {
    const was = this.facts.get(id) ?? 0;
    let now = (was | on) & ~off;
    const added = now & ~was;
    if (added & Fact.Named) {
      if (this.namedIds < 4 * this.max()) this.namedIds++;
      else now &= ~Fact.Named;
    }
    if (added & Fact.Missed) {
      if (this.missedIds < this.max()) this.missedIds++;
      else now &= ~Fact.Missed;
    }
    if (was & ~now & Fact.Missed) this.missedIds--;
    if (now === was) return now;
    if (now === 0) this.facts.delete(id);
    // Keyed by the one shared copy of the ID (slim.ts): not by the copy each answer brings.
    else this.facts.set(was === 0 ? this.h.intern(id) : id, now);
    return now;
  }

  private has(id: string, fact: Fact): boolean {
    return ((this.facts.get(id) ?? 0) & fact) !== 0;
  }

  protected bound(n: number): void {
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
    this.note(r.metadata.id, Fact.Named);
    const d = this.destroyedAt.get(r.metadata.id);
    // An answer from before the DESTROYED event the watch already showed: stale, still gone.
    if (d && r.metadata.created === d.created && safeVersion(r.metadata.version) <= d.version) {
      this.check(r.metadata.id);
      return;
    }
    this.note(r.metadata.id, 0, Fact.DestroyedByUs);
    this.put(r);
    this.check(r.metadata.id);
  }

  /** A Get found what neither the List nor the watch had shown. */
  observeMissed(r: Resource): void {
    this.note(r.metadata.id, Fact.Missed);
    this.observe(r);
  }

  /** Whether the kind's List left this ID out and a Get found it. */
  wasMissed(id: string): boolean {
    return this.has(id, Fact.Missed);
  }

  /** A Get of this run answered NotFound. Not evidence that the ID ever named anything. */
  observeNotFound(id: string): void {
    this.entries.delete(id);
    this.note(id, Fact.Gone);
    this.check(id);
  }

  readById(id: string): void {
    this.note(id, Fact.Named);
  }

  /** This run destroyed it, or a NotFound for what was read by its ID showed it gone. */
  destroyed(id: string): void {
    this.note(id, Fact.Named | Fact.Gone | Fact.DestroyedByUs);
    this.entries.delete(id);
    this.check(id);
  }

  isGone(id: string): boolean {
    return this.has(id, Fact.Gone) && !this.entries.has(id);
  }

  namedById(id: string): boolean {
    return this.has(id, Fact.Named);
  }

  /** The finalizers as last known, 'gone' once known gone. */
  finalizersOf(id: string): readonly string[] | 'gone' | undefined {
    const r = this.entries.get(id);
    if (r) return r.metadata.finalizers;
    return this.has(id, Fact.Gone) ? 'gone' : undefined;
  }
}

/** What is known of an ID (KindStore's `facts`), one bit each. */
const enum Fact {
  /** A live event, a Get that found it or a write of this run named it: it named something (rule 4). */
  Named = 1,
  /** Known gone: a DESTROYED event, a Destroy of this run, a Get answering NotFound (until it shows up again). */
  Gone = 2,
  /** A Get found it and the kind's List had left it out: that List was not complete (design rule 10). */
  Missed = 4,
  /** Destroyed by this run and its DESTROYED event not seen yet: older events of it are stale. */
  DestroyedByUs = 8,
}

/**
 * Whether version `a` is at least `b`, as safeVersion reads them. Both short runs of digits (every
 * version Omni has written so far) are compared as numbers, which are exact below 2^53: no BigInt
 * made for each event and answer compared with what is held.
 */
export function versionAtLeast(a: string, b: string): boolean {
  const x = smallVersion(a);
  const y = smallVersion(b);
  return x >= 0 && y >= 0 ? x >= y : safeVersion(a) >= safeVersion(b);
}

/** The value of a version of 1 to 15 decimal digits; -1 for anything else. */
function smallVersion(v: string): number {
  if (v.length === 0 || v.length > 15) return -1;
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    const d = v.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

export function safeVersion(v: string): bigint {
  try {
    return versionNumber(v);
  } catch {
    return 0n;
  }
}
