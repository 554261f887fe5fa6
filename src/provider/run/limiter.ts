// The provider's limiter: a FIFO counting semaphore. It bounds the plan items under way at once
// (`forItems`) and the wipes at once, whatever the number of machines; waiting for Omni does not hold
// a slot. The calls in flight to Omni are bounded by the client (omni-client/call-limit.ts).

export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  private head = 0;

  constructor(readonly width: number) {
    if (!(width >= 1)) throw new RangeError(`concurrency must be at least 1 (got ${width})`);
  }

  /**
   * A limiter of plan items for `concurrency` calls in flight: enough items to keep every call's place
   * busy, few enough that a step's results are not held through a queue of every machine of the fleet
   * (docs/performance.md, "Changes made for performance").
   */
  static forItems(concurrency: number): Limiter {
    return new Limiter(Math.max(MIN_ITEMS, ITEMS_PER_SLOT * concurrency));
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  /** Takes a slot, waiting in order for one. */
  async acquire(): Promise<void> {
    if (this.active >= this.width) await new Promise<void>((resolve) => this.queue.push(resolve));
    else this.active++;
  }

  /** Gives a slot back: straight to the next waiter, if any. */
  release(): void {
    if (this.head < this.queue.length) {
      const next = this.queue[this.head]!;
      this.queue[this.head++] = noop;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      next();
    } else {
      this.active--;
    }
  }

  /**
   * Runs `fn` without the caller's slot (an item waiting for Omni or a wipe), so that slow or stuck
   * resources never hold back the others; takes a slot again after. A soft bound: a caller without a
   * slot (deregistration) may pass through and briefly add one.
   */
  async outside<T>(fn: () => Promise<T>): Promise<T> {
    this.release();
    try {
      return await fn();
    } finally {
      await this.acquire();
    }
  }

  /**
   * Runs `run` for each item once it has a slot, in order, and resolves when all are done. Items are
   * started one by one instead of all queued at once: at 10 000 machines the queue held 11 000
   * suspended functions for the whole pass, and an item coming back from a wait queued behind every
   * item not yet started.
   */
  async each<T>(items: T[], run: (item: T) => Promise<void>): Promise<void> {
    const running = new Set<Promise<void>>();
    let failure: { err: unknown } | undefined;
    for (const item of items) {
      await this.acquire();
      if (failure) {
        // An unexpected error (items catch their own): start nothing more, let the others finish.
        this.release();
        break;
      }
      const p: Promise<void> = run(item)
        .catch((err: unknown) => {
          failure ??= { err };
        })
        .finally(() => {
          this.release();
          running.delete(p);
        });
      running.add(p);
    }
    await Promise.all(running);
    if (failure) throw failure.err;
  }
}

const ITEMS_PER_SLOT = 2;
const MIN_ITEMS = 256;

function noop(): void {}
