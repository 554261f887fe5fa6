// A FIFO counting semaphore: bounds the calls in flight to Omni (`--concurrency`), whatever the
// number of machines being worked on; waiting for Omni does not hold a slot.

export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  private head = 0;

  constructor(readonly width: number) {
    if (!(width >= 1)) throw new RangeError(`concurrency must be at least 1 (got ${width})`);
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.width) {
      await new Promise<void>((resolve) => this.queue.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private release(): void {
    if (this.head < this.queue.length) {
      const next = this.queue[this.head]!;
      this.queue[this.head++] = noop;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      next(); // the slot passes straight to the next waiter
    } else {
      this.active--;
    }
  }
}

function noop(): void {}

/**
 * Items between two calls at once, per call slot: enough to keep every slot busy, few enough that a
 * step's results are not held through a queue of every machine of the fleet. With all 11 000 items
 * of a 10 000-machine run in the limiter's queue at once, each step waited seconds for the next,
 * what it had read went to V8's old space, and the heap grew by ~25 MB/s of such garbage (485 MB
 * peak for a 130 MB live set).
 */
const WINDOW_PER_SLOT = 4;
const MIN_WINDOW = 256;

/**
 * Bounds how many plan items are under way at once. An item leaves it while it waits for Omni or a
 * wipe (`outside`), so that slow or stuck resources never hold back the others. A soft bound: an
 * item outside the window (deregistration) may pass through `outside` and briefly add one.
 */
export class ItemWindow {
  private free: number;
  private readonly queue: ((() => void) | undefined)[] = [];
  private head = 0;

  constructor(concurrency: number) {
    this.free = Math.max(MIN_WINDOW, WINDOW_PER_SLOT * concurrency);
  }

  async enter(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.queue.push(resolve));
  }

  leave(): void {
    if (this.head < this.queue.length) {
      const next = this.queue[this.head];
      this.queue[this.head++] = undefined;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      next?.(); // the place passes straight to the next item
    } else {
      this.free++;
    }
  }

  async outside<T>(fn: () => Promise<T>): Promise<T> {
    this.leave();
    try {
      return await fn();
    } finally {
      await this.enter();
    }
  }

  /**
   * Runs `run` for each item once it has a place, in order, and resolves when all are done. Items
   * are started one by one instead of all queued at once: at 10 000 machines the queue held 11 000
   * suspended functions for the whole pass, and an item coming back from a wait queued behind every
   * item not yet started.
   */
  async each<T>(items: T[], run: (item: T) => Promise<void>): Promise<void> {
    const running = new Set<Promise<void>>();
    let failure: { err: unknown } | undefined;
    for (const item of items) {
      await this.enter();
      if (failure) {
        // An unexpected error (items catch their own): start nothing more, let the others finish.
        this.leave();
        break;
      }
      const p: Promise<void> = run(item).catch((err: unknown) => { failure ??= { err }; }).finally(() => { this.leave(); running.delete(p); });
      running.add(p);
    }
    await Promise.all(running);
    if (failure) throw failure.err;
  }
}
