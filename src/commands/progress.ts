// Progress on stderr while a run works (issue 4 item 8), for a person at a terminal: one line,
// redrawn in place ("\r" + erase line) at most every 200 ms, with the log lines written above it.
// Only on a TTY with pretty logs: JSON logs and pipes get no control characters.
//
// No progress-bar library: what is needed is one line of counts and keeping it out of the way of
// pino-pretty's lines on the same stream, which a bar library would not do for us; this is a few lines.

import { Writable } from 'node:stream';
import type { ReconcileProgress } from '../provider/reconcile.js';
import { escapeControl } from '../untrusted.js';
import type { ConnectionConfig, Io } from './provider-options.js';

export type ProgressCounts = ReconcileProgress;

export interface ProgressTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: ProgressTimers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

const CLEAR = '\r\x1b[2K';
export const PROGRESS_INTERVAL_MS = 200;

export class ProgressLine {
  private latest: ProgressCounts | undefined;
  private shown = false;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private timer: unknown;
  private closed = false;
  private readonly timers: ProgressTimers;
  private readonly intervalMs: number;
  /** Where log lines go: the progress line is erased first and redrawn (throttled) after them. */
  readonly logStream: Writable;

  constructor(private readonly out: NodeJS.WritableStream, o: { intervalMs?: number; timers?: ProgressTimers } = {}) {
    this.timers = o.timers ?? realTimers;
    this.intervalMs = o.intervalMs ?? PROGRESS_INTERVAL_MS;
    this.logStream = new Writable({
      write: (chunk: Buffer | string, _enc, cb) => {
        if (this.shown) {
          this.out.write(CLEAR);
          this.shown = false;
        }
        this.out.write(chunk);
        if (this.latest && !this.closed) this.schedule();
        cb();
      },
    });
  }

  update(counts: ProgressCounts): void {
    this.latest = { ...counts };
    if (!this.closed) this.schedule();
  }

  /** Erases the line for good (before the summary). */
  done(): void {
    this.closed = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    if (this.shown) this.out.write(CLEAR);
    this.shown = false;
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    const wait = this.lastDraw + this.intervalMs - this.timers.now();
    if (wait <= 0) {
      this.draw();
      return;
    }
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      if (!this.closed) this.draw();
    }, wait);
  }

  private draw(): void {
    const c = this.latest;
    if (!c) return;
    this.lastDraw = this.timers.now();
    // Counts only today; escaped all the same, so that nothing added to this line can break it (rule 13).
    const text = escapeControl(`stub-provider: ${c.released} released, ${c.blocked} blocked, ${c.failed} failed, ${c.remaining} remaining`);
    // Never wider than the terminal: a wrapped line cannot be erased with one "\r".
    const columns = (this.out as { columns?: number }).columns;
    this.out.write(`${CLEAR}${columns && columns > 1 ? text.slice(0, columns - 1) : text}`);
    this.shown = true;
  }
}

/** A progress line when stderr is a terminal and the logs are pretty (the default there); else none. */
export function progressFor(c: ConnectionConfig, io: Io): ProgressLine | undefined {
  const tty = (io.stderr as { isTTY?: boolean }).isTTY === true;
  if (!tty || (c.logFormat ?? 'pretty') !== 'pretty') return undefined;
  return new ProgressLine(io.stderr);
}
