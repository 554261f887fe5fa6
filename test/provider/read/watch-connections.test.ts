// Watches never take the connections calls need: each open Watch holds a connection for as long as
// it lasts, and with --wait the stub keeps several open. With the connection pool sized to
// --concurrency 2, a --wait run used to hang with every connection held by a watch.

import { describe, expect, it } from 'vitest';
import { createOmniClient } from '../../../src/omni-client/client.js';
import { silentLogger } from '../../../src/log.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../../src/omni-sim/scenario/generate.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { simEachTest } from '../../helpers/sim-client.js';

const ID = 'bare-metal';
const omni = simEachTest();

describe('connections for watches', () => {
  it('a --wait run with two connections for calls finishes while its watches are open', async () => {
    const sim = await omni.sim({
      omniVersion: '1.3.4',
      identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
      resources: [
        ...providerRegistration(ID, { static: true }),
        ...bareMetalMachine(ID, machineUuid(0)),
        ...provisionedRequest(ID, 'req-0'),
      ],
      faults: {},
    });
    await sim.controllers?.idle();
    const client = await createOmniClient({
      endpoint: sim.endpoint,
      key: sim.keys[`infra-provider:${ID}`]!,
      concurrency: 2,
      env: {},
    });
    try {
      const started = performance.now();
      const r = await reconcile(
        { state: client.state, logger: silentLogger(), version: 'test' },
        {
          providerId: ID,
          machines: [],
          profile: 'auto',
          stateTypes: [],
          deregister: true,
          wait: true,
          timeoutMs: 20_000,
          omniWaitMs: 10_000,
          concurrency: 2,
        },
      );
      expect(r.timedOut).toBe(false);
      expect(r.deregistered).toBe(true);
      expect(performance.now() - started).toBeLessThan(15_000);
      expect(r.outcomes.filter((o) => o.status === 'released').map((o) => o.kind)).toEqual(
        expect.arrayContaining(['InfraMachine', 'MachineRequest']),
      );
      expect(r.outcomes.filter((o) => o.status !== 'released')).toEqual([]);
    } finally {
      await client.close();
    }
  }, 30_000);
});
