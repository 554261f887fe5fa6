// What a person sees on stderr while a run or a plan works (docs/operator-guide.md, "What the
// terminal shows"): one short line per machine as it ends (released, refused, blocked, failed), and below them
// one progress line, redrawn in place ("\r" + erase line): what the command is doing from its first
// second (reading Omni, planning, waiting for Omni, ...; stage.ts), then the counts of the run,
// fitted to the terminal's width (progress-text.ts); at most every 200 ms when something changes
// and every second when nothing does (the elapsed time and, with --wait, the time left move on).
// Only on a TTY with pretty logs: JSON logs and pipes get no control characters, and one log line
// per phase instead (showStages). Where this line is shown, the per-item log lines are written at
// debug (run.ts): the machine lines say it shortly, the audit log and `--log-level debug` in full.
//
// No progress-bar library: what is needed is one line of counts and keeping it out of the way of
// pino-pretty's lines on the same stream, which a bar library would not do for us; this is a few lines.

import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import type { ItemEnded, ReconcileProgress } from '../provider/run/outcomes.js';
import type { StageEvent, StageTracker } from '../provider/run/stage.js';
import { escapeControl } from '../omni-api/untrusted.js';
import { phaseText, progressText } from './progress-text.js';
import type { Throttled } from './progress-text.js';
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
/** Redraw this often while nothing changes, so that the clock on the line moves. */
export const PROGRESS_TICK_MS = 1000;

export class ProgressLine {
  private latest: ProgressCounts | undefined;
  /** When `latest` arrived, and what the elapsed time counts from (the start, or the answer to the prompt). */
  private latestAt = 0;
  private startedAt: number;
  /** The stage the command is in (what phaseText says of it, when the counts do not say it). */
  private current: Pick<StageEvent, 'stage' | 'detail'> | undefined;
  /** At the confirmation prompt: nothing is drawn until the next stage. */
  private paused = false;
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
    this.startedAt = this.timers.now();
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
    this.latest = { ...counts };
    this.latestAt = now;
    // Interrupted items are not listed: Ctrl-C would print one line for each of the up to a few
    // hundred under way, and the summary says the run was interrupted.
    if (ended && ended.status !== 'interrupted' && !this.closed) this.above(`${this.fit(itemLine(ended))}\n`);
    this.dirty = true;
    this.plan();
  }

  /**
   * Erases the line and draws nothing until the next stage (the confirmation prompt is being shown);
   * the elapsed time then counts from the answer.
   */
  pause(): void {
    this.paused = true;
    this.cancelTimer();
    this.erase();
  }

  /** The stage the command entered, or how far it got within it (stage.ts): shown from the first second. */
  stage(e: StageEvent): void {
    if (this.closed) return;
    if (this.paused && e.stage === 'confirming') return;
    if (this.paused) {
      this.paused = false;
      this.startedAt = this.timers.now();
    }
    this.current = { stage: e.stage, detail: e.detail };
    this.dirty = true;
    this.plan();
  }

  /** Erases the line for good (before the summary). */
  done(): void {
    this.closed = true;
    this.cancelTimer();
    this.erase();
  }

  private erase(): void {
    if (this.shown) this.out.write(CLEAR);
    this.shown = false;
  }

  /**
   * Writes whole lines above the progress line: erases it first, and puts it back at once after a
   * whole line (machines that end a few milliseconds apart would otherwise keep it erased: a
   * throttled redraw is erased again by the next line before anyone sees it).
   */
  private above(text: Buffer | string): void {
    const wasShown = this.shown;
    this.erase();
    this.out.write(text);
    if (this.closed) return;
    this.dirty = true;
    if (wasShown && this.drawable && String(text).endsWith('\n')) this.draw();
    else this.plan();
  }

  private get drawable(): boolean {
    return !this.closed && !this.paused && (this.latest !== undefined || this.current !== undefined);
  }

  /** Arms the one timer for the next draw: soon (throttled) after a change, a tick later otherwise. */
  private plan(): void {
    if (!this.drawable) return;
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
    if (!this.drawable) return;
    const c = this.latest;
    const now = this.timers.now();
    this.lastDraw = now;
    this.dirty = false;
    const left = c?.timeLeftMs === undefined ? undefined : c.timeLeftMs - (now - this.latestAt);
    const throttled = this.throttling?.();
    const phase = this.current && phaseText(this.current.stage, this.current.detail, { counted: c !== undefined });
    const text = progressText(
      {
        ...(c ? { counts: c } : {}),
        ...(phase ? { phase } : {}),
        elapsedMs: now - this.startedAt,
        ...(left !== undefined ? { leftMs: left } : {}),
        ...(throttled ? { throttled } : {}),
      },
      this.columns() ?? Number.POSITIVE_INFINITY,
    );
    this.out.write(`${CLEAR}${text}`);
    this.shown = true;
    this.plan();
  }

  /** The terminal's width, read at every draw: a resize changes what the next line holds. */
  private columns(): number | undefined {
    const columns = (this.out as { columns?: number }).columns;
    return columns && columns > 1 ? columns : undefined;
  }

  /** Never wider than the terminal: a wrapped line cannot be erased with one "\r". */
  private fit(text: string): string {
    const columns = this.columns();
    return columns && text.length > columns - 1 ? `${text.slice(0, columns - 2)}…` : text;
  }
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

/** A progress line when stderr is a terminal and the logs are pretty (the default there); else none. */
export function progressFor(c: ConnectionConfig, io: Io): ProgressLine | undefined {
  const tty = (io.stderr as { isTTY?: boolean }).isTTY === true;
  if (!tty || (c.logFormat ?? 'pretty') !== 'pretty') return undefined;
  return new ProgressLine(io.stderr);
}

/**
 * What a person or a log collector sees of the stages (stage.ts): on a terminal the progress line
 * shows them; elsewhere each stage entered is one info log line (`{"stage":"reading","msg":"reading
 * Omni"}`). Returns the unsubscribe.
 */
export function showStages(stages: StageTracker, progress: ProgressLine | undefined, log: Logger): () => void {
  return stages.subscribe((e) => {
    if (progress) progress.stage(e);
    else if (e.entered && e.stage !== 'done')
      log.info({ stage: e.stage, ...e.detail }, phaseText(e.stage, e.detail) ?? e.stage);
  });
}
