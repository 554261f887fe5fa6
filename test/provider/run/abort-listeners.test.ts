// A reconcile of hundreds of resources on one caller's AbortSignal (the CLI's SIGINT/SIGTERM signal)
// must not pile up 'abort' listeners on it: every call, wait and watch removes its listener when it
// ends. Otherwise Node prints "MaxListenersExceededWarning: ... 11 abort listeners" on stderr, and
// a long --wait run leaks memory.

import { expect, it } from 'vitest';
import { generateScenario } from '../../../src/omni-sim/scenario/generate.js';
import { silentLogger } from '../../../src/log.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { simEachTest } from '../../helpers/sim-client.js';

const omni = simEachTest();

/** Counts the abort listeners on a signal as they come and go. */
function countListeners(signal: AbortSignal): { now: () => number; max: () => number } {
  let now = 0;
  let max = 0;
  const live = new Set<unknown>();
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((...a: Parameters<AbortSignal['addEventListener']>) => {
    if (a[0] === 'abort' && !live.has(a[1])) {
      live.add(a[1]);
      now++;
      max = Math.max(max, now);
    }
    add(...a);
  }) as typeof signal.addEventListener;
  signal.removeEventListener = ((...a: Parameters<AbortSignal['removeEventListener']>) => {
    if (a[0] === 'abort' && live.delete(a[1])) now--;
    remove(...a);
  }) as typeof signal.removeEventListener;
  return { now: () => now, max: () => max };
}

/** Omni 1.9's write budget, tight enough that most writes wait in the write window (and in backoff). */
const THROTTLE = { throttle: { infraProvider: { bytesPerSecond: 40_000, burst: 4_000 }, maxWaitMs: 40 } };

it.each([
  [false, '1.3.4', {}],
  [true, '1.3.4', {}],
  [false, '1.9.3', THROTTLE],
  [true, '1.9.3', THROTTLE],
] as const)(
  '--wait %s, Omni %s, faults %j, 150 machines: at most 3 abort listeners on the signal, none left, no warning',
  async (wait, omniVersion, faults) => {
    const sim = await omni.sim(generateScenario({ providerId: 'bare-metal', machines: 150, omniVersion, faults }));
    const client = await omni.client(sim, 'bare-metal', {
      concurrency: 16,
    });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => {
      if (w.name === 'MaxListenersExceededWarning') warnings.push(w);
    };
    process.on('warning', onWarning);
    const ac = new AbortController();
    const count = countListeners(ac.signal);
    try {
      const r = await reconcile(
        { state: client.state, logger: silentLogger(), version: 'test' },
        {
          providerId: 'bare-metal',
          machines: [],
          profile: 'auto',
          stateTypes: [],
          deregister: true,
          wait,
          timeoutMs: 20_000,
          omniWaitMs: 10_000,
          concurrency: 16,
          signal: ac.signal,
        },
      );
      expect(r.outcomes.filter((o) => o.kind === 'InfraMachine' && o.status === 'released')).toHaveLength(150);
      expect(r.deregistered).toBe(true);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(count.now(), "abort listeners still on the caller's signal after the run").toBe(0);
    expect(count.max(), "abort listeners on the caller's signal at once").toBeLessThanOrEqual(3);
    expect(warnings.map((w) => w.message)).toEqual([]);
    // Under the budget the writes really waited (in the window and in backoff).
    if (faults === THROTTLE) expect(client.throttling().signals).toBeGreaterThan(0);
  },
  60_000,
);
