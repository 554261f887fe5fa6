// The provider's limiter: a counting semaphore whose waiters take their turn by rank (lowest first),
// then in arrival order (RankQueue: with one rank, plain FIFO). It bounds the plan items under way at
// once (`forItems`) and the wipes at once, whatever the number of machines; waiting for Omni does not
// hold a slot. The calls in flight to Omni are bounded by the client (omni-client/call-limit.ts),
// which takes the same ranks from the calls' options. A run ranks an item by when it first started,
// so that the next step of an item under way goes before the first step of a new one (depth first:
// machines are released at a steady rate under a write budget).

import { RankQueue } from '../../omni-client/rank-queue.js';

export class Limiter {
  private active = 0;
  private readonly queue = new RankQueue<() => void>();

  constructor(
    private current: number,
    /** The widest `grow` makes it (default: its width from the start). */
    readonly max = current,
  ) {
    if (!(current >= 1)) throw new RangeError(`concurrency must be at least 1 (got ${current})`);
  }

  /** The slots there are now. */
  get width(): number {
    return this.current;
  }

  /** One slot more, up to `max`; a waiter takes it at once. */
  grow(): void {
    if (this.current >= this.max) return;
    this.current++;
    const next = this.queue.shift();
    if (next) {
      this.active++;
      next();
    }
  }

  /**
   * A limiter of plan items for `concurrency` calls in flight: enough items to keep every call's place busy,
   * few enough that a step's results are not held through a queue of every machine of the fleet
   * (docs/performance.md, "Changes made for performance"). It starts at one item per call and grows by one
   * per item released (`grow`) up to MIN_ITEMS (or one per call, when more): a run under a write budget it does
   * not know yet spends the budget on the items it started before it starts more (depth first, docs/design.md
   * rule 14). One item per call keeps the calls as busy as two or four did (an item waiting for Omni leaves its
   * place), and its calls never queue for a place: 6-7 % less CPU at 100 000 machines (docs/performance.md,
   * "Issue 27, fourth pass").
   */
  static forItems(concurrency: number): Limiter {
    return new Limiter(concurrency, Math.max(MIN_ITEMS, concurrency));
  }

  /** Runs `fn` in a slot, taken in `rank`'s turn (lowest first; absent: 0). */
  async run<T>(fn: () => Promise<T>, rank = 0): Promise<T> {
    await this.acquire(rank);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  /** Takes a slot, waiting for one in rank order, then in arrival order. */
  async acquire(rank = 0): Promise<void> {
    if (this.active >= this.width) await new Promise<void>((resolve) => this.queue.push(resolve, rank));
    else this.active++;
  }

  /** Gives a slot back: straight to the next waiter, if any. */
  release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.active--;
  }

  /**
   * Runs `fn` without the caller's slot (an item waiting for Omni or a wipe), so that slow or stuck
   * resources never hold back the others; takes a slot again after. A soft bound: a caller without a
   * slot (deregistration) may pass through and briefly add one.
   */
  async outside<T>(fn: () => Promise<T>, rank = 0): Promise<T> {
    this.release();
    try {
      return await fn();
    } finally {
      await this.acquire(rank);
    }
  }

  /**
   * Runs `run` for each item once it has a slot, in order, and resolves when all are done. Items are
   * started one by one instead of all queued at once: at 10 000 machines the queue held 11 000
   * suspended functions for the whole pass, and an item coming back from a wait queued behind every
   * item not yet started.
   */
  async each<T>(items: T[], run: (item: T) => Promise<void>, rankOf: (item: T) => number = () => 0): Promise<void> {
    let failure: { err: unknown } | undefined;
    // Items under way, and this loop: all done once none is left.
    let open = 1;
    let allDone!: () => void;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    const ended = (): void => {
      if (--open === 0) allDone();
    };
    // One async function per item, not a .catch().finally() chain and a Set of promises.
    const one = async (item: T): Promise<void> => {
      try {
        await run(item);
      } catch (err) {
        failure ??= { err };
      } finally {
        this.release();
        ended();
      }
    };
    for (const item of items) {
      await this.acquire(rankOf(item));
      if (failure) {
        // An unexpected error (items catch their own): start nothing more, let the others finish.
        this.release();
        break;
      }
      open++;
      void one(item);
    }
    ended();
    await done;
    if (failure) throw failure.err;
  }
}

const MIN_ITEMS = 64;
