// What a person sees on stderr while a run works (issues 4 item 8, 14 item 2): one short line per
// machine as it ends (released, refused, blocked, failed), and below them one progress line, redrawn
// in place ("\r" + erase line), at most every 200 ms when the counts change and every second when
// they do not (elapsed time and, with --wait, the time left move on while the run waits).
// Only on a TTY with pretty logs: JSON logs and pipes get no control characters. Where this line is
// shown, the per-write and per-item log lines are written at debug (run.ts): the machine lines say it
// shortly, the audit log and `--log-level debug` in full.
//
// No progress-bar library: what is needed is one line of counts and keeping it out of the way of
// pino-pretty's lines on the same stream, which a bar library would not do for us; this is a few lines.

import { Writable } from 'node:stream';
import type { ItemEnded, ReconcileProgress } from '../provider/run/outcomes.js';
import { describeThrottling } from '../provider/report/report.js';
import { escapeControl } from '../omni-api/untrusted.js';
import type { ConnectionConfig, Io } from './provider-options.js';

export type ProgressCounts = ReconcileProgress;
/** What the progress line says of back-pressure (omni-client/write/pressure.ts ThrottlingStats). */
export interface Throttled {
  signals: number;
  waitedMs: number;
}

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
/** Redraw this often while nothing changes, so that the clock on the line moves. */
export const PROGRESS_TICK_MS = 1000;

export class ProgressLine {
  private latest: ProgressCounts | undefined;
  /** When `latest` arrived and when the first counts did (elapsed time counts from the run's start). */
  private latestAt = 0;
  private startedAt: number | undefined;
  private shown = false;
  /** Counts or text above changed since the last draw. */
  private dirty = false;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private timer: unknown;
  private timerAt = Number.POSITIVE_INFINITY;
  private closed = false;
  private readonly timers: ProgressTimers;
  private readonly intervalMs: number;
  private readonly tickMs: number;
  /** Where log lines go: the progress line is erased first and redrawn (throttled) after them. */
  readonly logStream: Writable;
  /** How much Omni throttled the writes so far (the client's counters), read at every draw. */
  throttling: (() => Throttled) | undefined;

  constructor(
    private readonly out: NodeJS.WritableStream,
    o: { intervalMs?: number; tickMs?: number; timers?: ProgressTimers } = {},
  ) {
    this.timers = o.timers ?? realTimers;
    this.intervalMs = o.intervalMs ?? PROGRESS_INTERVAL_MS;
    this.tickMs = o.tickMs ?? PROGRESS_TICK_MS;
    this.logStream = new Writable({
      write: (chunk: Buffer | string, _enc, cb) => {
        this.above(chunk);
        cb();
      },
    });
  }

  /** The reconcile progress callback: the latest counts, and the line of an item that ended. */
  update(counts: ProgressCounts, ended?: ItemEnded): void {
    const now = this.timers.now();
    this.startedAt ??= now;
    this.latest = { ...counts };
    this.latestAt = now;
    // Interrupted items are not listed: Ctrl-C would print one line for each of the up to a few
    // hundred under way, and the summary says the run was interrupted.
    if (ended && ended.status !== 'interrupted' && !this.closed) this.above(`${this.fit(itemLine(ended))}\n`);
    this.dirty = true;
    this.plan();
  }

  /** Erases the line for good (before the summary). */
  done(): void {
    this.closed = true;
    this.cancelTimer();
    if (this.shown) this.out.write(CLEAR);
    this.shown = false;
  }

  /** Writes whole lines above the progress line: erases it first; it is redrawn after (throttled). */
  private above(text: Buffer | string): void {
    if (this.shown) {
      this.out.write(CLEAR);
      this.shown = false;
    }
    this.out.write(text);
    if (this.latest && !this.closed) {
      this.dirty = true;
      this.plan();
    }
  }

  /** Arms the one timer for the next draw: soon (throttled) after a change, a tick later otherwise. */
  private plan(): void {
    if (this.closed || !this.latest) return;
    const at = this.lastDraw + (this.dirty ? this.intervalMs : this.tickMs);
    if (this.timer !== undefined && this.timerAt <= at) return;
    this.cancelTimer();
    const wait = at - this.timers.now();
    if (wait <= 0) {
      this.draw();
      return;
    }
    this.timerAt = at;
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      this.draw();
    }, wait);
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private draw(): void {
    const c = this.latest;
    if (!c || this.closed) return;
    const now = this.timers.now();
    this.lastDraw = now;
    this.dirty = false;
    const left = c.timeLeftMs === undefined ? undefined : c.timeLeftMs - (now - this.latestAt);
    this.out.write(`${CLEAR}${this.fit(progressText(c, now - (this.startedAt ?? now), left, this.throttling?.()))}`);
    this.shown = true;
    this.plan();
  }

  /** Never wider than the terminal: a wrapped line cannot be erased with one "\r". */
  private fit(text: string): string {
    const columns = (this.out as { columns?: number }).columns;
    return columns && columns > 1 && text.length > columns - 1 ? `${text.slice(0, columns - 2)}…` : text;
  }
}

/**
 * The progress line's text. Counts only, and the clock, but escaped all the same, so that nothing
 * added to this line can break it (design rule 13).
 */
export function progressText(c: ProgressCounts, elapsedMs: number, leftMs?: number, throttled?: Throttled): string {
  const ended = `${c.released} released, ${c.refused} refused, ${c.blocked} blocked, ${c.failed} failed`;
  const open = `${c.running} running, ${c.waiting} waiting, ${c.remaining} remaining`;
  const clock = `${formatClock(elapsedMs)} elapsed${leftMs === undefined ? '' : `, ${formatClock(leftMs, true)} left`}`;
  // Only once Omni has pushed back: a run that is not throttled keeps its line as it was.
  const pressure = throttled && throttled.signals > 0 ? ` · ${describeThrottling(throttled)}` : '';
  return escapeControl(`stub-provider: ${ended} · ${open} · ${clock}${pressure}`);
}

const STATUS_WORD: Record<ItemEnded['status'], string> = {
  released: 'released',
  refused: 'refused',
  blocked: 'blocked',
  failed: 'failed',
  interrupted: 'interrupted',
  'not-started': 'not started',
};

/** One short line for a machine (or a refusal, or the deregistration) that ended; escaped (rule 13). */
export function itemLine(e: ItemEnded): string {
  if (e.kind === 'deregistration' && e.status === 'released') return escapeControl(`deregistered provider ${e.id}`);
  const word = STATUS_WORD[e.status].padEnd(8);
  // A released item with a reason is held by someone else's finalizer (Omni's): say so.
  const why = e.reason ? (e.status === 'released' ? `; still held by ${e.reason}` : `: ${e.reason}`) : '';
  return escapeControl(`${word} ${e.kind} ${e.id}${why}`);
}

/** `42s`, `3m05s`, `1h02m`; rounded down, or up for a time left (never "0s left" before it is). */
export function formatClock(ms: number, up = false): string {
  const s = Math.max(0, up ? Math.ceil(ms / 1000) : Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** A progress line when stderr is a terminal and the logs are pretty (the default there); else none. */
export function progressFor(c: ConnectionConfig, io: Io): ProgressLine | undefined {
  const tty = (io.stderr as { isTTY?: boolean }).isTTY === true;
  if (!tty || (c.logFormat ?? 'pretty') !== 'pretty') return undefined;
  return new ProgressLine(io.stderr);
}
