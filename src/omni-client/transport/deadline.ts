// Per-call deadlines and cancellation: the caller's signal, the deadline, and the client's close().
//
// Unary calls and Lists with the same caller's signal and a deadline in the same slot share one
// AbortController and one timer instead of one per call. Per-call controllers and timers live across
// the round trip, survive young-generation collections and are promoted to the old space as garbage
// (bench: about a third of what a call promoted), which is what grew the heap. A slot is
// timeoutMs/16 wide, at most 1 s: a deadline fires up to that late.
//
// A stream (a List, a Watch's opening) has a slot of its own and an idle deadline instead: it fails
// for time only when nothing has arrived for `idleMs`, or once it has taken longer than `idleMs` plus
// one second per `minBytesPerSecond` bytes it has read (a stream slower than that on average), so a
// slow stream that keeps delivering is never cut (docs/design.md rule 12: every loop a time limit).
// A Watch's deadline is stopped once its first message arrived: an open watch may be quiet for hours.
// An idle timer that fires looks again after one turn of the event loop before it fails the stream, so
// that a process too busy to read (long enough for the timer to expire) does not take its own delay
// for the server's silence.

import { setMaxListeners } from 'node:events';
import { onAbort } from './abort.js';
import { errCtx, where, type CallContext } from './call.js';
import { CanceledError, DeadlineExceededError, type ApiError } from '../../omni-api/errors.js';
import { StreamStalledError } from '../errors.js';
import type { MethodName } from '../../omni-api/wire.js';

/** One call's cancellation: the caller's signal, the deadline, and close(). */
export interface Scope {
  signal: AbortSignal;
  closeAbort(): void;
  stopTimer(): void;
  dispose(): void;
  /** The error to throw once `signal` has aborted: why it aborted decides which. */
  abortError(): ApiError;
}

/** A stream's scope: told of every chunk it reads, which restarts its idle deadline. */
export interface StreamScope extends Scope {
  progress(bytes: number): void;
}

/** How long a stream may be quiet, and how slow it may be on average. */
export interface StreamLimits {
  idleMs: number;
  minBytesPerSecond: number;
}

/** Calls that share one slot at most. */
const SLOT_SHARING = 8;

type Why = 'caller' | 'timeout' | 'idle' | 'slow' | 'closed';
type Slots = Map<AbortSignal | undefined, Map<number, DeadlineSlot>>;

interface Cancellable {
  closeAbort(): void;
}

class DeadlineSlot implements Cancellable {
  readonly ac = new AbortController();
  why: Why | undefined;
  /** A stream's limits and progress (`Deadlines.stream`). */
  stall: StallState | undefined;
  refs = 0;
  timer: NodeJS.Timeout | undefined;
  unsubscribe: (() => void) | undefined;
  callerSignal: AbortSignal | undefined;
  /** `owner` undefined: a slot of one call's own (a Watch), never shared and never looked up. */
  constructor(
    readonly owner: Slots | undefined,
    readonly key: number,
  ) {
    // Every call of the slot passes this signal to undici, which listens on it while the call lasts.
    setMaxListeners(0, this.ac.signal);
  }

  abort(why: Why, reason: unknown): void {
    this.why ??= why;
    this.detach();
    this.ac.abort(reason);
  }

  closeAbort(): void {
    this.abort('closed', new Error('client closed'));
  }

  /** Forgets the slot: calls made from now on get a fresh one. */
  detach(): void {
    clearTimeout(this.timer);
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    const slots = this.owner?.get(this.callerSignal);
    if (slots?.get(this.key) === this) {
      slots.delete(this.key);
      if (slots.size === 0) this.owner?.delete(this.callerSignal);
    }
  }
}

/** One call's view of a DeadlineSlot (methods on the prototype: no closures per call). */
class SlotScope implements Scope {
  constructor(
    readonly slot: DeadlineSlot,
    readonly method: MethodName,
    readonly ctx: CallContext,
    readonly timeoutMs: number,
    readonly inflight: Set<Cancellable>,
  ) {}

  get signal(): AbortSignal {
    return this.slot.ac.signal;
  }

  closeAbort(): void {
    this.slot.closeAbort();
  }

  stopTimer(): void {
    // A shared slot's timer serves other calls too; only openStream stops one, on a slot of its own.
    if (this.slot.owner) return;
    clearTimeout(this.slot.timer);
    this.slot.timer = undefined;
  }

  dispose(): void {
    const slot = this.slot;
    if (--slot.refs > 0) return;
    slot.detach();
    this.inflight.delete(slot);
  }

  abortError(): ApiError {
    const c = errCtx(this.method, this.ctx);
    const why = this.slot.why;
    if (why === 'timeout')
      return new DeadlineExceededError(`no answer within ${this.timeoutMs} ms (client deadline)`, c);
    if (why === 'idle' || why === 'slow') return stalled(this.method, this.ctx, this.slot.stall, why);
    if (why === 'caller' || why === undefined)
      return new CanceledError('cancelled by the caller', { ...c, cause: this.ctx.signal?.reason });
    return new CanceledError('the client was closed', c);
  }
}

interface StallState extends StreamLimits {
  startedAt: number;
  bytes: number;
}

/** One stream's view of its own slot: every chunk restarts the idle timer and is checked against the pace. */
class StreamSlotScope extends SlotScope implements StreamScope {
  progress(bytes: number): void {
    const slot = this.slot;
    const st = slot.stall;
    // A Watch past its opening: no deadline any more.
    if (!st || slot.timer === undefined) return;
    st.bytes += bytes;
    if (slot.ac.signal.aborted) return;
    const elapsed = performance.now() - st.startedAt;
    if (elapsed > st.idleMs + (st.bytes * 1000) / st.minBytesPerSecond) {
      slot.abort('slow', new Error('stream too slow'));
      return;
    }
    slot.timer?.refresh();
  }
}

/**
 * The idle timer fired: the stream fails only if nothing has arrived after one more turn of the event
 * loop. A loop that was busy for longer than the idle deadline runs its expired timers before it reads
 * its sockets: bytes that arrived meanwhile are read first (progress() then restarts the timer).
 */
function idleOnSecondLook(slot: DeadlineSlot): void {
  const seen = slot.stall?.bytes;
  setImmediate(() => {
    // Stopped meanwhile (a Watch whose first message came) or already over: nothing to fail.
    if (slot.timer === undefined || slot.ac.signal.aborted) return;
    if (slot.stall?.bytes === seen) slot.abort('idle', new Error('stream idle'));
  });
}

function stalled(method: MethodName, ctx: CallContext, st: StallState | undefined, why: 'idle' | 'slow'): ApiError {
  const read = `after ${st?.bytes ?? 0} bytes in ${Math.round(performance.now() - (st?.startedAt ?? 0))} ms`;
  const text =
    why === 'idle'
      ? `nothing received for ${st?.idleMs ?? 0} ms, ${read} (stream idle deadline)`
      : `slower than ${st?.minBytesPerSecond ?? 0} bytes/s on average, ${read} (stream pace limit)`;
  return new StreamStalledError(`${where(method, ctx)}: ${text}`, errCtx(method, ctx));
}

/** The deadlines of one transport, and every call's cancellation on close(). */
export class Deadlines {
  #slots: Slots = new Map();
  #inflight = new Set<Cancellable>();
  #closed = false;

  /** `defaultTimeoutMs`: the deadline of a call that names none (0 = none). */
  constructor(readonly defaultTimeoutMs: number) {}

  /** A scope on the shared slot of this caller's signal and deadline (unary calls, Lists). */
  shared(method: MethodName, ctx: CallContext): Scope {
    const timeoutMs = ctx.timeoutMs ?? this.defaultTimeoutMs;
    const now = Date.now();
    const width = Math.min(1000, Math.max(1, Math.floor(timeoutMs / 16)));
    const key = timeoutMs > 0 ? Math.ceil((now + timeoutMs) / width) * width : Infinity;
    const callerSignal = ctx.signal;
    let slots = this.#slots.get(callerSignal);
    let slot = slots?.get(key);
    // A full slot is replaced for new calls (it lives on for its own): undici adds an abort listener
    // per call, and Node's EventTarget checks every listener already there on each add.
    if (!slot || slot.ac.signal.aborted || slot.refs >= SLOT_SHARING) {
      if (!slots) {
        slots = new Map();
        this.#slots.set(callerSignal, slots);
      }
      slot = this.#newSlot(this.#slots, key, timeoutMs > 0 ? key - now : undefined, callerSignal);
      slots.set(key, slot);
    }
    slot.refs++;
    return new SlotScope(slot, method, ctx, timeoutMs, this.#inflight);
  }

  /**
   * A stream's scope (a List, a Watch's opening): an idle deadline that every line restarts, and a pace
   * limit (see the file's header). `ctx.timeoutMs`, when given, is the idle deadline.
   */
  stream(method: MethodName, ctx: CallContext, limits: StreamLimits): StreamScope {
    const idleMs = ctx.timeoutMs ?? limits.idleMs;
    const slot = new DeadlineSlot(undefined, 0);
    slot.callerSignal = ctx.signal;
    slot.stall = { ...limits, idleMs, startedAt: performance.now(), bytes: 0 };
    this.#inflight.add(slot);
    if (idleMs > 0) slot.timer = setTimeout(() => idleOnSecondLook(slot), idleMs);
    if (ctx.signal) slot.unsubscribe = onAbort(ctx.signal, () => slot.abort('caller', ctx.signal!.reason));
    if (this.#closed) slot.closeAbort();
    slot.refs = 1;
    return new StreamSlotScope(slot, method, ctx, idleMs, this.#inflight);
  }

  /** Cancels every call in flight; calls made afterwards are cancelled at once. */
  closeAll(): void {
    this.#closed = true;
    for (const scope of this.#inflight) scope.closeAbort();
  }

  #newSlot(
    owner: Slots | undefined,
    key: number,
    deadlineInMs: number | undefined,
    callerSignal: AbortSignal | undefined,
  ): DeadlineSlot {
    const s = new DeadlineSlot(owner, key);
    s.callerSignal = callerSignal;
    this.#inflight.add(s);
    if (deadlineInMs !== undefined) s.timer = setTimeout(() => s.abort('timeout', new Error('timeout')), deadlineInMs);
    if (callerSignal) s.unsubscribe = onAbort(callerSignal, () => s.abort('caller', callerSignal.reason));
    if (this.#closed) s.closeAbort();
    return s;
  }
}
