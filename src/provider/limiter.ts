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
