// A write's answer that arrives after the watch has shown what followed it: Omni's controllers let go
// of a resource, or its owner destroyed it, as soon as our write was applied, and the watch's event
// of that came before our write's own answer (a slow link, a loaded proxy; or simply no gzip on the
// stream). The run must still see the release and the destruction: an answer older than what the
// watch showed never brings a resource back, and a step that waits for Omni to let go does not wait
// for a version after the one that already shows it.

import { expect, it } from 'vitest';
import { generateScenario } from '../../../src/omni-sim/scenario/generate.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { silentLogger } from '../../../src/log.js';
import { forward, startTamperProxy } from '../../helpers/tamper-proxy.js';
import { simEachTest } from '../../helpers/sim-client.js';

const WRITES = new Set(['Create', 'Update', 'Destroy']);
const omni = simEachTest();

it('every write answered 100 ms after applied: everything released and deregistered, no wait runs out', async () => {
  const sim = await omni.sim(generateScenario({ providerId: 'bm', machines: 3, requests: 2, omniVersion: '1.4.2' }));
  const upstream = sim.endpoint;
  const proxy = omni.closing(
    await startTamperProxy(upstream, (r) =>
      WRITES.has(r.rpc)
        ? forward(upstream, r, (res, status, headers, body) => {
            setTimeout(() => {
              if (!res.destroyed) {
                res.writeHead(status, headers);
                res.end(body);
              }
            }, 100);
          })
        : undefined,
    ),
  );
  const client = await omni.client(sim, 'bm', { endpoint: proxy.endpoint });
  // Waits for Omni short enough that one which misses its event shows as blocked, not as slow.
  const r = await reconcile(
    { state: client.state, logger: silentLogger(), version: 'test', heartbeatMs: 60_000 },
    {
      providerId: 'bm',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: false,
      timeoutMs: 20_000,
      omniWaitMs: 3_000,
      concurrency: 8,
    },
  );
  expect(r.outcomes.filter((o) => o.status !== 'released')).toEqual([]);
  expect(r.outcomes.length).toBeGreaterThanOrEqual(5);
  expect(r.deregistered).toBe(true);
}, 60_000);
