// The static label of an InfraProviderStatus the stub creates, from what the provider's resources say.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import { bareMetalMachine, reconcileOptions, res } from '../helpers/provider-fixtures.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../src/provider/run/contract.js';
import { silentLogger } from '../../src/log.js';
import { LABEL_IS_STATIC_INFRA_PROVIDER, NS_INFRA_PROVIDER, T } from '../../src/omni-api/resource.js';
import type { ProfileOption } from '../../src/provider/profile.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';

const opts = (o: Partial<ReconcileOptions> = {}): ReconcileOptions =>
  reconcileOptions(ID, { timeoutMs: 2_000, omniWaitMs: 1_000, ...o });

describe('the static label of a ProviderStatus the stub creates follows the facts', () => {
  async function labelAfter(profile: ProfileOption, machines: boolean): Promise<boolean> {
    const fake = new FakeState(machines ? bareMetalMachine(ID, U1, { phase: 'running' }) : []);
    // A new MachineRequest makes the run announce (a refusal is due); no ProviderStatus exists yet.
    fake.put(
      res(NS_INFRA_PROVIDER, T.MachineRequest, 'req-1', { labels: { 'omni.sidero.dev/infra-provider-id': ID } }),
    );
    await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ profile, deregister: false }));
    const ps = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID });
    expect(ps).toBeDefined();
    return Object.hasOwn(ps!.metadata.labels, LABEL_IS_STATIC_INFRA_PROVIDER);
  }

  it('InfraMachines exist: labelled static even with --profile provisioning, and with auto', async () => {
    expect(await labelAfter('provisioning', true)).toBe(true);
    expect(await labelAfter('auto', true)).toBe(true);
  });

  it('--profile bare-metal: labelled; no InfraMachines and not bare-metal: not labelled', async () => {
    expect(await labelAfter('bare-metal', false)).toBe(true);
    expect(await labelAfter('provisioning', false)).toBe(false);
    expect(await labelAfter('auto', false)).toBe(false);
  });
});
