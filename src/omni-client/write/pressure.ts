// src/omni-client/write: the path every Create, Update and Destroy takes under the back-pressure
// decorator (this file): the adaptive window of writes in flight (window.ts), what a failed write is
// and what its read-back says (verdict.ts), and the hook that sees each write and its outcome
// (observer.ts); its counters (throttling.ts).
//
// Back-pressure is not failure (docs/design.md, "Back-pressure"). Omni 1.9+ meters an infra
// provider's writes to etcd and answers DeadlineExceeded when a write's bytes would not be there in
// time; a proxy in front of Omni answers 429 or 503 with Retry-After; the client's own deadline on a
// write ends with DeadlineExceeded too. Each is a signal to write more slowly, and each leaves the
// outcome of that write unknown (a deadline may fire after Omni applied it), as does a connection
// that broke after the write was sent. So, for every Create, Update and Destroy of any CoreState:
//
//   - WriteWindow bounds the writes in flight, adaptively: halved on a signal (once per round: the
//     writes already in flight when it shrank do not shrink it again), grown by one per window's
//     worth of successes, between `minWritesInFlight` and the run's --concurrency; a Retry-After
//     (capped) holds every new write until it has passed. Reads are never held here.
//   - A write whose outcome is unknown is read back by its ID before anything is sent again
//     (verdicts below): what took effect is never sent twice, what did not is sent again, and what
//     someone else changed meanwhile goes back to the caller's conflict path, which re-plans it.
//   - Bounded: a count of sends and a time per write; then STUB_THROTTLED names the resource. A write
//     larger than Omni's burst (ResourceExhausted) is sent once: STUB_WRITE_TOO_LARGE. A write is
//     not started, nor sent again, after the caller's `notAfter` (STUB_DEADLINE, ending.ts).
//   - Waiting writes take their place by rank (CallOptions.rank), then in arrival order.
//   - The outcome of each send (the audit log's) is what its read-back shows (observer.ts).
//
// The transport sends no write twice by itself (retry.ts); this is the one place that does.

import type { Logger } from 'pino';
import { silentLogger } from '../../log.js';
import { CanceledError, ApiError } from '../../omni-api/errors.js';
import type { DeadlineReachedError, ThrottledError, WriteTooLargeError } from '../errors.js';
import { late, throttled, tooLarge, type Tries, type WriteCall } from './ending.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { describePointer, pointerOf } from '../../omni-api/resource.js';
import {
  RETRY_AFTER_CAP_MS,
  defaultDelay,
  jitteredBackoff,
  type BackoffOptions,
  type DelayFn,
} from '../transport/retry.js';
import { ThrottlingCounts, type ThrottlingStats } from './throttling.js';
import type { CallOptions, CoreState, OwnerOptions, UpdateOptions } from '../../omni-api/state.js';
import { DelegatingCore } from '../wrap.js';
import { WriteWindow, type Ticket, type WriteEnd } from './window.js';
import type { DeferOutcome, DeferringOptions, WriteOutcome } from './observer.js';
import {
  classifyWriteFailure,
  readBackCreate,
  readBackDestroy,
  readBackUpdate,
  type ReadBack,
  type WriteFailure,
} from './verdict.js';

// --- the decorator -------------------------------------------------------------------------------

export interface BackPressureOptions {
  /** The most writes in flight: the run's --concurrency. */
  maxWritesInFlight: number;
  /** The fewest. Default PRESSURE_DEFAULTS. */
  minWritesInFlight?: number;
  /** Sends of one write after its first, at most. Default PRESSURE_DEFAULTS. */
  retries?: number;
  /**
   * How long one write may be retried after its first failure, waits included (ms): the run's
   * --step-timeout (or what --timeout leaves). Default PRESSURE_DEFAULTS.
   */
  maxWaitMs?: number;
  /**
   * How long a write may wait for its first place in the window (ms); the caller's signal ends it sooner. Default
   * PRESSURE_DEFAULTS.
   */
  queueWaitMs?: number;
  /** The longest Retry-After honoured per wait. Default PRESSURE_DEFAULTS. */
  retryAfterCapMs?: number;
  /** Backoff before a write is sent again (the window's pause covers a Retry-After). Default PRESSURE_DEFAULTS. */
  backoff?: BackoffOptions;
  now?: () => number;
  delay?: DelayFn;
  random?: () => number;
  logger?: Logger;
}

/** The write path's bounds, retries and backoff, in one place (docs/architecture.md, "A write, layer by layer"). */
export const PRESSURE_DEFAULTS = {
  minWritesInFlight: 1,
  retries: 10,
  maxWaitMs: 60_000,
  queueWaitMs: 600_000,
  retryAfterCapMs: RETRY_AFTER_CAP_MS,
  backoff: { baseMs: 100, capMs: 5_000 },
} as const satisfies Omit<BackPressureOptions, 'maxWritesInFlight'>;

/** A write's retries, its defaults applied. */
type WriteRetry = Required<Pick<BackPressureOptions, 'retries' | 'maxWaitMs' | 'queueWaitMs' | 'backoff'>>;

/** A CoreState decorator: the same calls, with the writes under back-pressure control. */
export interface BackPressureState extends CoreState {
  throttling(): ThrottlingStats;
}

export function withBackPressure(core: CoreState, opts: BackPressureOptions): BackPressureState {
  return new PressuredState(core, opts);
}

/** How a write ended, for the window: the same two objects for every write. */
const ENDED_OK: WriteEnd = { kind: 'ok' };
const ENDED_OTHER: WriteEnd = { kind: 'other' };

/** Whether a failure leaves the write's outcome to a read-back (and the audit's outcome with it). */
function readBackAfter(f: WriteFailure): f is 'pressure' | 'lost' {
  return f === 'pressure' || f === 'lost';
}

class PressuredState extends DelegatingCore implements BackPressureState {
  readonly #window: WriteWindow;
  readonly #retry: WriteRetry;
  readonly #now: () => number;
  readonly #delay: DelayFn;
  readonly #random: () => number;
  readonly #log: Logger;
  readonly #counts: ThrottlingCounts;

  constructor(core: CoreState, o: BackPressureOptions) {
    super(core);
    this.#now = o.now ?? Date.now;
    this.#window = new WriteWindow({
      max: o.maxWritesInFlight,
      min: o.minWritesInFlight ?? PRESSURE_DEFAULTS.minWritesInFlight,
      retryAfterCapMs: o.retryAfterCapMs ?? PRESSURE_DEFAULTS.retryAfterCapMs,
      now: this.#now,
    });
    this.#retry = {
      retries: o.retries ?? PRESSURE_DEFAULTS.retries,
      maxWaitMs: o.maxWaitMs ?? PRESSURE_DEFAULTS.maxWaitMs,
      queueWaitMs: o.queueWaitMs ?? PRESSURE_DEFAULTS.queueWaitMs,
      backoff: o.backoff ?? PRESSURE_DEFAULTS.backoff,
    };
    this.#delay = o.delay ?? defaultDelay;
    this.#random = o.random ?? Math.random;
    this.#log = o.logger ?? silentLogger();
    this.#counts = new ThrottlingCounts(this.#now);
  }

  throttling(): ThrottlingStats {
    return this.#counts.stats(this.#window);
  }

  override create(r: Resource, opts: OwnerOptions = {}): Promise<Resource> {
    const owner = opts.owner ?? r.metadata.owner;
    return this.#write(
      { method: 'Create', resource: pointerOf(r), opts },
      (o) => this.core.create(r, o),
      () => readBackCreate(this.core, r, owner, opts),
    );
  }

  override update(r: Resource, opts: UpdateOptions = {}): Promise<Resource> {
    return this.#write(
      { method: 'Update', resource: pointerOf(r), opts },
      (o) => this.core.update(r, o),
      () => readBackUpdate(this.core, r, opts),
    );
  }

  override destroy(p: Pointer, opts: OwnerOptions = {}): Promise<void> {
    return this.#write(
      { method: 'Destroy', resource: pointerOf(p), opts },
      (o) => this.core.destroy(p, o),
      () => readBackDestroy(this.core, p, opts),
    );
  }

  /**
   * One write: sent within the window, in its rank's turn; on a signal or a lost answer read back, and sent again only
   * if it did not take effect (the outcome of each send settled by that read-back, observer.ts). Bounded in sends and
   * time, and never started after the caller's `notAfter`.
   */
  async #write<T>(
    w: WriteCall,
    send: (opts: CallOptions & DeferringOptions) => Promise<T>,
    reread: () => Promise<ReadBack<T>>,
  ): Promise<T> {
    const t: Tries = { sends: 0, signals: 0, lost: 0, deadline: this.#now() + this.#retry.queueWaitMs };
    for (;;) {
      const ticket = await this.#place(w, t);
      let settle: ((o: WriteOutcome) => void) | undefined;
      // The outcome of a send that ends in back-pressure or a lost answer is what the read-back below shows.
      const deferOutcome: DeferOutcome = (err, s) => {
        if (!readBackAfter(classifyWriteFailure(err, w.opts.signal))) return false;
        settle = s;
        return true;
      };
      let failure: WriteFailure;
      let err: unknown;
      try {
        t.sends++;
        const v = await send({ ...w.opts, deferOutcome });
        this.#window.release(ticket, ENDED_OK);
        return v;
      } catch (e) {
        err = e;
        failure = classifyWriteFailure(e, w.opts.signal);
        const retryAfterMs = e instanceof ApiError ? e.retryAfterMs : undefined;
        this.#window.release(ticket, failure === 'pressure' ? { kind: 'signal', retryAfterMs } : ENDED_OTHER);
      }
      if (failure === 'final') throw err;
      if (failure === 'permanent') throw this.#tooLarge(w, err);
      this.#failed(w, t, failure, err);
      const r = await this.#readBack(w, reread, settle, err);
      if (r !== 'resend') return r.applied;
      settle?.({ result: failure === 'pressure' ? 'refused' : 'not-applied', error: err });
      await this.#pauseBeforeResend(w, t);
      this.#counts.retriedWrites++;
    }
  }

  /** A place in the window, in the write's rank; not after the caller's `notAfter`. */
  async #place(w: WriteCall, t: Tries): Promise<Ticket> {
    const { signal, notAfter = Infinity, rank = 0 } = w.opts;
    if (this.#now() >= notAfter) throw this.#late(w, t);
    // Room now and nobody waiting: no promise, no timer.
    const now = this.#window.tryAcquire(signal);
    if (now) return now;
    const held = this.#window.wouldWait();
    if (held) this.#counts.hold();
    try {
      return await this.#window.acquire(
        signal,
        Math.min(t.deadline, notAfter),
        () =>
          notAfter <= t.deadline
            ? this.#late(w, t)
            : this.#giveUp(
                w,
                t,
                t.sends === 0
                  ? `no room to send it for ${Math.round(this.#retry.queueWaitMs / 1000)} s`
                  : 'its time ran out waiting for room to send it again',
              ),
        rank,
      );
    } finally {
      if (held) this.#counts.unhold();
    }
  }

  /** A signal or a lost answer: counted, and the write's time for retries starts at its first. */
  #failed(w: WriteCall, t: Tries, failure: 'pressure' | 'lost', err: unknown): void {
    t.last = err;
    if (t.firstFailureAt === undefined) {
      t.firstFailureAt = this.#now();
      t.deadline = t.firstFailureAt + this.#retry.maxWaitMs;
    }
    if (failure === 'pressure') {
      t.signals++;
      this.#counts.signal();
    } else {
      t.lost++;
      this.#counts.lostAnswers++;
    }
    this.#log.debug(
      {
        method: w.method,
        resource: describePointer(w.resource),
        failure,
        writesInFlight: this.#window.size,
        err: (err as Error).message,
      },
      'write of unknown outcome; reading it back before anything is sent again',
    );
  }

  /** The outcome is unknown: read it back first. A refusal found here (a conflict, NotFound) is the caller's. */
  async #readBack<T>(
    w: WriteCall,
    reread: () => Promise<ReadBack<T>>,
    settle: ((o: WriteOutcome) => void) | undefined,
    err: unknown,
  ): Promise<ReadBack<T>> {
    let r: ReadBack<T>;
    try {
      r = await reread();
    } catch (e) {
      settle?.({ result: 'unknown', error: err });
      throw e;
    }
    if (r === 'resend') return r;
    this.#counts.foundApplied++;
    settle?.({ result: 'ok', evidence: 'read-back', error: err, ...(r.after ? { after: r.after } : {}) });
    this.#log.info(
      { method: w.method, resource: describePointer(w.resource) },
      'a write whose answer was lost had taken effect; not sending it again',
    );
    return r;
  }

  /** The pause before a write is sent again; throws when its sends or its time (or the caller's) ran out. */
  async #pauseBeforeResend(w: WriteCall, t: Tries): Promise<void> {
    if (t.sends > this.#retry.retries)
      throw this.#giveUp(w, t, `sent ${t.sends} times without an answer that says it took effect`);
    const pause = jitteredBackoff(t.sends - 1, this.#retry.backoff, this.#random);
    if (this.#now() + pause >= (w.opts.notAfter ?? Infinity)) throw this.#late(w, t);
    if (this.#now() + pause >= t.deadline)
      throw this.#giveUp(w, t, `out of time (${Math.round(this.#retry.maxWaitMs / 1000)} s for its retries)`);
    this.#counts.hold();
    try {
      await this.#delay(pause, w.opts.signal);
    } catch {
      throw new CanceledError('cancelled by the caller', { cause: w.opts.signal?.reason, resource: w.resource });
    } finally {
      this.#counts.unhold();
    }
  }

  #giveUp(w: WriteCall, t: Tries, why: string): ThrottledError {
    this.#counts.gaveUp++;
    return throttled(w, t, why, this.#now());
  }

  #late(w: WriteCall, t: Tries): DeadlineReachedError {
    return late(w, t, this.#now());
  }

  #tooLarge(w: WriteCall, err: unknown): WriteTooLargeError {
    this.#counts.tooLarge++;
    return tooLarge(w, err);
  }
}
