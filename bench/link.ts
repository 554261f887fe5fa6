// A slow network link between the stub and the simulated Omni, for the benchmark: a TCP relay on
// 127.0.0.1 that carries every byte at most `mbit` megabits per second in each direction (one link
// shared by all connections, as a WAN uplink is) and delivers it `rttMs / 2` later. Slower than
// loopback in the ways that matter for compression: bytes cost time, and a call costs a round trip.
//
// The model, per direction: a chunk of n bytes starts when the link is free (or now), occupies it
// for n / rate, and arrives one-way-delay after it has left. Delivery times only grow, so every
// connection's bytes stay in order. A connection with more than half a second of the link's bytes
// queued (at least 64 KiB) stops reading its source until a quarter of that is left, like TCP's
// window: connections share the link about evenly, and a large List does not sit in the relay's
// memory. (With a megabyte per connection, 8 s at 1 Mbit/s, a call's first byte waited behind every
// other connection's megabyte, tens of seconds with a few Lists at once: a queue no router keeps.)

import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface LinkOptions {
  /** Megabits per second in each direction. */
  mbit: number;
  /** Round-trip time added to every exchange (half each way). */
  rttMs: number;
}

export interface Link {
  /** `http://127.0.0.1:PORT`: the endpoint to give the stub. */
  endpoint: string;
  /** Bytes carried so far: to the sim (requests) and from it (answers). */
  stats(): { up_bytes: number; down_bytes: number };
  close(): Promise<void>;
}

/** Pieces the link carries one at a time: small enough that a large answer trickles in. */
const PIECE = 16 * 1024;
/** Bytes queued per connection before it stops reading: half a second of the link, at least 64 KiB. */
const WINDOW_MS = 500;
const MIN_WINDOW = 64 * 1024;

/** One direction of the link, shared by every connection. */
class Direction {
  private freeAt = 0;
  bytes = 0;
  /** Bytes one connection may have queued in this direction (see the header). */
  readonly window: number;
  constructor(
    private readonly bytesPerMs: number,
    private readonly delayMs: number,
  ) {
    this.window = Math.max(MIN_WINDOW, Math.round(bytesPerMs * WINDOW_MS));
  }

  /** When a piece of n bytes handed over now arrives at the other end. */
  arrival(n: number, now: number): number {
    const start = Math.max(now, this.freeAt);
    this.freeAt = start + n / this.bytesPerMs;
    this.bytes += n;
    return this.freeAt + this.delayMs;
  }
}

/** The bytes of one connection in one direction, waiting for their arrival time. */
class Lane {
  private readonly queue: { at: number; data: Buffer }[] = [];
  private queued = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dir: Direction,
    private readonly from: Socket,
    private readonly to: Socket,
  ) {
    from.on('data', (c: Buffer) => this.push(c));
    from.on('end', () => this.push(undefined));
  }

  private ended = false;

  private push(c: Buffer | undefined): void {
    const now = performance.now();
    if (c === undefined) {
      this.ended = true;
      this.queue.push({ at: this.queue.at(-1)?.at ?? now, data: Buffer.alloc(0) });
    } else {
      for (let i = 0; i < c.length; i += PIECE) {
        const data = c.subarray(i, i + PIECE);
        this.queue.push({ at: this.dir.arrival(data.length, now), data });
        this.queued += data.length;
      }
      if (this.queued > this.dir.window) this.from.pause();
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.queue.length === 0) return;
    const wait = Math.max(0, (this.queue[0]?.at ?? 0) - performance.now());
    this.timer = setTimeout(() => this.deliver(), wait);
  }

  private deliver(): void {
    this.timer = undefined;
    const now = performance.now();
    while (this.queue.length > 0 && (this.queue[0]?.at ?? 0) <= now + 0.5) {
      const { data } = this.queue.shift()!;
      this.queued -= data.length;
      if (data.length > 0) this.to.write(data);
      else if (this.ended && this.queue.length === 0) this.to.end();
    }
    if (this.queued < this.dir.window / 4 && this.from.isPaused()) this.from.resume();
    this.schedule();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

/** Starts the link on 127.0.0.1:0 in front of `upstream` (an `http://127.0.0.1:PORT` endpoint). */
export async function startLink(upstream: string, opts: LinkOptions): Promise<Link> {
  const target = new URL(upstream);
  const bytesPerMs = (opts.mbit * 1e6) / 8 / 1000;
  const up = new Direction(bytesPerMs, opts.rttMs / 2);
  const down = new Direction(bytesPerMs, opts.rttMs / 2);
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    client.setNoDelay(true);
    const server = connect({ host: target.hostname, port: Number(target.port) });
    server.setNoDelay(true);
    for (const s of [client, server]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        server.destroy();
      });
    }
    const lanes = [new Lane(up, client, server), new Lane(down, server, client)];
    // A reset on one side resets the other; a FIN travels through the lane, after the bytes before it.
    const stop = (hadError: boolean) => {
      if (!hadError && !(client.destroyed && server.destroyed)) return;
      for (const l of lanes) l.close();
      client.destroy();
      server.destroy();
    };
    client.on('close', stop);
    server.on('close', stop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stats: () => ({ up_bytes: up.bytes, down_bytes: down.bytes }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
