// A duration flag longer than a Node timer can wait is a usage error naming the
// maximum (setTimeout fires after 1 ms for anything above 2^31-1 ms: `--step-timeout 1000h` gave up at once).

import { describe, expect, it } from 'vitest';
import { MAX_DURATION_MS, parseDuration } from '../../src/commands/durations.js';
import { UsageError } from '../../src/exit-codes.js';

describe('parseDuration', () => {
  it('reads seconds and ms/s/m/h', () => {
    expect(parseDuration('90', '--timeout')).toBe(90_000);
    expect(parseDuration('250ms', '--timeout')).toBe(250);
    expect(parseDuration('1.5m', '--timeout')).toBe(90_000);
    expect(parseDuration('596h', '--timeout')).toBe(596 * 3_600_000);
  });

  it('refuses what a timer cannot hold, naming the flag and the maximum', () => {
    for (const v of ['1000h', '597h', `${MAX_DURATION_MS + 1}ms`, `${'9'.repeat(400)}s`]) {
      const err = (() => {
        try {
          parseDuration(v, '--step-timeout');
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err, v).toBeInstanceOf(UsageError);
      expect((err as Error).message).toMatch(/--step-timeout .*at most 2147483647 ms \(596h/);
    }
    expect(parseDuration(`${MAX_DURATION_MS}ms`, '--timeout')).toBe(MAX_DURATION_MS);
  });

  it('refuses zero and what is not a duration', () => {
    expect(() => parseDuration('0s', '--timeout')).toThrow(/more than zero/);
    expect(() => parseDuration('10 minutes', '--timeout')).toThrow(/duration like/);
  });
});

// Go's compound durations (docs/operator-guide.md, "Running it"), days refused as Go refuses them, 0 for
// "no limit" where the flag allows it (--timeout with --wait), the timer's maximum kept.
describe('parseDuration: Go-style values', () => {
  it.each([
    ['5m30s', 330_000],
    ['1h30m', 5_400_000],
    ['1h0m30s', 3_630_000],
    ['1h30m45s500ms', 5_445_500],
    ['1.5h', 5_400_000],
    ['90', 90_000],
    ['0.5s', 500],
    ['2h2h', 14_400_000],
    [' 10m ', 600_000],
    ['596h', 596 * 3_600_000],
    ['596h31m', 596 * 3_600_000 + 31 * 60_000],
  ])('%s is %d ms', (v, ms) => {
    expect(parseDuration(v, '--timeout')).toBe(ms);
  });

  it.each([
    ['1d', /--timeout 1d: days and weeks are not units here \(as in Go's durations\); write hours, e.g. 24h/],
    ['2 days', /days and weeks are not units/],
    ['1w', /days and weeks are not units/],
    ['1h30', /must be a duration like 90s, 10m, 1h30m or 5m30s \(units h, m, s, ms; a bare number is seconds\)/],
    ['-5m', /must be a duration like/],
    ['5M', /must be a duration like/],
    ['', /must be a duration like/],
    ['597h', /longer than a timer can wait/],
    ['596h32m', /longer than a timer can wait/],
  ])('refuses %j', (v, message) => {
    expect(() => parseDuration(v, '--timeout')).toThrow(message);
  });

  it('0 is no limit only where the flag allows it; anything else refuses it', () => {
    expect(parseDuration('0', '--timeout', { zeroMeansNone: true })).toBe(Number.POSITIVE_INFINITY);
    expect(parseDuration('0s', '--timeout', { zeroMeansNone: true })).toBe(Number.POSITIVE_INFINITY);
    expect(parseDuration('0h0m', '--timeout', { zeroMeansNone: true })).toBe(Number.POSITIVE_INFINITY);
    expect(() => parseDuration('0', '--step-timeout')).toThrow(/--step-timeout must be more than zero/);
    // The maximum still holds beside "no limit", and the message offers it.
    expect(() => parseDuration('1000h', '--timeout', { zeroMeansNone: true })).toThrow(
      /at most 2147483647 ms \(596h, about 24\.8 days\), or 0 for no limit/,
    );
  });

  it('a fraction of a millisecond is at least 1 ms (a timer of 0 would not wait at all)', () => {
    expect(parseDuration('0.4ms', '--step-timeout')).toBe(1);
  });
});
