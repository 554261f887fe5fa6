// The token bucket under both of the sim's back-pressures (src/omni-sim/gateway/token-bucket.ts), on
// times of the test's own: golang.org/x/time/rate's reservations, debt and cancellations.

import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../../src/omni-sim/gateway/token-bucket.js';

describe('TokenBucket (x/time/rate semantics)', () => {
  it('starts full; what is over the level is a debt that later reservations wait behind', () => {
    const b = new TokenBucket(1000, 500, 0);
    expect(b.reserve(0, 400, 0)?.waitMs).toBe(0);
    expect(b.reserve(0, 200, 0)).toBeUndefined(); // 100 there, 100 ms to wait: not within 0
    expect(b.reserve(0, 200, Infinity)?.waitMs).toBe(100);
    expect(b.reserve(0, 300, Infinity)?.waitMs).toBe(400); // behind the 100 owed
    expect(b.untilMs(0, 1)).toBe(401);
    expect(b.untilMs(200, 500)).toBe(700); // -400 + 200 refilled
  });

  it('never holds more than the burst, and refuses a reservation larger than it', () => {
    const b = new TokenBucket(1000, 500, 0);
    expect(b.untilMs(60_000, 500)).toBe(0);
    expect(b.reserve(60_000, 501, Infinity)).toBeUndefined();
    expect(b.reserve(60_000, 500, 0)?.waitMs).toBe(0);
    expect(b.untilMs(60_000, 1)).toBe(1);
  });

  it('a refused reservation takes nothing; a cancelled one gives back what no later one counts on', () => {
    const b = new TokenBucket(1000, 500, 0);
    b.reserve(0, 500, 0);
    expect(b.reserve(0, 100, 50)).toBeUndefined();
    expect(b.untilMs(0, 100)).toBe(100);
    const r = b.reserve(0, 100, Infinity)!;
    expect(r.waitMs).toBe(100);
    r.cancel(10);
    expect(b.untilMs(10, 100)).toBe(90);
    // A cancel behind a later reservation gives back only what that one does not depend on.
    const a = b.reserve(10, 100, Infinity)!;
    b.reserve(10, 100, Infinity);
    a.cancel(10);
    expect(b.untilMs(10, 1)).toBeGreaterThan(0);
  });

  it('with no refill, the burst is all there is', () => {
    const b = new TokenBucket(0, 2, 0);
    expect(b.reserve(0, 1, 0)).toBeDefined();
    expect(b.reserve(1e9, 1, 0)).toBeDefined();
    expect(b.reserve(2e9, 1, Infinity)).toBeUndefined();
    expect(b.untilMs(2e9, 1)).toBe(Infinity);
  });
});
