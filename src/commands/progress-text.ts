// The words of the progress line a terminal shows during a run or a plan (progress.ts draws it),
// fitted to the terminal's width, and of the phase a command is in (also the phase log line off a
// terminal). Escaped (design rule 13), so that nothing added to the line can break it.

import type { ReconcileProgress } from '../provider/run/outcomes.js';
import { describeThrottling } from '../provider/report/text.js';
import type { Stage, StageDetail } from '../provider/run/stage.js';
import { escapeControl } from '../omni-api/untrusted.js';

/** What the progress line says of back-pressure (omni-client/write/throttling.ts ThrottlingStats). */
export interface Throttled {
  signals: number;
  waitedMs: number;
}

export interface ProgressState {
  /** The counts of the run's items, once it has planned them. */
  counts?: ReconcileProgress;
  /** What the command is doing (phaseText), when the counts do not say it. */
  phase?: string;
  elapsedMs: number;
  /** With --wait: the time left before --timeout. */
  leftMs?: number;
  throttled?: Throttled;
}

const SEP = ' · ';

/**
 * The progress line: the numbers that matter first, fitted to `columns`: released of planned, then
 * what failed, was blocked or refused (only when not zero), what the command is doing when that is
 * not releasing, the elapsed time and, with --wait, the time left; then, while there is room,
 * detail: machines still running, items waiting for Omni, how much Omni throttled the writes. A part
 * that does not fit is left out, never cut; the first is cut only when it alone is too wide.
 */
export function progressText(s: ProgressState, columns = Number.POSITIVE_INFINITY): string {
  const c = s.counts;
  const parts: (string | false)[] = c
    ? [
        `${c.released}/${c.total} released`,
        c.failed > 0 && `${c.failed} failed`,
        c.blocked > 0 && `${c.blocked} blocked`,
        c.refused > 0 && `${c.refused} refused`,
        s.phase ?? false,
      ]
    : [s.phase ?? 'starting'];
  parts.push(formatClock(s.elapsedMs), s.leftMs !== undefined && `${formatClock(s.leftMs, true)} left`);
  if (c) parts.push(c.running > 0 && `${c.running} running`, c.waiting > 0 && `${c.waiting} waiting for Omni`);
  if (s.throttled && s.throttled.signals > 0) parts.push(describeThrottling(s.throttled));
  const max = columns - 1;
  const [first = '', ...rest] = parts.filter((p): p is string => p !== false).map((p) => escapeControl(p));
  let line = first.length > max ? `${first.slice(0, Math.max(0, max - 1))}…` : first;
  for (const p of rest) if (line.length + SEP.length + p.length <= max) line += `${SEP}${p}`;
  return line;
}

/**
 * What a command is doing, in a few words, for the progress line (a terminal) and the phase log line
 * (elsewhere); undefined where the counts say it (releasing) or nothing is left to say (done).
 * `reading` names the kind whose List came in last, with its count.
 */
export function phaseText(stage: Stage, d: StageDetail, o: { counted?: boolean } = {}): string | undefined {
  switch (stage) {
    case 'starting':
      return 'starting';
    case 'preflight':
      return 'checking the key, the provider and its heartbeat';
    case 'reading':
      return d.kind !== undefined ? `reading Omni: ${d.count ?? 0} ${shortType(d.kind)}` : 'reading Omni';
    case 'planning':
      return 'planning';
    case 'confirming':
      return 'planned';
    case 'announcing':
      return 'announcing stub mode';
    case 'releasing':
      return o.counted ? undefined : `releasing ${d.items ?? 0} item(s)`;
    case 'waiting':
      return d.resources !== undefined
        ? `waiting for Omni to destroy ${d.resources} resource(s)`
        : 'waiting for a change (--wait)';
    case 'settling':
      return `settling: ${d.items ?? 0} item(s) others still hold`;
    case 'deregistering':
      return 'deregistering';
    case 'done':
      return undefined;
  }
}

/** `InfraMachines.omni.sidero.dev` -> `InfraMachines`. */
function shortType(type: string): string {
  return type.split('.')[0] ?? type;
}

/** `42s`, `3m05s`, `1h02m`; rounded down, or up for a time left (never "0s left" before it is). */
export function formatClock(ms: number, up = false): string {
  const s = Math.max(0, up ? Math.ceil(ms / 1000) : Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
