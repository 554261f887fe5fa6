// The token bucket both of the sim's back-pressures draw on: Omni's etcd write throttle (throttle.ts,
// bytes per caller class) and a rate-limiting proxy (proxy-limit.ts, requests). Apart because it is
// the one piece they share, and because its arithmetic (golang.org/x/time/rate's reservations, debt
// included) is tested on its own clock.

/** A reservation of tokens: when they are there, and how to give them back. */
export interface Reservation {
  waitMs: number;
  cancel(nowMs: number): void;
}

/**
 * A token bucket with reservations, with the semantics of golang.org/x/time/rate's Limiter: it starts
 * full, refills at `perSecond` up to `burst`, and a reservation may take it below zero (the tokens of
 * the writes already waiting), so that a reservation's wait is the debt ahead of it. Times in ms.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  /** When the latest reservation's tokens are there. */
  private lastEvent: number;

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    nowMs: number,
  ) {
    this.tokens = burst;
    this.last = nowMs;
    this.lastEvent = nowMs;
  }

  private level(nowMs: number): number {
    const elapsed = Math.max(0, nowMs - Math.min(nowMs, this.last));
    return Math.min(this.burst, this.tokens + (elapsed * this.perSecond) / 1000);
  }

  /** How long until n tokens are there (Infinity when the bucket never refills). */
  untilMs(nowMs: number, n: number): number {
    const missing = n - this.level(nowMs);
    if (missing <= 0) return 0;
    return this.perSecond > 0 ? (missing * 1000) / this.perSecond : Infinity;
  }

  /** Takes n tokens if they are there within `maxWaitMs` (Infinity: whenever); undefined takes nothing. */
  reserve(nowMs: number, n: number, maxWaitMs: number): Reservation | undefined {
    const waitMs = this.untilMs(nowMs, n);
    // Tokens that never come (no refill) are refused rather than waited for forever.
    if (n > this.burst || waitMs > maxWaitMs || waitMs === Infinity) return undefined;
    const tokens = this.level(nowMs) - n;
    const at = nowMs + waitMs;
    this.last = nowMs;
    this.tokens = tokens;
    this.lastEvent = at;
    return { waitMs, cancel: (t) => this.giveBack(n, at, t) };
  }

  /** Returns what a cancelled reservation took, but not the tokens reservations after it are counting on. */
  private giveBack(n: number, at: number, nowMs: number): void {
    if (at < nowMs) return;
    const restore = n - ((this.lastEvent - at) * this.perSecond) / 1000;
    if (restore <= 0) return;
    this.tokens = Math.min(this.burst, this.level(nowMs) + restore);
    this.last = nowMs;
    if (at === this.lastEvent) {
      const before = at - (n * 1000) / this.perSecond;
      if (before >= nowMs) this.lastEvent = before;
    }
  }
}
