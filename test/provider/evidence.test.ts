// Positive evidence (docs/design.md rules 4 and 10), against the in-memory State: a
// resource is a leftover only once a Get of its machine or request answered NotFound; a parent a
// List left out but a Get found is planned like any other; a NotFound is done only for a resource
// read by exactly that ID. The same over real HTTP, with a tampering proxy, is in
// test/provider/positive-evidence.test.ts.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import {
  bareMetalMachine,
  healthStatus,
  label,
  providerStatus,
  provisionedRequest,
  reconcileOptions,
  res,
} from '../helpers/provider-fixtures.js';
import { NotFoundError } from '../../src/omni-api/errors.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { NS_INFRA_PROVIDER, T, describePointer, providerNamespace, providerType } from '../../src/omni-api/resource.js';
import { silentLogger } from '../../src/log.js';
import { buildPlan } from '../../src/provider/plan/planner.js';
import type { Plan } from '../../src/provider/plan/plan.js';
import { stepNames } from '../helpers/plan-steps.js';
import { resolveProfile } from '../../src/provider/profile.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../src/provider/run/contract.js';
import { parentsOf } from '../../src/provider/plan/facts.js';
import { takeSnapshot } from '../../src/provider/read/snapshot.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';
/** The snapshot's Gets of the provider-wide resources (ProviderStatus, heartbeat, SysVersion). */
const BASE_GETS = 3;

const isType = (type: string) => (r: Resource) => r.metadata.type === type;
const steps = (p: Plan, i = 0) => stepNames(p.items[i]!.ops, { byId: true });

async function planOf(fake: FakeState, id = ID): Promise<Plan> {
  const snap = await takeSnapshot(fake, { providerId: id, profile: 'auto', stateTypes: [] });
  return buildPlan(snap, { providerId: id, machines: [], deregister: true, wipe: false });
}

const opts = (o: Partial<ReconcileOptions> = {}): ReconcileOptions => reconcileOptions(ID, o);

const run = (fake: FakeState, o: Partial<ReconcileOptions> = {}) =>
  reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts(o));
const notFound = () => new NotFoundError('not found');

describe('plan: a leftover only after a Get of its machine or request answered NotFound', () => {
  it('InfraMachines List missing a running machine: nothing planned, reported in use, no deregistration', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1, { phase: 'running' })]);
    fake.hideFromLists = isType(T.InfraMachine);
    const plan = await planOf(fake);
    expect(plan.items).toEqual([]);
    expect(plan.running).toEqual([expect.objectContaining({ kind: 'InfraMachine', id: U1 })]);
    expect(plan.deregistration.status).toBe('not-ready');
    expect(plan.deregistration.reasons).toContainEqual(
      expect.stringMatching(new RegExp(`InfraMachines ${U1} was not in its List, but a Get of its ID found it`)),
    );
    // One Get for the machine, named by seven resources.
    expect(fake.calls.get).toBe(BASE_GETS + 1);
  });

  it('a machine being deleted that the List left out is released as usual; its release rests on that Get', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    fake.hideFromLists = isType(T.InfraMachine);
    const plan = await planOf(fake);
    expect(plan.items.map((i) => `${i.kind}/${i.id}`)).toEqual([`InfraMachine/${U1}`]);
    expect(steps(plan).at(-1)).toBe(`release InfraMachines/${U1} (by ID)`);
    expect(steps(plan).filter((s) => s.endsWith('(by ID)'))).toHaveLength(1);
    expect(plan.deregistration.status).toBe('not-ready');
  });

  it('a machine gone: one Get per distinct parent, then what names it is a leftover (listed only)', async () => {
    const outputs = bareMetalMachine(ID, U1).slice(1);
    const fake = new FakeState([
      providerStatus(ID, true),
      ...outputs,
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
    ]);
    const plan = await planOf(fake);
    expect(fake.calls.get).toBe(BASE_GETS + 1);
    expect(plan.items.map((i) => `${i.kind}/${i.id}`)).toEqual(Array(outputs.length).fill(`leftover/${U1}`));
    expect(
      plan.items
        .flatMap((i) => stepNames(i.ops, { byId: true }))
        .every((s) => s.startsWith('dispose') && !s.endsWith('(by ID)')),
    ).toBe(true);
    // Each rests on the Get of its machine that answered NotFound, printed as its first operation.
    expect(plan.items.every((i) => stepNames(i.ops, { gets: true })[0] === `get InfraMachines/${U1}`)).toBe(true);
    expect(plan.running.map((n) => n.id)).toEqual([U2]);
  });

  it('a MachineRequests List leaving out a running request (status, ConfigPatchRequests): none planned', async () => {
    const fake = new FakeState([
      providerStatus('kubevirt', false),
      ...provisionedRequest('kubevirt', 'w-1', { phase: 'running' }),
    ]);
    fake.hideFromLists = isType(T.MachineRequest);
    const plan = await planOf(fake, 'kubevirt');
    expect(plan.items).toEqual([]);
    expect(plan.refusals).toEqual([]);
    expect(plan.running).toEqual([expect.objectContaining({ kind: 'MachineRequest', id: 'w-1' })]);
    expect(plan.deregistration.status).toBe('not-ready');
    expect(fake.calls.get).toBe(BASE_GETS + 1);
  });

  it('a release after children its Lists left out: each read by ID, disposed first, wipe gets BMC data', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    fake.hideFromLists = (r) =>
      r.metadata.type === T.InfraMachineStatus || r.metadata.type === providerType('BMCConfiguration', ID);
    const snap = await takeSnapshot(fake, { providerId: ID, profile: 'auto', stateTypes: [] });
    const plan = buildPlan(snap, { providerId: ID, machines: [], deregister: true, wipe: true });
    expect(fake.calls.get).toBe(BASE_GETS + 2);
    expect(steps(plan)).toEqual([
      `wipe ${U1}`,
      `dispose MachineStatus/${U1}`,
      `dispose PowerOperation/${U1}`,
      `dispose RebootStatus/${U1}`,
      `dispose WipeStatus/${U1}`,
      `dispose BMCConfiguration/${U1} (by ID)`,
      `dispose InfraMachineStatuses/${U1} (by ID)`,
      `release InfraMachines/${U1}`,
    ]);
    const wipe = plan.items[0]!.ops[0]!;
    expect(wipe.op === 'wipe' && wipe.bmcConfiguration?.metadata.id).toBe(U1);
    expect(plan.deregistration.reasons).toContainEqual(
      expect.stringMatching(/BMCConfiguration .* was not in its List, but a Get of its ID found it/),
    );
  });

  it('children of a request being released likewise; children really gone: a Get each, nothing changed', async () => {
    const fake = new FakeState([...provisionedRequest(ID, 'w-1', { withCpr: false })]);
    fake.hideFromLists = isType(T.MachineRequestStatus);
    const plan = await planOf(fake);
    expect(steps(plan)).toEqual([
      `dispose MachineRequestStatuses/w-1 (by ID)`,
      `dispose Machine/w-1`,
      `release MachineRequests/w-1`,
    ]);
    expect(fake.calls.get).toBe(BASE_GETS + 1);

    const cleaned = new FakeState([providerStatus(ID, true), bareMetalMachine(ID, U1)[0]!]);
    const again = await planOf(cleaned);
    expect(steps(again)).toEqual([`release InfraMachines/${U1}`]);
    // Its InfraMachineStatus and the five per-machine types; nothing found.
    expect(cleaned.calls.get).toBe(BASE_GETS + 6);
    expect(again.deregistration.reasons.filter((x) => x.includes('not in its List'))).toEqual([]);
  });

  it('every List complete and every parent listed: no Get beyond the provider-wide ones', async () => {
    const fake = new FakeState([
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1),
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
      ...provisionedRequest(ID, 'w-1'),
    ]);
    await planOf(fake);
    expect(fake.calls.get).toBe(BASE_GETS);
  });

  it('deregisters only once each parent named by what is left was confirmed gone by a Get', async () => {
    const fake = new FakeState([
      providerStatus(ID, true),
      res(NS_INFRA_PROVIDER, T.InfraMachineStatus, U1, {
        labels: label(ID),
        owner: `${ID}.InfraMachineStatusController`,
      }),
    ]);
    const plan = await planOf(fake);
    expect(plan.deregistration.status).toBe('ready');
    // The same resources without the parent Gets (per-machine snapshots skip them): not ready.
    const snap = await takeSnapshot(fake, { providerId: ID, profile: 'auto', stateTypes: [], checkParents: false });
    const unchecked = buildPlan(snap, { providerId: ID, machines: [], deregister: true, wipe: false });
    expect(unchecked.deregistration.status).toBe('not-ready');
    expect(unchecked.deregistration.reasons).toEqual([
      expect.stringContaining(
        `InfraMachines ${U1}, named by ` +
          `${describePointer({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U1 })}, was not ` +
          `confirmed gone`,
      ),
    ]);
    expect(unchecked.items).toEqual([]);
  });

  it('parents by type: statuses by ID, ConfigPatchRequests by label, our namespace by kind; provider-wide none', () => {
    const profile = resolveProfile('auto', { staticLabel: false, infraMachines: 0, machineRequests: 0 }, ID, ['Both']);
    const ns = providerNamespace(ID);
    const names = (r: Resource) => parentsOf(r, profile).map((p) => `${p.type.split('.')[0]}/${p.id}`);
    expect(names(res(NS_INFRA_PROVIDER, T.InfraMachineStatus, U1))).toEqual([`InfraMachines/${U1}`]);
    expect(names(res(NS_INFRA_PROVIDER, T.MachineRequestStatus, 'w-1'))).toEqual(['MachineRequests/w-1']);
    expect(
      names(
        res(NS_INFRA_PROVIDER, T.ConfigPatchRequest, 'p', { labels: { 'omni.sidero.dev/machine-request': 'w-1' } }),
      ),
    ).toEqual(['MachineRequests/w-1']);
    expect(names(res(NS_INFRA_PROVIDER, T.ConfigPatchRequest, 'p'))).toEqual([]);
    expect(names(res(ns, providerType('WipeStatus', ID), U1))).toEqual([`InfraMachines/${U1}`]);
    expect(names(res(ns, providerType('Machine', ID), 'w-1'))).toEqual(['MachineRequests/w-1']);
    expect(names(res(ns, providerType('Both', ID), 'x'))).toEqual(['InfraMachines/x', 'MachineRequests/x']);
    expect(names(res(ns, providerType('TLSConfig', ID), 'tls-config'))).toEqual([]);
  });
});

describe('reconcile: NotFound is done only for a resource read by exactly that ID', () => {
  it('release: the Update of a listed InfraMachine answers NotFound: failed, not released', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    fake.fail('update', notFound, 1, (p) => p.type === T.InfraMachine);
    const r = await run(fake);
    expect(r.outcomes.find((o) => o.kind === 'InfraMachine')).toMatchObject({
      status: 'failed',
      reason: expect.stringMatching(/Update answered NotFound, but nothing read this resource by its ID/),
      counts: true,
    });
    expect(r.deregistered).toBe(false);
  });

  it('release: the same NotFound for an InfraMachine a Get found (the List left it out): done', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    fake.hideFromLists = isType(T.InfraMachine);
    fake.fail('update', notFound, 1, (p) => p.type === T.InfraMachine);
    // (The fake keeps the machine: the run's wait for Omni to destroy it times out.)
    const r = await run(fake, { omniWaitMs: 100 });
    expect(r.outcomes.find((o) => o.kind === 'InfraMachine')).toMatchObject({ status: 'released' });
  });

  it('dispose without our finalizers: a Destroy answering NotFound for a listed resource fails the item', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    fake.fail('destroy', notFound, 1, (p) => p.type === providerType('WipeStatus', ID));
    const r = await run(fake);
    expect(r.outcomes.find((o) => o.kind === 'InfraMachine')).toMatchObject({
      status: 'failed',
      reason: expect.stringMatching(/WipeStatus.*Destroy answered NotFound/),
    });
    // The chain stopped there: the InfraMachine keeps our finalizers.
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })?.metadata.finalizers).toHaveLength(
      6,
    );
  });

  it("dispose with our finalizers: once the Update removing them succeeded, a Destroy's NotFound is done", async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    fake.fail('destroy', notFound, 1, (p) => p.type === providerType('BMCConfiguration', ID));
    const r = await run(fake);
    expect(r.outcomes.find((o) => o.kind === 'InfraMachine')).toMatchObject({ status: 'released' });
  });

  it("teardown + wait: fails if its Get finds nothing; once a Get found it, a Destroy's NotFound is done", async () => {
    const mrs = (f: FakeState) => f.find({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: 'w-1' });
    const unread = new FakeState([...provisionedRequest(ID, 'w-1', { withCpr: false })]);
    unread.fail('get', notFound, 1, (p) => p.type === T.MachineRequestStatus);
    const r1 = await run(unread);
    expect(r1.outcomes.find((o) => o.kind === 'MachineRequest')).toMatchObject({
      status: 'failed',
      reason: expect.stringMatching(/MachineRequestStatuses.*Get answered NotFound/),
    });
    expect(mrs(unread)?.metadata.phase).toBe('running');

    const read = new FakeState([...provisionedRequest(ID, 'w-1', { withCpr: false })]);
    read.fail('destroy', notFound, 1, (p) => p.type === T.MachineRequestStatus);
    const r2 = await run(read);
    expect(r2.outcomes.find((o) => o.kind === 'MachineRequest')).toMatchObject({ status: 'released' });
  });

  it("deregistration: ProviderStatus Get NotFound is done; a listed leftover's NotFound blocks it", async () => {
    const ok = new FakeState([providerStatus(ID, true), healthStatus(ID, 0, 'stub-provider: earlier run')]);
    ok.fail('destroy', notFound, 1, (p) => p.type === T.InfraProviderStatus);
    expect((await run(ok)).deregistered).toBe(true);

    const tls = res(providerNamespace(ID), providerType('TLSConfig', ID), 'tls-config');
    const blocked = new FakeState([providerStatus(ID, true), tls]);
    blocked.fail('destroy', notFound, 1, (p) => p.type === tls.metadata.type);
    const r = await run(blocked);
    expect(r.deregistered).toBe(false);
    expect(r.outcomes).toContainEqual(
      expect.objectContaining({
        kind: 'leftover',
        status: 'failed',
        reason: expect.stringMatching(/TLSConfig.*Destroy answered NotFound/),
      }),
    );
    expect(blocked.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeDefined();
  });
});
