// The adaptive bound on writes in flight of back-pressure (pressure.ts; docs/design.md rule 14):
// AIMD, halved on a signal once per round, grown by one per window's worth of successes, in order of
// rank (CallOptions.rank: the steps of items under way before those of new ones), FIFO among equal
// ranks, and a Retry-After (capped) that holds every new write until it has passed. Reads are never
// held here.

import { CanceledError } from '../../omni-api/errors.js';
import { onAbort as onAbortOf } from '../transport/abort.js';
import { RETRY_AFTER_CAP_MS } from '../transport/retry.js';
import { RankQueue, type QueueTicket } from '../rank-queue.js';

// --- the adaptive window ------------------------------------------------------------------------

export interface WindowOptions {
  /** The most writes in flight (the run's --concurrency). */
  max: number;
  /** The fewest. Default 1. */
  min?: number;
  /** The longest Retry-After honoured (ms). Default RETRY_AFTER_CAP_MS (60 s). */
  retryAfterCapMs?: number;
  now?: () => number;
}

/** A write's place in the window: the round it started in (a signal shrinks the window once per round). */
export interface Ticket {
  readonly round: number;
}

/**
 * A write waiting for its place. Its deadline and its caller's signal are the window's to watch (one
 * timer for the earliest deadline, one subscription per signal), not its own: every write of a run
 * whose items outnumber the window waits here, and a timer and an abort subscription per wait, with
 * their closures, were garbage on every write's way.
 */
class Waiter {
  place: QueueTicket | undefined;
  constructor(
    readonly resolve: (t: Ticket) => void,
    readonly reject: (e: unknown) => void,
    readonly signal: AbortSignal | undefined,
    readonly deadline: number,
    readonly onTimeout: () => unknown,
  ) {}
}

/** The window's one subscription to a signal that waiting writes share, and how many of them do. */
interface SignalWatch {
  waiters: number;
  unsubscribe: () => void;
}

const noRoomInTime = (): unknown => new Error('no room for the write in time');

/** What WriteWindow.release is told about the write that ends. */
export type WriteEnd = { kind: 'ok' } | { kind: 'signal'; retryAfterMs?: number | undefined } | { kind: 'other' };

/**
 * AIMD over writes in flight. In order: a write that waits is started before any of a higher rank, and
 * before any of its rank that comes later. Every wait ends: at the caller's signal, at its deadline, or
 * when a write ends or a pause passes.
 */
export class WriteWindow {
  readonly max: number;
  readonly min: number;
  readonly retryAfterCapMs: number;
  #now: () => number;
  /** The window, fractional between integers while it grows (one per `floor(limit)` successes). */
  #limit: number;
  #inFlight = 0;
  #round = 0;
  #pausedUntil = 0;
  #queue = new RankQueue<Waiter>();
  #timer: NodeJS.Timeout | undefined;
  #lowest: number;
  /** The writes waiting (in arrival order), whose deadlines and signals the window watches. */
  #waiting = new Set<Waiter>();
  /** The timer of the earliest deadline among them, and that deadline. */
  #deadlineTimer: NodeJS.Timeout | undefined;
  #deadlineAt = Infinity;
  #signals = new Map<AbortSignal, SignalWatch>();

  constructor(o: WindowOptions) {
    if (!(Number.isInteger(o.max) && o.max >= 1))
      throw new RangeError(`the most writes in flight must be a whole number of at least 1 (got ${o.max})`);
    this.max = o.max;
    this.min = Math.min(o.max, Math.max(1, o.min ?? 1));
    this.retryAfterCapMs = o.retryAfterCapMs ?? RETRY_AFTER_CAP_MS;
    this.#now = o.now ?? Date.now;
    this.#limit = o.max;
    this.#lowest = o.max;
  }

  /** Writes that may be in flight now. */
  get size(): number {
    return Math.floor(this.#limit);
  }

  /** The smallest the window has been. */
  get lowest(): number {
    return this.#lowest;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** Whether a write asking now would wait (the window is full, or paused, or others wait). */
  wouldWait(): boolean {
    return this.#queue.size > 0 || !this.#canStart();
  }

  /** Until when new writes are held (a Retry-After), in the clock of `now`. */
  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /** A place for one write now, without a promise, when there is room and nobody waits; undefined otherwise. */
  tryAcquire(signal?: AbortSignal): Ticket | undefined {
    return !signal?.aborted && this.#queue.size === 0 && this.#canStart() ? this.#start() : undefined;
  }

  /**
   * A place for one write: at once when there is room, else in turn (`rank`, lowest first). Rejects at `deadline` (ms,
   * `now`'s clock) or when `signal` aborts.
   */
  acquire(
    signal?: AbortSignal,
    deadline = Infinity,
    onTimeout: () => unknown = noRoomInTime,
    rank = 0,
  ): Promise<Ticket> {
    if (signal?.aborted) return Promise.reject(new CanceledError('cancelled by the caller', { cause: signal.reason }));
    if (this.#queue.size === 0 && this.#canStart()) return Promise.resolve(this.#start());
    return new Promise<Ticket>((resolve, reject) => {
      const w = new Waiter(resolve, reject, signal, deadline, onTimeout);
      w.place = this.#queue.push(w, rank);
      this.#waiting.add(w);
      if (deadline < this.#deadlineAt) this.#armDeadline(deadline);
      // One listener on the caller's signal however many writes wait (abort.ts, and one subscription
      // per signal here): the run's signal is shared by every write, and Node warns from 11 listeners
      // on (a line that is not JSON on stderr).
      if (signal) this.#watch(signal);
      this.#pump();
    });
  }

  /**
   * The write of `t` ended: a success grows the window, a signal shrinks it (once per round) and may pause new writes.
   */
  release(t: Ticket, end: WriteEnd): void {
    this.#inFlight--;
    if (end.kind === 'ok') {
      // Additive increase: one more write in flight per window's worth of successes.
      if (this.#limit < this.max) this.#limit = Math.min(this.max, this.#limit + 1 / Math.floor(this.#limit));
    } else if (end.kind === 'signal') {
      this.signal(t, end.retryAfterMs);
    }
    this.#pump();
  }

  /** A back-pressure signal from a write of round `t.round`: halve once per round, and honour Retry-After (capped). */
  signal(t: Ticket, retryAfterMs?: number): void {
    if (t.round === this.#round) {
      this.#limit = Math.max(this.min, Math.floor(this.#limit / 2));
      this.#lowest = Math.min(this.#lowest, this.size);
      this.#round++;
    }
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      this.#pausedUntil = Math.max(this.#pausedUntil, this.#now() + Math.min(retryAfterMs, this.retryAfterCapMs));
    }
  }

  /** Takes a waiting write out of the queue (its deadline passed or its signal aborted). */
  #drop(w: Waiter): void {
    w.place?.remove();
    this.#forget(w);
  }

  /** A write that waits no more: its signal's subscription and the deadline timer let go when nobody needs them. */
  #forget(w: Waiter): void {
    if (!this.#waiting.delete(w)) return;
    const s = w.signal && this.#signals.get(w.signal);
    if (s && --s.waiters === 0) {
      this.#signals.delete(w.signal!);
      s.unsubscribe();
    }
    if (this.#waiting.size === 0) this.#disarmDeadline();
  }

  #watch(signal: AbortSignal): void {
    let s = this.#signals.get(signal);
    if (!s) {
      s = { waiters: 0, unsubscribe: noop };
      this.#signals.set(signal, s);
      s.unsubscribe = onAbortOf(signal, () => this.#aborted(signal));
    }
    s.waiters++;
  }

  /** The signal of some waiting writes aborted: each of them is cancelled, in arrival order. */
  #aborted(signal: AbortSignal): void {
    for (const w of [...this.#waiting]) {
      if (w.signal !== signal) continue;
      this.#drop(w);
      w.reject(new CanceledError('cancelled by the caller', { cause: signal.reason }));
    }
    this.#pump();
  }

  #armDeadline(at: number): void {
    this.#disarmDeadline();
    this.#deadlineAt = at;
    this.#deadlineTimer = setTimeout(() => this.#deadlinePassed(at), Math.max(0, at - this.#now()));
  }

  #disarmDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
    this.#deadlineAt = Infinity;
  }

  /** The deadline `at` passed: the writes waiting with it (or an earlier one) fail; the timer then serves the next. */
  #deadlinePassed(at: number): void {
    this.#deadlineTimer = undefined;
    this.#deadlineAt = Infinity;
    let next = Infinity;
    for (const w of [...this.#waiting]) {
      if (w.deadline <= at) {
        this.#drop(w);
        w.reject(w.onTimeout());
      } else if (w.deadline < next) next = w.deadline;
    }
    if (Number.isFinite(next) && next < this.#deadlineAt) this.#armDeadline(next);
    this.#pump();
  }

  #canStart(): boolean {
    return this.#inFlight < this.size && this.#now() >= this.#pausedUntil;
  }

  #start(): Ticket {
    this.#inFlight++;
    return { round: this.#round };
  }

  #pump(): void {
    while (this.#queue.size > 0 && this.#canStart()) {
      const w = this.#queue.shift()!;
      this.#forget(w);
      w.resolve(this.#start());
    }
    // Held by a pause only: wake up when it passes (one timer for the whole queue).
    if (this.#queue.size > 0 && this.#inFlight < this.size && this.#timer === undefined) {
      this.#timer = setTimeout(
        () => {
          this.#timer = undefined;
          this.#pump();
        },
        Math.max(1, this.#pausedUntil - this.#now()),
      );
      this.#timer.unref?.();
    }
  }
}

function noop(): void {}
