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
  finalizers: number;
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

class KindWatch {
  readonly seen = new Map<string, Seen>();
  /** IDs whose DESTROYED event we saw: positive evidence, valid before BOOTSTRAPPED too. */
  readonly destroyed = new Set<string>();
  readonly waiters = new Map<string, Set<Waiter>>();
  bootstrapped = false;
  failure: unknown;

  constructor(state: State, namespace: string, type: string, signal: AbortSignal) {
    void this.consume(state.watchKind(namespace, type, { signal, onReset: () => this.reset() }), signal);
  }

  private reset(): void {
    this.seen.clear();
    this.destroyed.clear();
    this.bootstrapped = false;
  }

  /** A resource read outside the watch (the bootstrap fallback); older than what the watch saw is ignored. */
  observe(id: string, r: Resource | undefined): void {
    if (!r) {
      if (!this.seen.has(id)) this.destroyed.add(id);
    } else {
      const version = safeVersion(r.metadata.version);
      const cur = this.seen.get(id);
      if (!cur || cur.version < version) this.seen.set(id, { version, finalizers: r.metadata.finalizers.length });
    }
    this.check(id);
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
      this.seen.set(id, { version: safeVersion(e.resource.metadata.version), finalizers: e.resource.metadata.finalizers.length });
    } else return;
    this.check(id);
  }

  check(id: string): void {
    const set = this.waiters.get(id);
    if (!set) return;
    const s = this.seen.get(id);
    // Without BOOTSTRAPPED, only positive evidence counts: an event showing it released, or destroyed.
    if (!s && !this.bootstrapped && !this.destroyed.has(id)) return;
    for (const w of [...set]) {
      let out: WaitOutcome | undefined;
      if (!s) out = 'gone';
      else if (w.until === 'no-finalizers' && s.finalizers === 0 && s.version >= w.minVersion) out = 'released';
      if (out) {
        set.delete(w);
        w.resolve(out);
      }
    }
    if (set.size === 0) this.waiters.delete(id);
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
   * teardown wrote), or is gone; or on timeout. A broken watch that cannot resume rejects.
   */
  wait(p: Pointer, until: WaitUntil, timeoutMs: number, minVersion = '0'): Promise<WaitOutcome> {
    if (this.ac.signal.aborted) return Promise.resolve('aborted');
    const kindKey = `${p.namespace}\u0000${p.type}`;
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
      timer.t = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
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
      this.state.get(p, { signal: this.ac.signal }).then(
        (r) => k.observe(p.id, r),
        (err: unknown) => {
          if (err instanceof NotFoundError) k.observe(p.id, undefined);
          // Anything else: the wait goes on and ends by the watch or its timeout.
        },
      );
    }, BOOTSTRAP_FALLBACK_MS);
    t.unref();
  }

  close(): void {
    this.unlink();
    this.ac.abort();
  }
}

function safeVersion(v: string): bigint {
  try {
    return versionNumber(v);
  } catch {
    return 0n;
  }
}
