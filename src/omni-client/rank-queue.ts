// The queue of what waits for a place (the write window's writes, a run's items and calls): lowest
// rank first, and in arrival order among equal ranks, so that with one rank it is plain FIFO. A binary
// heap keyed by (rank, arrival): O(log n) in and out, however many wait. Someone who stops waiting (a
// cancelled call, a deadline) is taken out lazily: marked, and dropped when it reaches the top.
// An entry is its own ticket (a method on the prototype): every write and call that waits passes
// here, and a closure and an object per wait were garbage for nothing.

/** A place in the queue: `remove()` takes it out (no effect once it was taken). */
export interface QueueTicket {
  remove(): void;
}

class Entry<T> implements QueueTicket {
  removed = false;
  constructor(
    /** The queue's count of entries waiting, shared by its entries. */
    readonly waiting: { n: number },
    readonly rank: number,
    readonly seq: number,
    readonly value: T,
  ) {}

  remove(): void {
    if (this.removed) return;
    this.removed = true;
    this.waiting.n--;
  }
}

export class RankQueue<T> {
  #heap: Entry<T>[] = [];
  #seq = 0;
  readonly #waiting = { n: 0 };

  /** Entries waiting (those removed not counted). */
  get size(): number {
    return this.#waiting.n;
  }

  push(value: T, rank = 0): QueueTicket {
    const e = new Entry(this.#waiting, rank, this.#seq++, value);
    this.#heap.push(e);
    this.#up(this.#heap.length - 1);
    this.#waiting.n++;
    return e;
  }

  /** The lowest rank's first arrival, taken out; undefined when nobody waits. */
  shift(): T | undefined {
    for (;;) {
      const top = this.#pop();
      if (!top) return undefined;
      if (top.removed) continue;
      top.remove();
      return top.value;
    }
  }

  #pop(): Entry<T> | undefined {
    const h = this.#heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined) return undefined;
    if (h.length > 0) {
      h[0] = last;
      this.#down(0);
    }
    return top;
  }

  #up(i: number): void {
    const h = this.#heap;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) return;
      swap(h, i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    const h = this.#heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) return;
      swap(h, i, m);
      i = m;
    }
  }
}

function before(a: Entry<unknown>, b: Entry<unknown>): boolean {
  return a.rank < b.rank || (a.rank === b.rank && a.seq < b.seq);
}

/** Swaps two places of the heap (no array per swap, as a destructuring swap may make). */
function swap(h: unknown[], i: number, j: number): void {
  const x = h[i];
  h[i] = h[j];
  h[j] = x;
}
