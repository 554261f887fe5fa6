// Finish what is started first (the rank of an item's calls, limiter.ts and the write window): under Omni 1.9's
// write budget, the next step of an item under way goes before the first step of a new one, so requests are released
// from the start of the run, and a run interrupted a quarter of the way has released some. Count-based: positions in
// the order of the writes the client sent, never wall-clock times.

import { expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { T } from '../../../src/omni-api/resource.js';
import { generateScenario } from '../../../src/omni-sim/scenario/generate.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { reconcileOptions } from '../../helpers/provider-fixtures.js';
import { simEachTest } from '../../helpers/sim-client.js';

const ID = 'kubevirt';
const REQUESTS = 60;
/**
 * The interrupted run holds as many requests as the measure of docs/performance.md ("Under Omni's write budget"):
 * 150. With 60, whether the few items under way at the abort were one write from done moved the share by several
 * points (8 to 13 of 60 released, 9 needed); with 150 a quarter leaves 31 to 35 released (23 needed), and a run
 * without the ranks and the items' slow start (breadth first) none.
 */
const INTERRUPTED_REQUESTS = 150;
/**
 * Items start one per call in flight (Limiter.forItems): the first release comes after about 3 x CONCURRENCY writes.
 * At 4, a quarter of the writes left 8 or 9 of 60 released depending on timing: 2 keeps the test off that edge.
 */
const CONCURRENCY = 2;
/** Tight enough that the window shrinks and most writes wait for their turn: ~5 s of bytes. */
const BUDGET = { throttle: { infraProvider: { bytesPerSecond: 20_000, burst: 800 }, maxWaitMs: 10 } };

const omni = simEachTest();

/** A run over `requests` held requests under the budget; `abortAfter`: abort its signal once that many were applied. */
async function throttledRun(requests: number, abortAfter?: number) {
  const sim = await omni.sim(
    generateScenario({ providerId: ID, machines: 0, requests, omniVersion: '1.9.3', faults: BUDGET }),
  );
  await sim.controllers?.idle();
  const writes: string[] = [];
  let applied = 0;
  const ac = new AbortController();
  const client = await omni.client(sim, ID, {
    concurrency: CONCURRENCY,
    onWrite: (w) => {
      writes.push(`${w.method} ${w.resource.type}`);
      return (o) => {
        // The budget is spent by the writes Omni applies (what it refused cost it nothing).
        if (o.result === 'ok' && ++applied === abortAfter) ac.abort(new Error('SIGTERM'));
      };
    },
  });
  const r = await reconcile(
    { state: client.state, logger: silentLogger(), version: 'test' },
    reconcileOptions(ID, {
      concurrency: CONCURRENCY,
      omniWaitMs: 20_000,
      settleMs: 0,
      deregister: false,
      signal: ac.signal,
    }),
  );
  await sim.controllers?.idle();
  const releasedInSim =
    requests -
    sim.store.all().filter((x) => x.metadata.type === T.MachineRequest && x.metadata.finalizers.length > 0).length;
  return { r, writes, releasedInSim, throttled: client.throttling() };
}

it("under a write budget the first request is released within the first tenth of the run's writes", async () => {
  const { r, writes, throttled } = await throttledRun(REQUESTS);
  expect(throttled.signals, 'the budget pushed back').toBeGreaterThan(0);
  expect(r.outcomes.filter((o) => o.kind === 'MachineRequest' && o.status === 'released')).toHaveLength(REQUESTS);
  const firstRelease = writes.indexOf(`Update ${T.MachineRequest}`);
  expect(firstRelease).toBeGreaterThanOrEqual(0);
  expect(firstRelease / writes.length, `first release at write ${firstRelease + 1} of ${writes.length}`).toBeLessThan(
    0.1,
  );
}, 60_000);

it('a run interrupted at a quarter of its writes has released at least 15 % of the requests', async () => {
  // Each request takes 4 writes (status teardown and destroy, state destroy, release).
  const { r, releasedInSim } = await throttledRun(INTERRUPTED_REQUESTS, INTERRUPTED_REQUESTS);
  expect(r.interrupted).toBe(true);
  expect(releasedInSim, `${releasedInSim} of ${INTERRUPTED_REQUESTS} released`).toBeGreaterThanOrEqual(
    Math.ceil(INTERRUPTED_REQUESTS * 0.15),
  );
}, 60_000);
