// src/omni-client/write: the path every Create, Update and Destroy takes under the back-pressure
// decorator (this file): the adaptive window of writes in flight (window.ts), what a failed write is
// and what its read-back says (verdict.ts), and the hook that sees each write and its outcome
// (observer.ts).
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
//   - Bounded: a count of sends and a time per write; then STUB_THROTTLED names the resource.
//
// The transport sends no write twice by itself (retry.ts); this is the one place that does.

import type { Logger } from 'pino';
import { silentLogger } from '../../log.js';
import { escapeControl } from '../../omni-api/untrusted.js';
import { AlreadyExistsError, CanceledError, ApiError, FailedPreconditionError } from '../../omni-api/errors.js';
import { ThrottledError } from '../errors.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { describePointer, pointerOf } from '../../omni-api/resource.js';
import { defaultDelay, jitteredBackoff, type BackoffOptions, type DelayFn } from '../transport/retry.js';
import type { CallOptions, CoreState, OwnerOptions, UpdateOptions } from '../../omni-api/state.js';
import { DelegatingCore } from '../wrap.js';
import { getIfExists } from '../read.js';
import { WriteWindow } from './window.js';
import { classifyWriteFailure, createVerdict, destroyVerdict, updateVerdict, type WriteFailure } from './verdict.js';

// --- the decorator -------------------------------------------------------------------------------

export interface BackPressureOptions {
  /** The most writes in flight: the run's --concurrency. */
  maxWritesInFlight: number;
  /** The fewest. Default 1. */
  minWritesInFlight?: number;
  /** Sends of one write after its first, at most. Default 10. */
  retries?: number;
  /**
   * How long one write may be retried after its first failure, waits included (ms): the run's
   * --step-timeout (or what --timeout leaves). Default 60 s.
   */
  maxWaitMs?: number;
  /**
   * How long a write may wait for its first place in the window (ms); the caller's signal ends it sooner. Default 10
   * min.
   */
  queueWaitMs?: number;
  /** The longest Retry-After honoured per wait. Default RETRY_AFTER_CAP_MS (60 s). */
  retryAfterCapMs?: number;
  /** Backoff before a write is sent again (the window's pause covers a Retry-After). Default 100 ms .. 5 s. */
  backoff?: BackoffOptions;
  now?: () => number;
  delay?: DelayFn;
  random?: () => number;
  logger?: Logger;
}

/** How much a run was throttled (the report's `throttling`). */
export interface ThrottlingStats {
  /** Back-pressure answers to writes (DeadlineExceeded, ResourceExhausted, Unavailable, 429, 502-504). */
  signals: number;
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

/** A CoreState decorator: the same calls, with the writes under back-pressure control. */
export interface BackPressureState extends CoreState {
  throttling(): ThrottlingStats;
}

export function withBackPressure(core: CoreState, opts: BackPressureOptions): BackPressureState {
  return new PressuredState(core, opts);
}

interface WriteCall {
  method: 'Create' | 'Update' | 'Destroy';
  resource: Pointer;
  opts: CallOptions;
}

type Reread<T> = { applied: T } | 'resend';

class PressuredState extends DelegatingCore implements BackPressureState {
  readonly #window: WriteWindow;
  readonly #retries: number;
  readonly #maxWaitMs: number;
  readonly #queueWaitMs: number;
  readonly #backoff: BackoffOptions;
  readonly #now: () => number;
  readonly #delay: DelayFn;
  readonly #random: () => number;
  readonly #log: Logger;
  #stats = {
    signals: 0,
    lostAnswers: 0,
    retriedWrites: 0,
    foundApplied: 0,
    gaveUp: 0,
    firstSignalAt: undefined as number | undefined,
    lastSignalAt: undefined as number | undefined,
  };
  /** Writes held back now, and since when at least one has been; the total so far. */
  #held = 0;
  #heldSince = 0;
  #waitedMs = 0;

  constructor(core: CoreState, o: BackPressureOptions) {
    super(core);
    this.#now = o.now ?? Date.now;
    this.#window = new WriteWindow({
      max: o.maxWritesInFlight,
      ...(o.minWritesInFlight !== undefined ? { min: o.minWritesInFlight } : {}),
      ...(o.retryAfterCapMs !== undefined ? { retryAfterCapMs: o.retryAfterCapMs } : {}),
      now: this.#now,
    });
    this.#retries = o.retries ?? 10;
    this.#maxWaitMs = o.maxWaitMs ?? 60_000;
    this.#queueWaitMs = o.queueWaitMs ?? 600_000;
    this.#backoff = o.backoff ?? { baseMs: 100, capMs: 5_000 };
    this.#delay = o.delay ?? defaultDelay;
    this.#random = o.random ?? Math.random;
    this.#log = o.logger ?? silentLogger();
  }

  throttling(): ThrottlingStats {
    const s = this.#stats;
    return {
      signals: s.signals,
      lostAnswers: s.lostAnswers,
      waitedMs: Math.round(this.#waitedMs + (this.#held > 0 ? this.#now() - this.#heldSince : 0)),
      writesInFlight: this.#window.size,
      minWritesInFlight: this.#window.lowest,
      maxWritesInFlight: this.#window.max,
      retriedWrites: s.retriedWrites,
      foundApplied: s.foundApplied,
      gaveUp: s.gaveUp,
      ...(s.firstSignalAt !== undefined ? { firstSignalAt: s.firstSignalAt } : {}),
      ...(s.lastSignalAt !== undefined ? { lastSignalAt: s.lastSignalAt } : {}),
    };
  }

  override create(r: Resource, opts: OwnerOptions = {}): Promise<Resource> {
    const ptr = pointerOf(r);
    const owner = opts.owner ?? r.metadata.owner;
    return this.#write(
      { method: 'Create', resource: ptr, opts },
      () => this.core.create(r, opts),
      async () => {
        const cur = await getIfExists(this.core, ptr, readOpts(opts));
        switch (createVerdict(r, owner, cur)) {
          case 'applied':
            return { applied: cur! };
          case 'not-applied':
            return 'resend';
          case 'changed':
            throw new AlreadyExistsError(
              `${describePointer(ptr)} exists with other content than this Create sent, whose outcome was unknown`,
              { method: '/cosi.resource.State/Create', resource: ptr },
            );
        }
      },
    );
  }

  override update(r: Resource, opts: UpdateOptions = {}): Promise<Resource> {
    const ptr = pointerOf(r);
    return this.#write(
      { method: 'Update', resource: ptr, opts },
      () => this.core.update(r, opts),
      async () => {
        // NotFound (a Get by this ID) is thrown as the Update's: the caller's rule 4 decides.
        const cur = await this.core.get(ptr, readOpts(opts));
        switch (updateVerdict(r, cur)) {
          case 'applied':
            return { applied: cur };
          case 'not-applied':
            return 'resend';
          case 'changed':
            throw changed('Update', ptr, r.metadata.version, cur);
        }
      },
    );
  }

  override destroy(p: Pointer, opts: OwnerOptions = {}): Promise<void> {
    const ptr = pointerOf(p);
    return this.#write(
      { method: 'Destroy', resource: ptr, opts },
      () => this.core.destroy(p, opts),
      async () => {
        const cur = await getIfExists(this.core, ptr, readOpts(opts));
        switch (destroyVerdict(opts.before, cur)) {
          case 'applied':
            return { applied: undefined };
          case 'not-applied':
            return 'resend';
          case 'changed':
            throw changed('Destroy', ptr, opts.before?.metadata.version ?? '', cur!);
        }
      },
    );
  }

  /**
   * One write: sent within the window; on a signal or a lost answer read back, and sent again only if it did not take
   * effect. Bounded.
   */
  async #write<T>(w: WriteCall, send: () => Promise<T>, reread: () => Promise<Reread<T>>): Promise<T> {
    const signal = w.opts.signal;
    let deadline = this.#now() + this.#queueWaitMs;
    let sends = 0;
    let signals = 0;
    let lost = 0;
    let firstFailureAt: number | undefined;
    let last: unknown;
    const giveUp = (why: string): ThrottledError => {
      this.#stats.gaveUp++;
      const spent =
        firstFailureAt !== undefined ? ` within ${((this.#now() - firstFailureAt) / 1000).toFixed(1)} s` : '';
      const history = [
        signals ? `${signals} back-pressure answer${signals > 1 ? 's' : ''}` : '',
        lost ? `${lost} lost answer${lost > 1 ? 's' : ''}` : '',
      ]
        .filter(Boolean)
        .join(' and ');
      const afterHistory = history ? ` after ${history}${spent}` : '';
      const lastMessage = last instanceof Error ? ` (last: ${last.message})` : '';
      return new ThrottledError(
        `${w.method} ${escapeControl(describePointer(w.resource))}: throttled by Omni: ` +
          `${why}${afterHistory}${lastMessage}; ` +
          'nothing more was sent. Run again later (a run reads it again and carries on), or with a lower --concurrency',
        {
          resource: w.resource,
          method: `/cosi.resource.State/${w.method}`,
          ...(last !== undefined ? { cause: last } : {}),
        },
      );
    };
    for (;;) {
      // Room now and nobody waiting (every write of an unthrottled run): no promise, no timer.
      const ticket =
        this.#window.tryAcquire(signal) ??
        (await this.#holding(
          () =>
            this.#window.acquire(signal, deadline, () =>
              giveUp(
                sends === 0
                  ? `no room to send it for ${Math.round(this.#queueWaitMs / 1000)} s`
                  : 'its time ran out waiting for room to send it again',
              ),
            ),
          this.#window.wouldWait(),
        ));
      let failure: WriteFailure;
      try {
        sends++;
        const v = await send();
        this.#window.release(ticket, { kind: 'ok' });
        return v;
      } catch (e) {
        failure = classifyWriteFailure(e, signal);
        const retryAfterMs = e instanceof ApiError ? e.retryAfterMs : undefined;
        this.#window.release(ticket, failure === 'pressure' ? { kind: 'signal', retryAfterMs } : { kind: 'other' });
        if (failure === 'final') throw e;
        last = e;
      }
      if (firstFailureAt === undefined) {
        firstFailureAt = this.#now();
        deadline = firstFailureAt + this.#maxWaitMs;
      }
      if (failure === 'pressure') {
        signals++;
        this.#stats.signals++;
        this.#stats.firstSignalAt ??= Date.now();
        this.#stats.lastSignalAt = Date.now();
      } else {
        lost++;
        this.#stats.lostAnswers++;
      }
      this.#log.debug(
        {
          method: w.method,
          resource: describePointer(w.resource),
          failure,
          writesInFlight: this.#window.size,
          err: (last as Error).message,
        },
        'write of unknown outcome; reading it back before anything is sent again',
      );
      // The outcome is unknown: read it back first. A refusal found here (a conflict, NotFound) is the caller's.
      const r = await reread();
      if (r !== 'resend') {
        this.#stats.foundApplied++;
        this.#log.info(
          { method: w.method, resource: describePointer(w.resource) },
          'a write whose answer was lost had taken effect; not sending it again',
        );
        return r.applied;
      }
      if (sends > this.#retries) throw giveUp(`sent ${sends} times without an answer that says it took effect`);
      const pause = jitteredBackoff(sends - 1, this.#backoff, this.#random);
      if (this.#now() + pause >= deadline)
        throw giveUp(`out of time (${Math.round(this.#maxWaitMs / 1000)} s for its retries)`);
      await this.#holding(async () => {
        try {
          await this.#delay(pause, signal);
        } catch {
          throw new CanceledError('cancelled by the caller', { cause: signal?.reason, resource: w.resource });
        }
      }, true);
      this.#stats.retriedWrites++;
    }
  }

  /** Runs `fn`, counting the time as waited when `held` (some write is held back meanwhile). */
  async #holding<T>(fn: () => Promise<T>, held: boolean): Promise<T> {
    if (!held) return fn();
    if (this.#held++ === 0) this.#heldSince = this.#now();
    try {
      return await fn();
    } finally {
      if (--this.#held === 0) this.#waitedMs += this.#now() - this.#heldSince;
    }
  }
}

function readOpts(opts: CallOptions): CallOptions {
  return {
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  };
}

/**
 * Someone else wrote the resource while our write's outcome was unknown: the caller's conflict path
 * (FailedPrecondition) reads it again.
 */
function changed(
  method: 'Update' | 'Destroy',
  p: Pointer,
  sentVersion: string,
  cur: Resource,
): FailedPreconditionError {
  return new FailedPreconditionError(
    `${describePointer(p)} changed while the outcome of this ${method} was unknown (sent at version ` +
      `${sentVersion || '?'}, now ${cur.metadata.version}): read it again`,
    { method: `/cosi.resource.State/${method}`, resource: p },
  );
}
