// The one limit on calls in flight to Omni (`--concurrency`): a CoreState decorator between the
// back-pressure layer (write/pressure.ts) and the gateway (gateway-state.ts). Every Get, List,
// Create, Update and Destroy of the client takes a place here before its deadline starts (the
// transport's deadline covers the call, not its wait for a place), and gives it back when it ends;
// a Watch takes none (it holds a connection of its own for as long as it is open: dispatcher.ts).
// The write window's maximum and the calls' connection count are this limit (client.ts), so the
// provider calls the State plainly and nothing above the client counts calls.
//
// Waiting calls start in order of their `rank` (lower first; absent is 0), in turn within a rank.
// A write that had its place in the write window before the caller's `notAfter` (a run's --timeout)
// may still wait here for a call's place: once it has one, it is sent only if `notAfter` has not
// passed meanwhile (docs/design.md, "Deadlines": no write starts after the deadline).

import { CanceledError } from '../omni-api/errors.js';
import { escapeControl } from '../omni-api/untrusted.js';
import { describePointer, pointerOf, type Pointer, type Resource } from '../omni-api/resource.js';
import type { CallOptions, CoreState, OwnerOptions, QueryOptions, UpdateOptions } from '../omni-api/state.js';
import { DeadlineReachedError } from './errors.js';
import { onAbort } from './transport/abort.js';
import { RankQueue } from './rank-queue.js';
import { DelegatingCore } from './wrap.js';

/** The limit's options: one object, its defaults beside it. */
export interface CallLimitOptions {
  /** Calls in flight at most (`--concurrency`). */
  max: number;
}

export const CALL_LIMIT_DEFAULTS: CallLimitOptions = { max: 16 };

/**
 * A counting semaphore whose waiters start by rank, then in turn (rank-queue.ts). Taking a place when
 * there is room and nobody waits costs no promise (every call of an unthrottled run).
 */
export class CallGate {
  readonly max: number;
  #active = 0;
  #queue = new RankQueue<() => void>();

  constructor(max: number) {
    if (!(Number.isInteger(max) && max >= 1))
      throw new RangeError(`the most calls in flight must be a whole number of at least 1 (got ${max})`);
    this.max = max;
  }

  get inFlight(): number {
    return this.#active;
  }

  get waiting(): number {
    return this.#queue.size;
  }

  /** A place now when there is room and nobody waits (then true), else false: `acquire` waits. */
  tryAcquire(): boolean {
    if (this.#active >= this.max || this.#queue.size > 0) return false;
    this.#active++;
    return true;
  }

  /** A place, in order; rejects with CanceledError when `signal` aborts first. */
  acquire(rank = 0, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(cancelled(signal));
    if (this.tryAcquire()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      let unsubscribe: (() => void) | undefined;
      const ticket = this.#queue.push(() => {
        unsubscribe?.();
        resolve();
      }, rank);
      // One listener on the caller's signal however many calls wait (abort.ts).
      if (signal)
        unsubscribe = onAbort(signal, () => {
          ticket.remove();
          reject(cancelled(signal));
        });
    });
  }

  /** Gives a place back: to the first waiter, if any. */
  release(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#active--;
  }

  /** Runs `fn` in a place of its own, given back when its promise settles. */
  run<T>(rank: number | undefined, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    // No async frame of its own: one reaction per call (every call of the client passes here).
    if (this.tryAcquire()) return this.#hold(fn);
    return this.acquire(rank, signal).then(() => this.#hold(fn));
  }

  #release = (): void => this.release();

  #hold<T>(fn: () => Promise<T>): Promise<T> {
    let p: Promise<T>;
    try {
      p = fn();
    } catch (e) {
      this.release();
      return Promise.reject(e);
    }
    p.then(this.#release, this.#release);
    return p;
  }
}

function cancelled(signal: AbortSignal): CanceledError {
  return new CanceledError('cancelled by the caller', { cause: signal.reason });
}

/** The CoreState whose calls (but watches) pass `gate` first; `now`: the clock of `notAfter` (the window's). */
export function withCallLimit(core: CoreState, gate: CallGate, now: () => number = Date.now): CoreState {
  return new LimitedState(core, gate, now);
}

class LimitedState extends DelegatingCore {
  constructor(
    core: CoreState,
    private readonly gate: CallGate,
    private readonly now: () => number,
  ) {
    super(core);
  }

  /** A write in its place: sent only if the caller's time for writes has not passed while it waited. */
  #write<T>(method: string, p: Pointer | Resource, opts: CallOptions | undefined, send: () => Promise<T>): Promise<T> {
    return this.gate.run(opts?.rank, opts?.signal, () => {
      if (opts?.notAfter !== undefined && this.now() >= opts.notAfter)
        return Promise.reject(
          new DeadlineReachedError(
            `${method} ${escapeControl(describePointer(pointerOf(p)))}: not sent: the time for writes (--timeout) ` +
              'passed while it waited for a place among the calls in flight',
            { resource: pointerOf(p), method: `/cosi.resource.State/${method}` },
          ),
        );
      return send();
    });
  }

  override get(p: Pointer, opts?: CallOptions): Promise<Resource> {
    return this.gate.run(opts?.rank, opts?.signal, () => this.core.get(p, opts));
  }

  override list(namespace: string, type: string, opts?: QueryOptions): Promise<Resource[]> {
    return this.gate.run(opts?.rank, opts?.signal, () => this.core.list(namespace, type, opts));
  }

  override create(r: Resource, opts?: OwnerOptions): Promise<Resource> {
    return this.#write('Create', r, opts, () => this.core.create(r, opts));
  }

  override update(r: Resource, opts?: UpdateOptions): Promise<Resource> {
    return this.#write('Update', r, opts, () => this.core.update(r, opts));
  }

  override destroy(p: Pointer, opts?: OwnerOptions): Promise<void> {
    return this.#write('Destroy', p, opts, () => this.core.destroy(p, opts));
  }
}
