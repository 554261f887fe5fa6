// Per-call deadlines and cancellation: the caller's signal, the deadline, and the client's close().
//
// Unary calls and Lists with the same caller's signal and a deadline in the same slot share one
// AbortController and one timer instead of one per call. Per-call controllers and timers live across
// the round trip, survive young-generation collections and are promoted to the old space as garbage
// (bench: about a third of what a call promoted), which is what grew the heap. A slot is
// timeoutMs/16 wide, at most 1 s: a deadline fires up to that late. A Watch has a slot of its own:
// its deadline covers only its opening, and is stopped once the first message arrived.

import { setMaxListeners } from 'node:events';
import { onAbort } from './abort.js';
import { errCtx, type CallContext } from './call.js';
import { CanceledError, DeadlineExceededError, type OmniError } from '../../omni-api/errors.js';
import type { MethodName } from '../../omni-api/wire.js';

/** One call's cancellation: the caller's signal, the deadline, and close(). */
export interface Scope {
  signal: AbortSignal;
  closeAbort(): void;
  stopTimer(): void;
  dispose(): void;
  /** The error to throw once `signal` has aborted: why it aborted decides which. */
  abortError(): OmniError;
}

/** Calls that share one slot at most. */
const SLOT_SHARING = 8;

type Why = 'caller' | 'timeout' | 'closed';
type Slots = Map<AbortSignal | undefined, Map<number, DeadlineSlot>>;

interface Cancellable {
  closeAbort(): void;
}

class DeadlineSlot implements Cancellable {
  readonly ac = new AbortController();
  why: Why | undefined;
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
    if (!this.slot.owner) clearTimeout(this.slot.timer);
  }

  dispose(): void {
    const slot = this.slot;
    if (--slot.refs > 0) return;
    slot.detach();
    this.inflight.delete(slot);
  }

  abortError(): OmniError {
    const c = errCtx(this.method, this.ctx);
    const why = this.slot.why;
    if (why === 'timeout')
      return new DeadlineExceededError(`no answer within ${this.timeoutMs} ms (client deadline)`, c);
    if (why === 'caller' || why === undefined)
      return new CanceledError('cancelled by the caller', { ...c, cause: this.ctx.signal?.reason });
    return new CanceledError('the client was closed', c);
  }
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

  /** A scope of its own (Watch): its deadline is stopped after the first message, so it is not shared. */
  own(method: MethodName, ctx: CallContext): Scope {
    const timeoutMs = ctx.timeoutMs ?? this.defaultTimeoutMs;
    const slot = this.#newSlot(undefined, 0, timeoutMs > 0 ? timeoutMs : undefined, ctx.signal);
    slot.refs = 1;
    return new SlotScope(slot, method, ctx, timeoutMs, this.#inflight);
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
