// What is the provider's and what a run may touch (docs/design.md rules 1 and 6): dotted provider IDs
// whose finalizers look alike (`a` with `a.b` vs `a.b` with `a.b.Foo`), and per-machine mode with --wait.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import {
  bareMetalMachine,
  label,
  providerStatus,
  provisionedRequest,
  reconcileOptions,
  res,
} from '../helpers/provider-fixtures.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../src/provider/run/contract.js';
import { silentLogger } from '../../src/log.js';
import { NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T } from '../../src/omni-api/resource.js';

const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';

const opts = (o: Partial<ReconcileOptions>): ReconcileOptions =>
  reconcileOptions('bare-metal', { timeoutMs: 2_000, omniWaitMs: 500, ...o });

const run = (fake: FakeState, o: Partial<ReconcileOptions>) =>
  reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts(o));

describe('what is ours (rule 1) with dotted IDs (registered before Omni 1.10)', () => {
  // Provider `a` has a controller literally named `b`, so its finalizer is `a.b`; provider `a.b` has `a.b.Foo`.
  const mixed = (owner: string) => [
    res(NS_INFRA_PROVIDER, T.InfraMachine, U1, {
      phase: 'tearingDown',
      labels: label(owner),
      owner: 'InfraMachineController',
      finalizers: ['a.b', 'a.b.Foo', 'a.c', 'A.b.Foo', 'InfraMachineController'],
    }),
  ];

  it('provider a.b removes only a.b.Foo; provider a removes only a.b and a.c', async () => {
    const asAB = new FakeState(mixed('a.b'));
    await run(asAB, { providerId: 'a.b', machines: [U1] });
    expect(asAB.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })!.metadata.finalizers).toEqual([
      'a.b',
      'a.c',
      'A.b.Foo',
      'InfraMachineController',
    ]);

    const asA = new FakeState(mixed('a'));
    await run(asA, { providerId: 'a', machines: [U1] });
    expect(asA.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })!.metadata.finalizers).toEqual([
      'a.b.Foo',
      'A.b.Foo',
      'InfraMachineController',
    ]);
  });

  it('a resource labelled with the other dotted ID is left alone whatever its finalizers', async () => {
    const fake = new FakeState(mixed('a'));
    const r = await run(fake, { providerId: 'a.b' });
    expect(fake.writes.filter((w) => w.pointer.type === T.InfraMachine)).toEqual([]);
    expect(r.outcomes.filter((o) => o.kind === 'InfraMachine')).toEqual([]);
  });
});

describe('per-machine mode (rule 6) with --wait writes nothing but the named machine', () => {
  it('no announcement, no heartbeat, no refusal, no deregistration, other machines untouched', async () => {
    const newRequest = provisionedRequest('bare-metal', 'new-1', {
      phase: 'running',
      withStatus: false,
      withCpr: false,
    });
    newRequest[0]!.metadata.finalizers = [];
    const fake = new FakeState([
      providerStatus('bare-metal', true),
      ...bareMetalMachine('bare-metal', U1),
      ...bareMetalMachine('bare-metal', U2),
      ...newRequest,
    ]);
    const r = await run(fake, { machines: [U1], wait: true, timeoutMs: 1_500 });
    expect(r.timedOut).toBe(false);
    expect(r.outcomes).toEqual([expect.objectContaining({ kind: 'InfraMachine', id: U1, status: 'released' })]);
    expect(fake.writes.length).toBeGreaterThan(0);
    expect(fake.writes.filter((w) => w.pointer.id !== U1)).toEqual([]);
    expect(fake.writes.some((w) => w.method === 'create')).toBe(false);
    expect(r.announced).toBe(false);
    expect(r.heartbeats).toBe(0);
    expect(r.refusals).toEqual([]);
    expect(r.deregistered).toBe(false);
    expect(
      fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: 'bare-metal' }),
    ).toBeUndefined();
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U2 })!.metadata.finalizers).toHaveLength(
      6,
    );
  });
});
