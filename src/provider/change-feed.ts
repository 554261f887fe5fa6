// With --wait: one kind watch per type that matters, used only as a "something changed" signal so
// the next pass (one List per type) runs when Omni or a user acted, not on a polling schedule.

import type { State } from '../omni-client/types.js';

export interface WatchedKind {
  namespace: string;
  type: string;
}

export class ChangeFeed {
  private dirty = false;
  private wake: (() => void) | undefined;
  private readonly ac = new AbortController();
  private readonly unlink: () => void;
  failure: unknown;

  constructor(state: State, kinds: WatchedKind[], signal?: AbortSignal) {
    const onAbort = () => this.ac.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.unlink = () => signal?.removeEventListener('abort', onAbort);
    for (const k of kinds) void this.consume(state, k);
  }

  private async consume(state: State, k: WatchedKind): Promise<void> {
    try {
      for await (const batch of state.watchKind(k.namespace, k.type, { bootstrapContents: false, signal: this.ac.signal, onReset: () => this.mark() })) {
        if (batch.some((e) => e.type === 'created' || e.type === 'updated' || e.type === 'destroyed')) this.mark();
      }
    } catch (err) {
      if (!this.ac.signal.aborted) {
        this.failure = err;
        this.mark();
      }
    }
  }

  private mark(): void {
    this.dirty = true;
    this.wake?.();
  }

  /** Resolves true on a change (at once if one came since the last call), false after `ms`. */
  async next(ms: number): Promise<boolean> {
    if (this.dirty) {
      this.dirty = false;
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const done = (changed: boolean) => {
        clearTimeout(timer);
        this.wake = undefined;
        this.ac.signal.removeEventListener('abort', onAbort);
        if (changed) this.dirty = false;
        resolve(changed);
      };
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), Math.max(0, ms));
      this.ac.signal.addEventListener('abort', onAbort, { once: true });
      this.wake = () => done(true);
    });
  }

  close(): void {
    this.unlink();
    this.ac.abort();
  }
}
