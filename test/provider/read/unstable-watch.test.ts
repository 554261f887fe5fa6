// A server whose Watch streams break on every live event (a proxy that cuts each one just before an
// event line): the caches cannot follow Omni through their watches. The run must not act or report on
// what it stopped following: each such kind is read with Lists instead (kind-cache.ts, cache-options.ts
// CACHE_DEFAULTS.unstableBreaks), and the run ends as a run without the proxy would, everything released and
// the provider deregistered, which the sim confirms.

import { Writable } from 'node:stream';
import pino from 'pino';
import { expect, it } from 'vitest';
import { createOmniClient } from '../../../src/omni-client/client.js';
import { NS_INFRA_PROVIDER, T } from '../../../src/omni-api/resource.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../../src/omni-sim/scenario/generate.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { noDelay } from '../../helpers/fake-gateway.js';
import { simEachTest } from '../../helpers/sim-client.js';
import { CUT, startTamperProxy } from '../../helpers/tamper-proxy.js';

const ID = 'bare-metal';
const omni = simEachTest();

/** Whether a Watch line carries a CREATED, UPDATED or DESTROYED event (CREATED is the enum's zero: omitted). */
function liveEvent(line: string): boolean {
  const o = JSON.parse(line) as { result?: { event?: { event_type?: string | number }[] } };
  return (o.result?.event ?? []).some((e) =>
    [undefined, 'CREATED', 'UPDATED', 'DESTROYED', 0, 1, 2].includes(e.event_type),
  );
}

it('a kind whose watch breaks before every event is read with Lists: all released, deregistered', async () => {
  const sim = await omni.sim({
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    resources: [
      ...providerRegistration(ID, { static: true }),
      ...bareMetalMachine(ID, machineUuid(0)),
      ...bareMetalMachine(ID, machineUuid(1)),
      ...provisionedRequest(ID, 'req-0'),
    ],
    faults: {},
  });
  await sim.controllers?.idle();
  let cuts = 0;
  const proxy = omni.closing(
    await startTamperProxy(sim.endpoint, (r) =>
      r.rpc === 'Watch'
        ? {
            kind: 'lines',
            map: (line) => {
              if (!liveEvent(line)) return line;
              cuts++;
              return CUT;
            },
          }
        : undefined,
    ),
  );
  let log = '';
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(c: Buffer, _e, cb) {
        log += c.toString();
        cb();
      },
    }),
  );
  const client = await createOmniClient({
    endpoint: proxy.endpoint,
    key: sim.keys[`infra-provider:${ID}`]!,
    concurrency: 8,
    delay: noDelay,
    env: {},
  });
  const started = performance.now();
  try {
    const r = await reconcile(
      { state: client.state, logger, version: 'test' },
      {
        providerId: ID,
        machines: [],
        profile: 'auto',
        stateTypes: [],
        deregister: true,
        wait: false,
        timeoutMs: 60_000,
        omniWaitMs: 60_000,
        settleMs: 0,
        concurrency: 8,
      },
    );
    expect(cuts).toBeGreaterThan(0);
    expect(r.outcomes.filter((o) => o.status !== 'released')).toEqual([]);
    expect(r.deregistered).toBe(true);
  } finally {
    await client.close();
  }
  // Not by waiting out the 60 s a wait for Omni may take: the kinds were read again.
  expect(performance.now() - started).toBeLessThan(50_000);
  expect(log).toMatch(/the watch of this kind breaks before it delivers anything: reading it with Lists instead/);
  // What the sim holds agrees.
  await sim.controllers?.idle();
  const left = sim.store.all();
  expect(left.filter((x) => x.metadata.type === T.InfraMachine)).toEqual([]);
  expect(left.filter((x) => x.metadata.type === T.MachineRequest)).toEqual([]);
  expect(
    left.find((x) => x.metadata.namespace === NS_INFRA_PROVIDER && x.metadata.type === T.InfraProviderStatus),
  ).toBe(undefined);
});
