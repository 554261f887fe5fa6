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
import { silentLogger } from '../log.js';
import { escapeControl } from '../untrusted.js';
import { AlreadyExistsError, CanceledError, ClientError, FailedPreconditionError, ThrottledError, hasCode } from './errors.js';
import type { Pointer, Resource } from './resource.js';
import { describePointer, pointerOf, versionNumber } from './resource.js';
import { RETRY_AFTER_CAP_MS, defaultDelay, jitteredBackoff, type BackoffOptions, type DelayFn } from './retry.js';
import type { CallOptions, CoreState, OwnerOptions, UpdateOptions } from './types.js';
import { DelegatingCore } from './wrap.js';

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

interface Waiter {
  resolve(t: Ticket): void;
  reject(e: unknown): void;
  cleanup(): void;
}

/** What WriteWindow.release is told about the write that ends. */
export type WriteEnd = { kind: 'ok' } | { kind: 'signal'; retryAfterMs?: number | undefined } | { kind: 'other' };

/**
 * AIMD over writes in flight. FIFO: a write that waits is started before any that comes later. Every
 * wait ends: at the caller's signal, at its deadline, or when a write ends or a pause passes.
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
  #queue: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;
  #lowest: number;

  constructor(o: WindowOptions) {
    if (!(Number.isInteger(o.max) && o.max >= 1)) throw new RangeError(`the most writes in flight must be a whole number of at least 1 (got ${o.max})`);
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
    return this.#queue.length > 0 || !this.#canStart();
  }

  /** Until when new writes are held (a Retry-After), in the clock of `now`. */
  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /** A place for one write: at once when there is room, else in turn. Rejects at `deadline` (ms, `now`'s clock) or when `signal` aborts. */
  acquire(signal?: AbortSignal, deadline = Infinity, onTimeout: () => unknown = () => new Error('no room for the write in time')): Promise<Ticket> {
    if (signal?.aborted) return Promise.reject(new CanceledError('cancelled by the caller', { cause: signal.reason }));
    if (this.#queue.length === 0 && this.#canStart()) return Promise.resolve(this.#start());
    return new Promise<Ticket>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        drop();
        reject(new CanceledError('cancelled by the caller', { cause: signal?.reason }));
      };
      const w: Waiter = {
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      const drop = (): void => {
        w.cleanup();
        const i = this.#queue.indexOf(w);
        if (i >= 0) this.#queue.splice(i, 1);
        this.#pump();
      };
      if (Number.isFinite(deadline)) {
        timer = setTimeout(() => {
          drop();
          reject(onTimeout());
        }, Math.max(0, deadline - this.#now()));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(w);
      this.#pump();
    });
  }

  /** The write of `t` ended: a success grows the window, a signal shrinks it (once per round) and may pause new writes. */
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

  #canStart(): boolean {
    return this.#inFlight < this.size && this.#now() >= this.#pausedUntil;
  }

  #start(): Ticket {
    this.#inFlight++;
    return { round: this.#round };
  }

  #pump(): void {
    while (this.#queue.length > 0 && this.#canStart()) {
      const w = this.#queue.shift()!;
      w.cleanup();
      w.resolve(this.#start());
    }
    // Held by a pause only: wake up when it passes (one timer for the whole queue).
    if (this.#queue.length > 0 && this.#inFlight < this.size && this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#pump();
      }, Math.max(1, this.#pausedUntil - this.#now()));
      this.#timer.unref?.();
    }
  }
}

// --- what a failure of a write is, and what a re-read shows --------------------------------------

/**
 * `pressure`: a back-pressure answer (DeadlineExceeded, ResourceExhausted, Unavailable, an HTTP 429,
 * 502, 503 or 504 of a proxy) or the client's own deadline: write more slowly, and read it back.
 * `lost`: the exchange broke after the write may have been sent: read it back. `final`: anything
 * else (a refusal, a malformed answer, a cancellation): the caller's, as today.
 */
export type WriteFailure = 'pressure' | 'lost' | 'final';

const PRESSURE_CODES = new Set(['OMNI_DEADLINE_EXCEEDED', 'OMNI_RESOURCE_EXHAUSTED', 'OMNI_UNAVAILABLE']);

export function classifyWriteFailure(e: unknown, signal?: AbortSignal): WriteFailure {
  if (!(e instanceof ClientError) || signal?.aborted) return 'final';
  if (PRESSURE_CODES.has(e.code)) return 'pressure';
  if (hasCode(e, 'STUB_TRANSPORT')) {
    if (e.httpStatus !== undefined) return 'pressure';
    return e.retriable ? 'lost' : 'final';
  }
  return 'final';
}

/**
 * What a Get after a write of unknown outcome shows. `applied`: it took effect (do not send it again);
 * `not-applied`: the resource is as before (send it again); `changed`: someone else wrote it meanwhile
 * (neither: the caller's conflict path reads it again and re-plans).
 */
export type Verdict = 'applied' | 'not-applied' | 'changed';

/** Same labels, annotations, owner and spec bytes: what a write of `sent` leaves, but for version and timestamps. */
function sameContent(a: Resource, b: Resource): boolean {
  const ma = a.metadata;
  const mb = b.metadata;
  return ma.owner === mb.owner && sameRecord(ma.labels, mb.labels) && sameRecord(ma.annotations, mb.annotations) && sameBytes(a.spec.protoSpec, b.spec.protoSpec);
}

/**
 * A version-guarded Update of `sent` (carrying the version it read, v): applied when the resource is
 * at v+1 with our content (phase and finalizers included); not applied when it is still at v;
 * anything else was written by someone else.
 */
export function updateVerdict(sent: Resource, current: Resource): Verdict {
  const v = versionNumber(sent.metadata.version);
  const cv = versionNumber(current.metadata.version);
  if (cv === v) return 'not-applied';
  const s = sent.metadata;
  const c = current.metadata;
  if (cv === v + 1n && c.phase === s.phase && sameList(c.finalizers, s.finalizers) && sameContent(sent, current)) return 'applied';
  return 'changed';
}

/**
 * A Destroy of what the caller read (`before`, when it said): a Get answering NotFound shows it
 * applied (positive evidence: a Get by that ID, never an absence from a List); found at the version
 * read (or with nothing read to compare), not applied; at another version, changed meanwhile.
 */
export function destroyVerdict(before: Resource | undefined, current: Resource | undefined): Verdict {
  if (current === undefined) return 'applied';
  if (before === undefined || before.metadata.version === current.metadata.version) return 'not-applied';
  return 'changed';
}

/**
 * A Create of `sent` as `owner`: NotFound, not applied; found with our owner, labels, annotations and
 * spec bytes, applied (finalizers are not compared: Omni's controllers may have added theirs since);
 * found otherwise, someone else's.
 */
export function createVerdict(sent: Resource, owner: string, current: Resource | undefined): Verdict {
  if (current === undefined) return 'not-applied';
  return current.metadata.owner === owner && sameContent({ ...sent, metadata: { ...sent.metadata, owner } }, current) ? 'applied' : 'changed';
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function sameRecord(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

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
  /** How long a write may wait for its first place in the window (ms); the caller's signal ends it sooner. Default 10 min. */
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
  #stats = { signals: 0, lostAnswers: 0, retriedWrites: 0, foundApplied: 0, gaveUp: 0, firstSignalAt: undefined as number | undefined, lastSignalAt: undefined as number | undefined };
  /** Writes held back now, and since when at least one has been; the total so far. */
  #held = 0;
  #heldSince = 0;
  #waitedMs = 0;

  constructor(core: CoreState, o: BackPressureOptions) {
    super(core);
    this.#now = o.now ?? Date.now;
    this.#window = new WriteWindow({ max: o.maxWritesInFlight, ...(o.minWritesInFlight !== undefined ? { min: o.minWritesInFlight } : {}), ...(o.retryAfterCapMs !== undefined ? { retryAfterCapMs: o.retryAfterCapMs } : {}), now: this.#now });
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
    return this.#write({ method: 'Create', resource: ptr, opts }, () => this.core.create(r, opts), async () => {
      const cur = await this.#getIfExists(ptr, opts);
      switch (createVerdict(r, owner, cur)) {
        case 'applied': return { applied: cur! };
        case 'not-applied': return 'resend';
        case 'changed': throw new AlreadyExistsError(`${describePointer(ptr)} exists with other content than this Create sent, whose outcome was unknown`, { method: '/cosi.resource.State/Create', resource: ptr });
      }
    });
  }

  override update(r: Resource, opts: UpdateOptions = {}): Promise<Resource> {
    const ptr = pointerOf(r);
    return this.#write({ method: 'Update', resource: ptr, opts }, () => this.core.update(r, opts), async () => {
      // NotFound (a Get by this ID) is thrown as the Update's: the caller's rule 4 decides.
      const cur = await this.core.get(ptr, readOpts(opts));
      switch (updateVerdict(r, cur)) {
        case 'applied': return { applied: cur };
        case 'not-applied': return 'resend';
        case 'changed': throw changed('Update', ptr, r.metadata.version, cur);
      }
    });
  }

  override destroy(p: Pointer, opts: OwnerOptions = {}): Promise<void> {
    const ptr = pointerOf(p);
    return this.#write({ method: 'Destroy', resource: ptr, opts }, () => this.core.destroy(p, opts), async () => {
      const cur = await this.#getIfExists(ptr, opts);
      switch (destroyVerdict(opts.before, cur)) {
        case 'applied': return { applied: undefined };
        case 'not-applied': return 'resend';
        case 'changed': throw changed('Destroy', ptr, opts.before?.metadata.version ?? '', cur!);
      }
    });
  }

  async #getIfExists(p: Pointer, opts: CallOptions): Promise<Resource | undefined> {
    try {
      return await this.core.get(p, readOpts(opts));
    } catch (e) {
      if (hasCode(e, 'OMNI_NOT_FOUND')) return undefined;
      throw e;
    }
  }

  /** One write: sent within the window; on a signal or a lost answer read back, and sent again only if it did not take effect. Bounded. */
  async #write<T>(w: WriteCall, send: () => Promise<T>, reread: () => Promise<Reread<T>>): Promise<T> {
    const signal = w.opts.signal;
    const what = `${w.method} ${escapeControl(describePointer(w.resource))}`;
    let deadline = this.#now() + this.#queueWaitMs;
    let sends = 0;
    let signals = 0;
    let lost = 0;
    let firstFailureAt: number | undefined;
    let last: unknown;
    const giveUp = (why: string): ThrottledError => {
      this.#stats.gaveUp++;
      const spent = firstFailureAt !== undefined ? ` within ${((this.#now() - firstFailureAt) / 1000).toFixed(1)} s` : '';
      const history = [signals ? `${signals} back-pressure answer${signals > 1 ? 's' : ''}` : '', lost ? `${lost} lost answer${lost > 1 ? 's' : ''}` : ''].filter(Boolean).join(' and ');
      return new ThrottledError(
        `${what}: throttled by Omni: ${why}${history ? ` after ${history}${spent}` : ''}${last instanceof Error ? ` (last: ${last.message})` : ''}; ` +
          'nothing more was sent. Run again later (a run reads it again and carries on), or with a lower --concurrency',
        { resource: w.resource, method: `/cosi.resource.State/${w.method}`, ...(last !== undefined ? { cause: last } : {}) },
      );
    };
    for (;;) {
      const ticket = await this.#holding(() => this.#window.acquire(signal, deadline, () => giveUp(sends === 0 ? `no room to send it for ${Math.round(this.#queueWaitMs / 1000)} s` : 'its time ran out waiting for room to send it again')), this.#window.wouldWait());
      let failure: WriteFailure;
      try {
        sends++;
        const v = await send();
        this.#window.release(ticket, { kind: 'ok' });
        return v;
      } catch (e) {
        failure = classifyWriteFailure(e, signal);
        const retryAfterMs = e instanceof ClientError ? e.retryAfterMs : undefined;
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
      this.#log.debug({ method: w.method, resource: describePointer(w.resource), failure, writesInFlight: this.#window.size, err: (last as Error).message }, 'write of unknown outcome; reading it back before anything is sent again');
      // The outcome is unknown: read it back first. A refusal found here (a conflict, NotFound) is the caller's.
      const r = await reread();
      if (r !== 'resend') {
        this.#stats.foundApplied++;
        this.#log.info({ method: w.method, resource: describePointer(w.resource) }, 'a write whose answer was lost had taken effect; not sending it again');
        return r.applied;
      }
      if (sends > this.#retries) throw giveUp(`sent ${sends} times without an answer that says it took effect`);
      const pause = jitteredBackoff(sends - 1, this.#backoff, this.#random);
      if (this.#now() + pause >= deadline) throw giveUp(`out of time (${Math.round(this.#maxWaitMs / 1000)} s for its retries)`);
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
  return { ...(opts.signal ? { signal: opts.signal } : {}), ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}) };
}

/** Someone else wrote the resource while our write's outcome was unknown: the caller's conflict path (FailedPrecondition) reads it again. */
function changed(method: 'Update' | 'Destroy', p: Pointer, sentVersion: string, cur: Resource): FailedPreconditionError {
  return new FailedPreconditionError(
    `${describePointer(p)} changed while the outcome of this ${method} was unknown (sent at version ${sentVersion || '?'}, now ${cur.metadata.version}): read it again`,
    { method: `/cosi.resource.State/${method}`, resource: p },
  );
}
