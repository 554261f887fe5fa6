// Duration flags (--timeout, --step-timeout, --settle): Go-style durations, read once by the
// command's parse (run.ts) into milliseconds, so that no command body sees the text.

import { UsageError } from '../exit-codes.js';

/**
 * The longest a Node timer can wait: setTimeout takes a signed 32-bit count of milliseconds and
 * fires after 1 ms for anything longer (with a warning), so `--step-timeout 1000h` gave up at once.
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
const FORMS = 'a duration like 90s, 10m, 1h30m or 5m30s (units h, m, s, ms; a bare number is seconds)';

/**
 * A duration as Go writes one (`1h30m`, `5m30s`, `1.5h`, `250ms`; units h, m, s, ms, summed), or a
 * bare number of seconds; at most MAX_DURATION_MS (596h, about 24.8 days). Days are refused as Go
 * refuses them (a day is not always 24 h, and `1d` read as something else would be worse): write
 * `24h`. `0` is refused, unless `zeroMeansNone`: then it is no limit at all (Infinity).
 */
export function parseDuration(v: string, flag: string, o: { zeroMeansNone?: boolean } = {}): number {
  const s = v.trim();
  const none = o.zeroMeansNone ? ', or 0 for no limit' : '';
  let ms: number;
  if (/^\d+(?:\.\d+)?$/.test(s)) ms = Number(s) * 1000;
  else if (/^(?:\d+(?:\.\d+)?(?:ms|h|m|s))+$/.test(s)) {
    ms = 0;
    for (const [, n, unit] of s.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) ms += Number(n) * UNIT_MS[unit!]!;
  } else if (/^\d+(?:\.\d+)?\s*(?:d|days?|w|weeks?)$/i.test(s)) {
    throw new UsageError(
      `${flag} ${s}: days and weeks are not units here (as in Go's durations); write hours, e.g. 24h for a day${none}`,
    );
  } else {
    throw new UsageError(`${flag} must be ${FORMS}${none} (got ${JSON.stringify(s)})`);
  }
  if (ms === 0 && o.zeroMeansNone) return Number.POSITIVE_INFINITY;
  if (!(ms > 0)) throw new UsageError(`${flag} must be more than zero${none}`);
  if (ms > MAX_DURATION_MS)
    throw new UsageError(
      `${flag} ${s} is longer than a timer can wait: at most ${MAX_DURATION_MS} ms (596h, about 24.8 days)${none}`,
    );
  return Math.max(1, Math.round(ms));
}

/** A duration where zero in any unit (`0`, `0s`, `0.0m`) means not at all (0 ms), as --settle takes it. */
export function parseDurationOrZero(v: string, flag: string): number {
  return /^(?:0+(?:\.0+)?(?:ms|s|m|h)?)+$/.test(v.trim()) ? 0 : parseDuration(v, flag);
}
