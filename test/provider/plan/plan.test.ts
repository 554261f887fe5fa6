import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import {
  bareMetalMachine,
  healthStatus,
  label,
  omniMachine,
  providerStatus,
  provisionedRequest,
  res,
} from '../../helpers/provider-fixtures.js';
import { takeSnapshot } from '../../../src/provider/read/snapshot.js';
import { buildPlan } from '../../../src/provider/plan/planner.js';
import { immediateWrites } from '../../../src/provider/plan/plan.js';
import { finishedWaiting } from '../../../src/provider/run/deadline.js';
import type { Plan } from '../../../src/provider/plan/plan.js';
import type { Operation } from '../../../src/provider/plan/operations.js';
import { stepNames } from '../../helpers/plan-steps.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  NS_INFRA_PROVIDER,
  T,
  providerNamespace,
  providerType,
} from '../../../src/omni-api/resource.js';
import { foreignFinalizers, isOurFinalizer, isOurResource, ourFinalizers } from '../../../src/provider/ownership.js';
import { resolveProfile, resolveStateType, stateTypeProblem } from '../../../src/provider/profile.js';
import { MachineRequestStage } from '../../../src/omni-api/specs/messages.js';
import { PermissionDeniedError } from '../../../src/omni-api/errors.js';
import { predictHold, predictHolds, predictionOf } from '../../../src/provider/plan/explain.js';
import type { HoldFacts } from '../../../src/provider/plan/explain.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';

async function planFor(
  resources: Resource[],
  o: {
    id?: string;
    machines?: string[];
    deregister?: boolean;
    wipe?: boolean;
    profile?: 'auto' | 'bare-metal' | 'provisioning';
    stateTypes?: string[];
  } = {},
): Promise<Plan> {
  const id = o.id ?? ID;
  const snap = await takeSnapshot(new FakeState(resources), {
    providerId: id,
    profile: o.profile ?? 'auto',
    stateTypes: o.stateTypes ?? [],
  });
  return buildPlan(snap, {
    providerId: id,
    machines: o.machines ?? [],
    deregister: o.deregister ?? true,
    wipe: o.wipe ?? false,
  });
}

/** The operations on one resource, as `op` names (`remove-finalizers teardown wait destroy`). */
const opsOn = (ops: Operation[], type: string) =>
  ops
    .filter((o) => o.op !== 'wipe' && o.target.type === type)
    .map((o) => o.op)
    .join(' ');
const lastOp = (p: Plan) => p.items[0]!.ops.at(-1)!;

describe('ownership (design rule 1)', () => {
  it('takes only <id>.<Name> with a dot-free Name, case-sensitively', () => {
    expect(isOurFinalizer('bare-metal.WipeStatusController', 'bare-metal')).toBe(true);
    expect(isOurFinalizer('Bare-Metal.WipeStatusController', 'bare-metal')).toBe(false);
    expect(isOurFinalizer('bare-metal.', 'bare-metal')).toBe(false);
    expect(isOurFinalizer('bare-metal.a.b', 'bare-metal')).toBe(false);
    expect(isOurFinalizer('proxmox-talos.ProvisionController', 'proxmox')).toBe(false);
    expect(isOurFinalizer('BareMetal-IAD1.X', 'BareMetal-IAD1')).toBe(true);
    expect(isOurFinalizer('baremetal-iad1.X', 'BareMetal-IAD1')).toBe(false);
    // An ID with a dot (registered before Omni 1.10).
    expect(isOurFinalizer('my.dc.ProvisionController', 'my.dc')).toBe(true);
    expect(isOurFinalizer('my.dc.ProvisionController', 'my')).toBe(false);
    expect(isOurFinalizer('InfraMachineController', 'bare-metal')).toBe(false);
    expect(isOurFinalizer('.X', '')).toBe(false);
    expect(isOurFinalizer('bare-metalX', 'bare-metal')).toBe(false);
    expect(isOurFinalizer('bare-metal', 'bare-metal')).toBe(false);
    expect(isOurFinalizer('xbare-metal.X', 'bare-metal')).toBe(false);
  });

  it('agrees with the rule as written, for any finalizer and ID; ours and foreign split every list', () => {
    // The rule spelled out (0.2): `<id>.` then a non-empty Name without a dot, for a non-empty ID.
    const rule = (f: string, id: string): boolean =>
      id !== '' && f.startsWith(`${id}.`) && f.length > id.length + 1 && !f.slice(id.length + 1).includes('.');
    const part = fc.constantFrom('a', 'b', '.', 'ab', 'a.b', '');
    const word = fc.array(part, { maxLength: 4 }).map((ps) => ps.join(''));
    fc.assert(
      fc.property(word, fc.array(word, { maxLength: 6 }), fc.boolean(), (id, fins, labelled) => {
        for (const f of [...fins, `${id}.X`, `${id}.`, `${id}.a.b`]) expect(isOurFinalizer(f, id)).toBe(rule(f, id));
        const md = {
          namespace: 'default',
          labels: (labelled ? { [LABEL_INFRA_PROVIDER_ID]: id } : {}) as Record<string, string>,
          finalizers: fins,
        };
        const ours = ourFinalizers(md, id);
        const foreign = foreignFinalizers(md, id);
        expect(ours).toEqual(labelled ? fins.filter((f) => rule(f, id)) : []);
        expect(foreign).toEqual(labelled ? fins.filter((f) => !rule(f, id)) : fins);
        expect(foreign).not.toBe(md.finalizers);
      }),
      { numRuns: 500 },
    );
  });

  it('needs the resource itself to be ours: exact label or our namespace', () => {
    expect(isOurResource({ namespace: NS_INFRA_PROVIDER, labels: label(ID) }, ID)).toBe(true);
    expect(isOurResource({ namespace: NS_INFRA_PROVIDER, labels: label('bare-metal-2') }, ID)).toBe(false);
    expect(isOurResource({ namespace: NS_INFRA_PROVIDER, labels: {} }, ID)).toBe(false);
    expect(isOurResource({ namespace: providerNamespace(ID), labels: {} }, ID)).toBe(true);
    expect(isOurResource({ namespace: providerNamespace('Bare-Metal'), labels: {} }, ID)).toBe(false);
  });
});

describe('profile', () => {
  it('resolves state types: short names into our namespace, full types as is', () => {
    expect(resolveStateType('Machine', 'kubevirt')).toBe('Machine.kubevirt.infraprovider.sidero.dev');
    expect(resolveStateType('VM.kubevirt.infraprovider.sidero.dev', 'kubevirt')).toBe(
      'VM.kubevirt.infraprovider.sidero.dev',
    );
    expect(stateTypeProblem('VM.other.infraprovider.sidero.dev', 'kubevirt')).toMatch(/must end in/);
    expect(stateTypeProblem('Machine', 'kubevirt')).toBeUndefined();
  });

  it('auto: static from the label or InfraMachines, provisioning from MachineRequests', () => {
    expect(resolveProfile('auto', { staticLabel: true, infraMachines: 0, machineRequests: 0 }, ID)).toMatchObject({
      static: true,
      provisioning: false,
    });
    expect(resolveProfile('auto', { staticLabel: false, infraMachines: 0, machineRequests: 2 }, ID)).toMatchObject({
      static: false,
      provisioning: true,
    });
    const both = resolveProfile('auto', { staticLabel: false, infraMachines: 0, machineRequests: 0 }, ID);
    expect(both.namespaceTypes).toContain(providerType('TLSConfig', ID));
    expect(both.namespaceTypes).toContain(providerType('Machine', ID));
  });
});

describe('plan: bare-metal', () => {
  it('releases a deleted machine in rule 5 order: namespace resources, InfraMachineStatus, InfraMachine', async () => {
    const plan = await planFor([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    expect(plan.items).toHaveLength(1);
    const steps = stepNames(plan.items[0]!.ops);
    expect(steps).toEqual([
      `dispose MachineStatus/${U1}`,
      `dispose PowerOperation/${U1}`,
      `dispose RebootStatus/${U1}`,
      `dispose WipeStatus/${U1}`,
      `dispose BMCConfiguration/${U1}`,
      `dispose InfraMachineStatuses/${U1}`,
      `release InfraMachines/${U1}`,
    ]);
    const release = lastOp(plan);
    expect(release.op === 'remove-finalizers' && release.finalizers).toHaveLength(6);
    // Each operation fully specified: the version and phase as read, the owner of each Destroy.
    expect(release).toMatchObject({ op: 'remove-finalizers', version: '1', phase: 'tearingDown', target: { id: U1 } });
    expect(plan.items[0]!.ops.filter((o) => o.op === 'destroy').map((o) => o.op === 'destroy' && o.owner)).toContain(
      `${ID}.MachineStatusController`,
    );
    // the floor: 2 Updates + 5 Destroys + 1 Destroy + 1 Update
    expect(immediateWrites(plan)).toBe(9);
    expect(plan.announce).toBe(true);
  });

  it('puts the wipe first, with the BMC data, only when a wipe strategy is set', async () => {
    const plan = await planFor(bareMetalMachine(ID, U1), { wipe: true });
    const first = plan.items[0]!.ops[0]!;
    expect(first.op).toBe('wipe');
    expect(first.op === 'wipe' && first.bmcConfiguration?.metadata.type).toBe(providerType('BMCConfiguration', ID));
    expect((await planFor(bareMetalMachine(ID, U1))).items[0]!.ops[0]!.op).toBe('remove-finalizers');
  });

  it('never touches a running machine, and reports it with a next step', async () => {
    const plan = await planFor([...bareMetalMachine(ID, U1, { phase: 'running' }), ...bareMetalMachine(ID, U2)]);
    expect(plan.items.map((i) => i.id)).toEqual([U2]);
    expect(plan.running).toEqual([
      expect.objectContaining({
        kind: 'InfraMachine',
        id: U1,
        nextStep: expect.stringContaining(`omnictl delete link ${U1}`),
      }),
    ]);
    for (const s of plan.items.flatMap((i) => i.ops)) if (s.op !== 'wipe') expect(s.target.id).not.toBe(U1);
  });

  it('leaves foreign finalizers: Omni < 1.3 holds the InfraMachineStatus; the run waits, Omni lets go', async () => {
    const plan = await planFor(bareMetalMachine(ID, U1, { omniOnStatus: true }));
    expect(opsOn(plan.items[0]!.ops, T.InfraMachineStatus)).toBe('teardown wait destroy');
    expect(plan.items[0]!.ops.find((o) => o.op === 'wait')).toMatchObject({ finalizers: ['MachineStatusController'] });
    expect(plan.waits).toEqual([]);
    expect(plan.lettingGo[0]!.reason).toMatch(/MachineStatusController lets go by itself/);
  });

  it('removes only our finalizers from an InfraMachine that also carries others', async () => {
    const fins = [
      `${ID}.WipeStatusController`,
      'InfraMachineController',
      'bare-metal-2.WipeStatusController',
      'Bare-Metal.X',
      `${ID}.a.b`,
    ];
    const plan = await planFor(bareMetalMachine(ID, U1, { finalizers: fins }));
    const release = lastOp(plan);
    expect(release.op === 'remove-finalizers' && release.finalizers).toEqual([`${ID}.WipeStatusController`]);
  });

  it("ignores another provider's machines even with our finalizer names", async () => {
    const other = bareMetalMachine('bare-metal-2', U2, { finalizers: [`${ID}.WipeStatusController`] });
    other[0]!.metadata.labels = label('bare-metal-2');
    const plan = await planFor(other);
    expect(plan.items).toEqual([]);
  });

  it('refuses (adds nothing to) a new InfraMachine in whole-provider mode', async () => {
    const plan = await planFor([
      res(NS_INFRA_PROVIDER, T.InfraMachine, U1, { labels: label(ID), owner: 'InfraMachineController' }),
    ]);
    expect(plan.refusals).toEqual([expect.objectContaining({ kind: 'InfraMachine', id: U1, done: true })]);
    expect(plan.items).toEqual([]);
  });

  it('releases a legacy BMCConfig finalizer on a BMCConfig being deleted', async () => {
    const plan = await planFor([
      res(NS_INFRA_PROVIDER, T.BMCConfig, U1, {
        phase: 'tearingDown',
        labels: label(ID),
        finalizers: [`${ID}.BMCConfigurationController`, 'BMCConfigController'],
      }),
    ]);
    expect(plan.items).toEqual([expect.objectContaining({ kind: 'BMCConfig', id: U1 })]);
    const s = plan.items[0]!.ops[0]!;
    expect(s.op === 'remove-finalizers' && s.finalizers).toEqual([`${ID}.BMCConfigurationController`]);
  });

  it("explains an InfraMachine held only by someone else's finalizer", async () => {
    const plan = await planFor([
      res(NS_INFRA_PROVIDER, T.InfraMachine, U1, {
        phase: 'tearingDown',
        labels: label(ID),
        finalizers: ['InfraMachineController'],
      }),
    ]);
    expect(plan.items).toEqual([]);
    expect(plan.blocked[0]).toMatchObject({ kind: 'InfraMachine', id: U1 });
    expect(plan.blocked[0]!.reason).toMatch(/InfraMachineController/);
  });
});

describe('plan: provisioning', () => {
  it('orders ConfigPatchRequests, status (teardown, wait), state, then the request', async () => {
    const plan = await planFor([providerStatus('kubevirt', false), ...provisionedRequest('kubevirt', 'workers-abc')], {
      id: 'kubevirt',
    });
    const steps = stepNames(plan.items[0]!.ops);
    expect(steps).toEqual([
      'dispose ConfigPatchRequests/workers-abc-patch',
      'dispose MachineRequestStatuses/workers-abc',
      'dispose Machine/workers-abc',
      'release MachineRequests/workers-abc',
    ]);
    expect(opsOn(plan.items[0]!.ops, T.MachineRequestStatus)).toBe('teardown wait destroy');
    expect(plan.items[0]!.ops.find((o) => o.op === 'wait' && o.target.type === T.MachineRequestStatus)).toMatchObject({
      finalizers: ['MachineRequestStatusCleanupController'],
    });
    const release = lastOp(plan);
    expect(release.op === 'remove-finalizers' && release.finalizers).toEqual(['kubevirt.ProvisionController']);
    expect(plan.leftBehind.map((n) => n.reason).join(' ')).toMatch(/not deprovisioned/);
  });

  it('says what may be left behind when no state resource is found under the known types', async () => {
    const rs = provisionedRequest('acme', 'r1', { stateType: 'Instance' });
    const plan = await planFor(rs, { id: 'acme' });
    expect(stepNames(plan.items[0]!.ops)).not.toContain('dispose Instance/r1');
    expect(plan.leftBehind.some((n) => n.nextStep.includes('--state-type'))).toBe(true);
    const withType = await planFor(rs, { id: 'acme', stateTypes: ['Instance'] });
    expect(stepNames(withType.items[0]!.ops)).toContain('dispose Instance/r1');
  });

  it('refuses a new MachineRequest (no status) in whole mode, but not in per-machine mode', async () => {
    const rs = provisionedRequest('kubevirt', 'new-1', { phase: 'running', withStatus: false, withCpr: false });
    rs[0]!.metadata.finalizers = [];
    const whole = await planFor(rs, { id: 'kubevirt' });
    expect(whole.refusals).toEqual([expect.objectContaining({ kind: 'MachineRequest', id: 'new-1', done: false })]);
    expect(whole.announce).toBe(true);
    const per = await planFor(rs, { id: 'kubevirt', machines: ['new-1'] });
    expect(per.refusals).toEqual([]);
    expect(per.announce).toBe(false);
  });

  it('reports a running, provisioned request as in use', async () => {
    const plan = await planFor(provisionedRequest('kubevirt', 'r1', { phase: 'running' }), { id: 'kubevirt' });
    expect(plan.items).toEqual([]);
    expect(plan.running[0]).toMatchObject({
      kind: 'MachineRequest',
      id: 'r1',
      nextStep: expect.stringContaining('MachineRequestSet workers'),
    });
  });

  it('finds a request by the machine UUID its status names', async () => {
    const plan = await planFor(provisionedRequest('kubevirt', 'r1', { machineUuid: U1 }), {
      id: 'kubevirt',
      machines: [U1],
    });
    expect(plan.items.map((i) => i.id)).toEqual(['r1']);
    expect(plan.notFound).toEqual([]);
  });

  it("a request held only by Omni's ClusterMachineRequestStatusController is not blocked: Omni lets go", async () => {
    const rs = provisionedRequest('kubevirt', 'r1', { withStatus: false, withCpr: false });
    rs[0]!.metadata.finalizers = ['ClusterMachineRequestStatusController'];
    const plan = await planFor(rs, { id: 'kubevirt' });
    expect(plan.blocked).toEqual([]);
    expect(plan.lettingGo).toEqual([
      expect.objectContaining({
        kind: 'MachineRequest',
        id: 'r1',
        reason: expect.stringMatching(/lets go as soon as no other finalizer is on the request/),
      }),
    ]);
  });
});

describe('plan: per-machine mode', () => {
  it('releases only the named machine and writes nothing else', async () => {
    const rs = [
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1),
      ...bareMetalMachine(ID, U2),
      res(NS_INFRA_PROVIDER, T.InfraMachineStatus, 'orphan', { labels: label(ID) }),
    ];
    const plan = await planFor(rs, { machines: [U1, 'nope'] });
    expect(plan.items.map((i) => i.id)).toEqual([U1]);
    expect(plan.announce).toBe(false);
    expect(plan.deregistration.status).toBe('per-machine');
    expect(plan.notFound).toEqual(['nope']);
  });
});

describe('plan: leftovers and deregistration', () => {
  it('cleans leftovers of machines that are gone, but not TLSConfig before deregistering', async () => {
    const ns = providerNamespace(ID);
    const rs = [
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
      res(NS_INFRA_PROVIDER, T.InfraMachineStatus, U1, {
        labels: label(ID),
        owner: `${ID}.InfraMachineStatusController`,
      }),
      res(ns, providerType('WipeStatus', ID), U1, { owner: `${ID}.WipeStatusController` }),
      res(ns, providerType('TLSConfig', ID), 'tls-config'),
    ];
    const plan = await planFor(rs);
    expect(plan.items.map((i) => `${i.kind}/${i.id}`).sort()).toEqual([`leftover/${U1}`, `leftover/${U1}`]);
    expect(plan.deregistration.status).toBe('not-ready');
  });

  it('is ready to deregister once nothing of the ID remains, statuses last', async () => {
    const ns = providerNamespace(ID);
    const plan = await planFor([
      providerStatus(ID, true),
      healthStatus(ID, 0, 'stub-provider: x'),
      res(ns, providerType('TLSConfig', ID), 'tls-config'),
    ]);
    expect(plan.deregistration.status).toBe('ready');
    const d = plan.deregistration.item!;
    expect(d.check).toMatchObject({ op: 'check-live-provider', target: { type: T.InfraProviderHealthStatus, id: ID } });
    expect(d.cleanup.flatMap((c) => stepNames(c.ops))).toEqual(['dispose TLSConfig/tls-config']);
    expect(stepNames(d.ops)).toEqual([
      `dispose InfraProviderHealthStatuses/${ID}`,
      `dispose InfraProviderStatuses/${ID}`,
    ]);
    expect(plan.deregistration.lastStep).toBe(`omnictl infraprovider delete ${ID}`);
    expect(plan.deregistration.warning).toMatch(/MachineRequestSet/);
  });

  it('is not ready while a Machine carries the ID, as label (1.4+) or annotation (before)', async () => {
    for (const asAnnotation of [false, true]) {
      const plan = await planFor([providerStatus(ID, true), omniMachine(ID, U1, { asAnnotation })]);
      expect(plan.deregistration.status).toBe('not-ready');
      expect(plan.blocked[0]).toMatchObject({
        kind: 'Machine',
        id: U1,
        nextStep: expect.stringContaining(`omnictl delete link ${U1}`),
      });
    }
    const other = await planFor([providerStatus(ID, true), omniMachine('bare-metal-2', U1)]);
    expect(other.deregistration.status).toBe('ready');
  });

  it('does nothing when everything is already gone, and --no-deregister disables it', async () => {
    const plan = await planFor([]);
    expect(plan.deregistration.status).toBe('done');
    expect(immediateWrites(plan)).toBe(0);
    expect(plan.announce).toBe(false);
    expect((await planFor([providerStatus(ID, true)], { deregister: false })).deregistration.status).toBe('disabled');
  });

  it('says in blockedBy, by type, what stands in the way; --wait with --no-deregister decides on it', async () => {
    const inUse = await planFor([providerStatus(ID, true), ...bareMetalMachine(ID, U2, { phase: 'running' })], {
      deregister: false,
    });
    expect(inUse.deregistration).toMatchObject({ status: 'disabled', blockedBy: [T.InfraMachine] });
    const machine = await planFor([providerStatus(ID, true), omniMachine(ID, U1)], { deregister: false });
    expect(machine.deregistration.blockedBy).toEqual([T.Machine]);
    const none = await planFor([providerStatus(ID, true)], { deregister: false });
    expect(none.deregistration.blockedBy).toEqual([]);
    // The reasons are for people: rewording one changes nothing that is decided.
    const reworded = { ...none.deregistration, reasons: ['InfraMachine MachineRequest Machine '] };
    expect(finishedWaiting({ ...none, deregistration: reworded }, true, false)).toBe(true);
    expect(finishedWaiting({ ...inUse, items: [], running: [] }, true, false)).toBe(false);
    const silent = { ...inUse.deregistration, reasons: [] };
    expect(finishedWaiting({ ...inUse, items: [], running: [], deregistration: silent }, true, false)).toBe(false);
  });

  it('names a request refused by an earlier run as already refused', async () => {
    const rs = provisionedRequest('kubevirt', 'r1', {
      phase: 'running',
      stage: MachineRequestStage.FAILED,
      withCpr: false,
    });
    const [{ encodeSpec }, { MachineRequestStatusSpec }] = await Promise.all([
      import('../../../src/omni-api/specs/codec.js'),
      import('../../../src/omni-api/specs/messages.js'),
    ]);
    rs[1]!.spec.protoSpec = encodeSpec(MachineRequestStatusSpec, {
      id: '',
      stage: 3,
      error: 'stub-provider: refused',
      status: '',
    });
    const plan = await planFor(rs, { id: 'kubevirt' });
    expect(plan.refusals).toEqual([expect.objectContaining({ id: 'r1', done: true })]);
    expect(plan.running).toEqual([]);
  });
});

describe("plan: what Omni's own finalizers will do (only what the provider can read predicts a wait)", () => {
  const KV = 'kubevirt';
  const notes = (plan: Plan) => ({
    waits: plan.waits.map((n) => `${n.kind}/${n.id}`),
    lettingGo: plan.lettingGo.map((n) => `${n.kind}/${n.id}`),
    unseen: plan.unseen.map((n) => `${n.kind}/${n.id}`),
  });

  it('a scaled-down request whose status names no machine: Omni lets go of status, patch and request', async () => {
    const plan = await planFor([providerStatus(KV, false), ...provisionedRequest(KV, 'w-1', { machineUuid: '' })], {
      id: KV,
    });
    expect(notes(plan)).toEqual({
      waits: [],
      lettingGo: ['ConfigPatchRequests/w-1-patch', 'MachineRequestStatuses/w-1', 'MachineRequests/w-1'],
      unseen: [],
    });
    const status = plan.lettingGo.find((n) => n.kind === 'MachineRequestStatuses')!;
    expect(status.reason).toMatch(
      /MachineRequestStatusCleanupController: .*lets go by itself: the status names no machine/,
    );
    expect(status.reason).not.toMatch(/holds it until/);
    expect(plan.lettingGo.find((n) => n.kind === 'MachineRequests')!.reason).toMatch(
      new RegExp(
        String.raw`^once our finalizers are removed: ClusterMachineRequestStatusController: .*lets go ` +
          String.raw`as soon as no other finalizer is on the request`,
      ),
    );
    // What this plan releases and only Omni's self-releasing finalizers keep: deregistration follows.
    expect(plan.deregistration.status).toBe('after-releases');
  });

  it('a status naming a machine gone from Omni: Omni lets go (MachineSetNode, ClusterMachine went first)', async () => {
    const plan = await planFor([providerStatus(KV, false), ...provisionedRequest(KV, 'w-1', { machineUuid: U1 })], {
      id: KV,
    });
    expect(notes(plan).lettingGo).toContain('MachineRequestStatuses/w-1');
    expect(plan.lettingGo.find((n) => n.kind === 'MachineRequestStatuses')!.reason).toContain(
      `no Machine ${U1} of this provider is left in Omni`,
    );
  });

  it('a status naming a machine still in Omni: unseen (needs Reader role), never predicted as a wait', async () => {
    const plan = await planFor(
      [
        providerStatus(KV, false),
        ...provisionedRequest(KV, 'w-1', { machineUuid: U1 }),
        omniMachine(KV, U1, { request: 'w-1' }),
      ],
      { id: KV },
    );
    expect(notes(plan)).toEqual({
      waits: [],
      lettingGo: ['ConfigPatchRequests/w-1-patch', 'MachineRequests/w-1'],
      unseen: ['MachineRequestStatuses/w-1'],
    });
    const n = plan.unseen[0]!;
    expect(n.reason).toMatch(
      new RegExp(
        `waits while machine ${U1} is in a cluster .*machine ${U1} is still in Omni, and this provider's account ` +
          `cannot read that \\(it needs the Reader role\\), so whether Omni waits cannot be seen from here`,
      ),
    );
    expect(n.nextStep).toContain(`omnictl get machinesetnodes,clustermachines ${U1}`);
    // The run still waits for it before the Destroy (rule 5): only the prediction changed.
    expect(opsOn(plan.items[0]!.ops, T.MachineRequestStatus)).toBe('teardown wait destroy');
    expect(plan.items[0]!.ops.find((o) => o.op === 'wait' && o.target.type === T.MachineRequestStatus)).toMatchObject({
      finalizers: ['MachineRequestStatusCleanupController'],
    });
  });

  it('Machines unreadable: whether the machine is still in Omni is said to be unknown too', async () => {
    const fake = new FakeState([providerStatus(KV, false), ...provisionedRequest(KV, 'w-1', { machineUuid: U1 })]);
    fake.fail(
      'list',
      () => new PermissionDeniedError('no access is permitted'),
      1,
      (p) => p.type === T.Machine,
    );
    const snap = await takeSnapshot(fake, { providerId: KV, profile: 'auto', stateTypes: [] });
    const plan = buildPlan(snap, { providerId: KV, machines: [], deregister: true, wipe: false });
    expect(plan.unseen.map((n) => n.kind)).toEqual(['MachineRequestStatuses']);
    expect(plan.unseen[0]!.reason).toContain(`whether machine ${U1} is still in Omni could not be read either`);
  });

  it('another finalizer on the request: ClusterMachineRequestStatusController waits; no deregistration', async () => {
    const rs = provisionedRequest(KV, 'w-1', { withCpr: false });
    rs[0]!.metadata.finalizers.push('other.ProvisionController');
    const plan = await planFor([providerStatus(KV, false), ...rs], { id: KV });
    expect(notes(plan).waits).toEqual(['MachineRequests/w-1']);
    expect(plan.waits[0]!.reason).toContain(
      "ClusterMachineRequestStatusController: Omni's ClusterMachineRequestStatusController holds it until " +
        'other.ProvisionController is gone',
    );
    expect(plan.waits[0]!.reason).toContain(
      'other.ProvisionController: other.ProvisionController belongs to another provider',
    );
    expect(plan.deregistration.status).toBe('not-ready');
  });

  it('an Omni finalizer stub-provider does not know, left on a released machine: unseen, not a wait', async () => {
    const rs = bareMetalMachine(ID, U1);
    rs[0]!.metadata.finalizers.push('MachineSetNodeController');
    const plan = await planFor([providerStatus(ID, true), ...rs]);
    expect(notes(plan)).toEqual({ waits: [], lettingGo: [], unseen: ['InfraMachines/' + U1] });
    expect(plan.deregistration.status).toBe('not-ready');
  });

  it('nothing of ours left: blocked only when the hold is not Omni letting go by itself', async () => {
    const rs = provisionedRequest(KV, 'r1', { withStatus: false, withCpr: false });
    rs[0]!.metadata.finalizers = ['ClusterMachineRequestStatusController', 'other.ProvisionController'];
    const plan = await planFor(rs, { id: KV });
    expect(plan.lettingGo).toEqual([]);
    expect(plan.blocked).toEqual([
      expect.objectContaining({
        kind: 'MachineRequest',
        id: 'r1',
        reason: expect.stringMatching(
          new RegExp(
            String.raw`^being deleted, nothing of ours left on it; ` +
              String.raw`ClusterMachineRequestStatusController: .*holds it until ` +
              String.raw`other.ProvisionController is gone`,
          ),
        ),
      }),
    ]);
  });
});

describe('explain: predictHold', () => {
  const f = (remaining: string[], extra: Partial<HoldFacts> = {}): HoldFacts => ({
    providerId: 'kv',
    remaining,
    ...extra,
  });
  it.each([
    ['ClusterMachineRequestStatusController', f(['ClusterMachineRequestStatusController']), 'lets-go'],
    ['ClusterMachineRequestStatusController', f(['ClusterMachineRequestStatusController', 'X']), 'waits'],
    [
      'MachineRequestStatusCleanupController',
      f(['MachineRequestStatusCleanupController'], { statusMachine: '' }),
      'lets-go',
    ],
    [
      'MachineRequestStatusCleanupController',
      f(['MachineRequestStatusCleanupController'], { statusMachine: 'm', machine: 'absent' }),
      'lets-go',
    ],
    [
      'MachineRequestStatusCleanupController',
      f(['MachineRequestStatusCleanupController'], { statusMachine: 'm', machine: 'present' }),
      'unseen',
    ],
    [
      'MachineRequestStatusCleanupController',
      f(['MachineRequestStatusCleanupController'], { statusMachine: 'm', machine: 'unreadable' }),
      'unseen',
    ],
    // Its spec is not readable.
    ['MachineRequestStatusCleanupController', f(['MachineRequestStatusCleanupController']), 'unseen'],
    ['ConfigPatchRequestController', f(['ConfigPatchRequestController']), 'lets-go'],
    ['MachineStatusController', f(['MachineStatusController']), 'lets-go'],
    ['BMCConfigController', f(['BMCConfigController']), 'unseen'],
    ['SomethingNewController', f(['SomethingNewController']), 'unseen'],
    ['other.ProvisionController', f(['other.ProvisionController']), 'waits'],
    ['kv.Leftover', f(['kv.Leftover']), 'waits'],
  ] as const)('%s (%j): %s', (fin, facts, want) => {
    expect(predictHold(fin, facts).prediction).toBe(want);
  });

  it('a finalizer named like a member of every object (constructor, toString) is an unknown one of Omni', () => {
    for (const fin of ['constructor', 'toString', '__proto__']) {
      const h = predictHold(fin, f([fin]));
      expect(h.prediction, fin).toBe('unseen');
      expect(h.why, fin).not.toContain('undefined');
      expect(h.nextStep, fin).toBe('wait for Omni, or check its logs for this controller');
    }
  });

  it('a resource waits if one hold waits, is unseen if one is, and lets go only if all do', () => {
    const hs = (...fs: string[]) => predictHolds(f(fs));
    expect(predictionOf(hs('ConfigPatchRequestController'))).toBe('lets-go');
    expect(predictionOf(hs('ConfigPatchRequestController', 'SomethingNewController'))).toBe('unseen');
    expect(predictionOf(hs('SomethingNewController', 'other.X'))).toBe('waits');
  });
});
