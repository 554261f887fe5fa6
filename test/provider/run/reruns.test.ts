// A run repeated (a retried Job, an operator again): after a blocked release, after a deregistration,
// and with --wait when only the provider's statuses are left.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import { bareMetalMachine, healthStatus, providerStatus, reconcileOptions } from '../../helpers/provider-fixtures.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../../src/provider/run/contract.js';
import { silentLogger } from '../../../src/log.js';
import { NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T } from '../../../src/omni-api/resource.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';

const opts = (o: Partial<ReconcileOptions> = {}): ReconcileOptions =>
  reconcileOptions(ID, { timeoutMs: 2_000, omniWaitMs: 1_000, ...o });

describe('--require-wipe and a re-run after an Omni finalizer held the InfraMachineStatus (Omni < 1.3)', () => {
  it('a second run can still release the machine (the first wiped it) and says why it did not wipe again', async () => {
    const wiped: string[] = [];
    const strategy = {
      name: 'test',
      wipe: async (m: { machineId: string; bmc?: { address?: string } }) => {
        if (!m.bmc?.address)
          return {
            machineId: m.machineId,
            strategy: 'test',
            outcome: 'skipped' as const,
            reason: 'no BMC data',
            durationMs: 1,
          };
        wiped.push(m.machineId);
        return { machineId: m.machineId, strategy: 'test', outcome: 'succeeded' as const, durationMs: 1 };
      },
    };
    const wipe = {
      strategy,
      options: { strategy: 'command' as const, timeoutMs: 1000, requireWipe: true, concurrency: 1 },
    };
    const fake = new FakeState(bareMetalMachine(ID, U1, { omniOnStatus: true }));
    fake.omni.releasesOnTeardown.delete('MachineStatusController'); // Omni slow this time
    const r1 = await reconcile(
      { state: fake, logger: silentLogger(), version: '0.1.0', wipe: wipe as never },
      opts({ machines: [U1], omniWaitMs: 50 }),
    );
    expect(wiped).toEqual([U1]);
    expect(r1.outcomes[0]).toMatchObject({ status: 'blocked' });
    // Omni caught up: its controller lets go of the InfraMachineStatus; the Job retries.
    fake.omni.releasesOnTeardown.add('MachineStatusController');
    const ims = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U1 })!;
    fake.put({ ...ims, metadata: { ...ims.metadata, finalizers: [] } });
    const r2 = await reconcile(
      { state: fake, logger: silentLogger(), version: '0.1.0', wipe: wipe as never },
      opts({ machines: [U1], omniWaitMs: 500 }),
    );
    expect(r2.outcomes[0]).toMatchObject({ status: 'released' });
    expect(wiped).toEqual([U1]); // not wiped twice
    expect(r2.firstPlan.leftBehind.map((n) => n.reason).join(' ')).toMatch(
      /wipe not repeated.*already cleaned up by an earlier run/,
    );
  });
});

describe('a re-run after deregistration', () => {
  for (const wait of [false, true]) {
    it(`${wait ? 'with' : 'without'} --wait writes nothing (no ProviderStatus / heartbeat), asks nothing`, async () => {
      const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
      const first = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts());
      expect(first.deregistered).toBe(true);
      expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
      const writes = fake.writes.length;
      // A retried Job (or an operator) runs again.
      let asked = 0;
      const again = await reconcile(
        { state: fake, logger: silentLogger(), version: '0.1.0' },
        opts({
          wait,
          confirm: async () => {
            asked++;
            return true;
          },
        }),
      );
      expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
      expect(
        fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID }),
      ).toBeUndefined();
      expect(fake.writes.slice(writes).map((w) => `${w.method} ${w.pointer.type}`)).toEqual([]);
      expect(again.announced).toBe(false);
      expect(asked).toBe(0);
    });
  }
});

describe('--wait when only the provider statuses are left and no heartbeat (ephemeral, lost at Omni restart)', () => {
  it('deregisters without leaving the heartbeat it created itself', async () => {
    const fake = new FakeState([providerStatus(ID, true)]);
    const r = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait: true }));
    expect(r.deregistered).toBe(true);
    expect(r.announced).toBe(true);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
    expect(
      fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID }),
    ).toBeUndefined();
  });

  it('a ProviderStatus the run created (it was missing) goes too', async () => {
    const fake = new FakeState([healthStatus(ID, Date.now() - 3_600_000, 'stub-provider: earlier run')]);
    const r = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait: true }));
    expect(r.deregistered).toBe(true);
    expect(fake.all()).toEqual([]);
  });
});
