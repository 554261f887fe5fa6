// Issue 11 item 7: a duration flag longer than a Node timer can wait is a usage error naming the
// maximum (setTimeout fires after 1 ms for anything above 2^31-1 ms: `--step-timeout 1000h` gave up at once).

import { describe, expect, it } from 'vitest';
import { MAX_DURATION_MS, parseDuration } from '../../src/commands/provider-options.js';
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
      const err = (() => { try { parseDuration(v, '--step-timeout'); } catch (e) { return e; } return undefined; })();
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
