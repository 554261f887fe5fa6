// The back-pressure layer's counters, the report's `throttling`: the signals and lost answers, the writes found
// applied, sent again, given up or too large, and the wall time during which at least one write was held back.
// Apart from pressure.ts, which decides what a write does next, because this only counts; the window's sizes
// are WriteWindow's own (window.ts).

import type { WriteWindow } from './window.js';

/** How much a run was throttled (the report's `throttling`). */
export interface ThrottlingStats {
  /** Back-pressure answers to writes (DeadlineExceeded, Unavailable, 429, 502-504). */
  signals: number;
  /** Writes Omni refused as larger than its write burst (ResourceExhausted): sent once, never again. */
  tooLarge: number;
  /** Writes whose answer was lost after they were sent (a broken connection). */
  lostAnswers: number;
  /** Wall time during which at least one write was held back (window, Retry-After, backoff), ms. */
  waitedMs: number;
  /** The window now, and the smallest it was. */
  writesInFlight: number;
  minWritesInFlight: number;
  maxWritesInFlight: number;
  /** Writes sent again after a Get showed they had not taken effect. */
  retriedWrites: number;
  /** Writes of unknown outcome that a Get showed had taken effect: not sent again. */
  foundApplied: number;
  /** Writes that ran out of sends or time (STUB_THROTTLED). */
  gaveUp: number;
  /** When the first and the last signal came (ms since the epoch). */
  firstSignalAt?: number;
  lastSignalAt?: number;
}

/** The counts of one client's writes; `stats` adds the window's sizes. */
export class ThrottlingCounts {
  signals = 0;
  lostAnswers = 0;
  retriedWrites = 0;
  foundApplied = 0;
  gaveUp = 0;
  tooLarge = 0;
  firstSignalAt: number | undefined;
  lastSignalAt: number | undefined;
  /** Writes held back now, and since when at least one has been; the total so far. */
  #held = 0;
  #heldSince = 0;
  #waitedMs = 0;

  constructor(private readonly now: () => number) {}

  /** A back-pressure answer, and when it came (wall clock). */
  signal(): void {
    this.signals++;
    this.firstSignalAt ??= Date.now();
    this.lastSignalAt = Date.now();
  }

  /** A write is held back from now until `unhold` (the time while at least one is counts as waited). */
  hold(): void {
    if (this.#held++ === 0) this.#heldSince = this.now();
  }

  unhold(): void {
    if (--this.#held === 0) this.#waitedMs += this.now() - this.#heldSince;
  }

  stats(window: Pick<WriteWindow, 'size' | 'lowest' | 'max'>): ThrottlingStats {
    return {
      signals: this.signals,
      tooLarge: this.tooLarge,
      lostAnswers: this.lostAnswers,
      waitedMs: Math.round(this.#waitedMs + (this.#held > 0 ? this.now() - this.#heldSince : 0)),
      writesInFlight: window.size,
      minWritesInFlight: window.lowest,
      maxWritesInFlight: window.max,
      retriedWrites: this.retriedWrites,
      foundApplied: this.foundApplied,
      gaveUp: this.gaveUp,
      ...(this.firstSignalAt !== undefined ? { firstSignalAt: this.firstSignalAt } : {}),
      ...(this.lastSignalAt !== undefined ? { lastSignalAt: this.lastSignalAt } : {}),
    };
  }
}
