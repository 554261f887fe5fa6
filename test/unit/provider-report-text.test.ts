// What an operator reads: the text summary and the JSON report of plan and run. They must make
// sense without this project's research notes (docs the operator does not have), and say what
// Omni's version means for the last step.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import { bareMetalMachine, healthStatus, omniMachine, providerStatus, provisionedRequest, res } from '../helpers/provider-fixtures.js';
import { takeSnapshot } from '../../src/provider/snapshot.js';
import { buildPlan } from '../../src/provider/plan.js';
import type { Plan } from '../../src/provider/plan.js';
import { planReport, renderText, runReport } from '../../src/provider/report.js';
import type { ItemOutcome, ReconcileResult } from '../../src/provider/reconcile.js';
import type { Resource } from '../../src/omni-client/resource.js';
import { NS_EPHEMERAL, T, providerNamespace, providerType } from '../../src/omni-client/resource.js';
import { SysVersionSpec, encodeSpec } from '../../src/omni-client/specs.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';

function sysVersion(v: string): Resource {
  return res(NS_EPHEMERAL, T.SysVersion, 'current', { spec: encodeSpec(SysVersionSpec, { backend_version: v, instance_name: 'test', backend_api_version: 1 }) });
}

async function reportOf(resources: Resource[], o: { machines?: string[]; id?: string } = {}) {
  const id = o.id ?? ID;
  const snap = await takeSnapshot(new FakeState(resources), { providerId: id, profile: 'auto', stateTypes: [] });
  const rep = planReport(buildPlan(snap, { providerId: id, machines: o.machines ?? [], deregister: true, wipe: false }), { version: 'test' });
  return { rep, text: renderText(rep), json: JSON.stringify(rep) };
}

/** Shapes that exercise every explanation the report can give. */
const SHAPES: [string, Resource[], { machines?: string[]; id?: string }?][] = [
  ['deregistration ready (Omni 1.4)', [sysVersion('v1.4.2'), providerStatus(ID, true), healthStatus(ID, 0, 'stub-provider: x'), res(providerNamespace(ID), providerType('TLSConfig', ID), 'tls-config')]],
  ['deregistration ready (version unknown)', [providerStatus(ID, true)]],
  ['machines being deleted, Omni finalizers, running machines', [
    sysVersion('v1.3.4'), providerStatus(ID, true),
    ...bareMetalMachine(ID, U1, { omniOnStatus: true }), ...bareMetalMachine(ID, U2, { phase: 'running' }), omniMachine(ID, U2),
  ]],
  ['provisioning requests', [sysVersion('v1.4.2'), ...provisionedRequest('kubevirt', 'req-1'), ...provisionedRequest('kubevirt', 'req-2', { phase: 'running' })], { id: 'kubevirt' }],
  ['per-machine mode', [sysVersion('v1.4.2'), ...bareMetalMachine(ID, U1)], { machines: [U1, 'no-such-machine'] }],
];

describe('user-facing text cites no internal research docs', () => {
  it.each(SHAPES)('%s', async (_name, resources, o) => {
    const { text, json } = await reportOf(resources, o);
    expect(text).not.toMatch(/\b[\w-]+\.md\b/);
    expect(json).not.toMatch(/\b[\w-]+\.md\b/);
  });
});

describe('deregistration in the plan', () => {
  it('follows the releases of this very run instead of being "not-ready" because of them', async () => {
    const { rep, text } = await reportOf([sysVersion('v1.3.4'), providerStatus(ID, true), ...bareMetalMachine(ID, U1), ...bareMetalMachine(ID, U2)]);
    expect(rep.deregistration.status).toBe('after-releases');
    expect(text).toMatch(/^Deregistration: .*follows once the releases above are done/m);
    expect(text).not.toMatch(/not-ready|still exist/);
    expect(text).toContain(`Last step, for an admin: omnictl infraprovider delete ${ID}`);
  });

  it('the same for MachineRequests of a provisioning provider', async () => {
    const { rep } = await reportOf([sysVersion('v1.4.2'), ...provisionedRequest('kubevirt', 'req-1', { withCpr: false })], { id: 'kubevirt' });
    // Omni's ClusterMachineRequestStatusController stays on this request after our release, but lets
    // go as soon as it is alone on it: Omni then destroys the request.
    expect(rep.deregistration.status).toBe('after-releases');
    const held = provisionedRequest('kubevirt', 'req-3', { withCpr: false });
    held[0]!.metadata.finalizers.push('other.ProvisionController');
    const { rep: rep3 } = await reportOf([sysVersion('v1.4.2'), ...held], { id: 'kubevirt' });
    // Another provider's finalizer stays on it: nothing lets it go, so deregistration cannot follow.
    expect(rep3.deregistration.status).toBe('not-ready');
    const mine = provisionedRequest('kubevirt', 'req-2', { withCpr: false });
    mine[0]!.metadata.finalizers = ['kubevirt.ProvisionController'];
    const { rep: rep2, text } = await reportOf([sysVersion('v1.4.2'), ...mine], { id: 'kubevirt' });
    expect(rep2.deregistration.status).toBe('after-releases');
    expect(text).toMatch(/1 MachineRequest\(s\) of kubevirt/);
  });

  it('stays "not-ready", with the reason, when a running machine or a Machine with the ID blocks it', async () => {
    const running = await reportOf([providerStatus(ID, true), ...bareMetalMachine(ID, U1), ...bareMetalMachine(ID, U2, { phase: 'running' })]);
    expect(running.rep.deregistration).toMatchObject({ status: 'not-ready', reasons: [`1 InfraMachine(s) of ${ID} still exist`] });
    expect(running.text).toMatch(/^Deregistration: not-ready — 1 InfraMachine\(s\) of bare-metal still exist/m);
    const machine = await reportOf([providerStatus(ID, true), ...bareMetalMachine(ID, U1), omniMachine(ID, '33333333-3333-3333-3333-333333333333')]);
    expect(machine.rep.deregistration.status).toBe('not-ready');
    expect(machine.text).toMatch(/^Deregistration: not-ready — Machine 33333333/m);
  });
});

describe('untrusted text in the summary (design rule 13)', () => {
  const FORGED = '\x1b[2J\x1b[H\r\nDeregistration: deregistered\nstub-provider: done, nothing to do [OK]\u202e';
  it('IDs, finalizers and Omni\'s messages are escaped: no control character, no forged line', async () => {
    const rid = `req-1${FORGED}`;
    const { rep } = await reportOf([sysVersion('v1.4.2'), ...provisionedRequest('kubevirt', rid)], { id: 'kubevirt' });
    rep.failed.push({ kind: 'InfraMachine', id: `m${FORGED}`, reason: `Omni answered: ${FORGED}`, nextStep: `run again${FORGED}` });
    rep.deregistration.reasons.push(`blocked by ${FORGED}`);
    const text = renderText(rep);
    expect(text).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/); // eslint-disable-line no-control-regex
    const lines = text.split('\n');
    expect(lines.filter((l) => /^\s*(Deregistration: deregistered|stub-provider: done)/.test(l))).toEqual([]);
    expect(text).toContain('req-1\\x1b[2J\\x1b[H\\r\\nDeregistration: deregistered\\nstub-provider: done, nothing to do [OK]\\u202e');
    // The report object itself is left as it was: JSON output keeps the real values.
    expect(rep.failed.at(-1)?.id).toBe(`m${FORGED}`);
  });
});

describe('what Omni\'s own finalizers will do, in the plan', () => {
  it('a request scaled down before its machine joined: "Omni lets go by itself", no "Will wait for Omni"', async () => {
    const { rep, text } = await reportOf([sysVersion('v1.9.3'), providerStatus('kubevirt', false), ...provisionedRequest('kubevirt', 'req-1')], { id: 'kubevirt' });
    expect(rep.waits).toEqual([]);
    expect(rep.lettingGo.map((e) => e.kind)).toEqual(['ConfigPatchRequests', 'MachineRequestStatuses', 'MachineRequests']);
    expect(text).toMatch(/^Omni lets go by itself \(3\):$/m);
    expect(text).not.toMatch(/Will wait for Omni|holds it until the MachineSetNode/);
  });

  it('a request whose machine is still in Omni: said plainly that it cannot be seen, and what decides it', async () => {
    const { rep, text } = await reportOf([sysVersion('v1.9.3'), providerStatus('kubevirt', false), ...provisionedRequest('kubevirt', 'req-1', { machineUuid: U1 }), omniMachine('kubevirt', U1)], { id: 'kubevirt' });
    expect(rep.unseen).toEqual([expect.objectContaining({ kind: 'MachineRequestStatuses', id: 'req-1' })]);
    expect(text).toMatch(/^Cannot be seen with the provider's account \(Omni decides\) \(1\):$/m);
    expect(text).toContain(`waits while machine ${U1} is in a cluster`);
    expect(text).not.toMatch(/Will wait for Omni/);
  });
});

describe('the run report: the settle after the last write, and the header', () => {
  const KV = 'kubevirt';
  async function planOf(resources: Resource[]) {
    const snap = await takeSnapshot(new FakeState(resources), { providerId: KV, profile: 'auto', stateTypes: [] });
    return buildPlan(snap, { providerId: KV, machines: [], deregister: true, wipe: false });
  }
  const result = (over: Partial<ReconcileResult>, first: Plan, last: Plan): ReconcileResult => ({
    firstPlan: first, lastPlan: last, outcomes: [], refusals: [], announced: true, heartbeats: 1, deregistered: false, declined: false,
    timedOut: false, interrupted: false, passes: 2, settle: { ms: 5000, items: 0, gone: 0, held: 0 }, ...over,
  });

  it('the header shows the profile of the first pass, not of a later one that no longer sees what it released', async () => {
    const first = await planOf([providerStatus(KV, false), ...provisionedRequest(KV, 'r1')]);
    const last = await planOf([providerStatus(KV, false)]);
    expect(first.profile.reason).not.toBe(last.profile.reason);
    const rep = runReport(result({}, first, last), { version: 'test', writes: {} });
    expect(rep.profile.reason).toBe(first.profile.reason);
    expect(renderText(rep)).toContain(`; profile ${first.profile.reason}`);
  });

  it('released and still held: Blocked says which came last; gone within the settle time: only Released', async () => {
    const plan = await planOf([providerStatus(KV, false)]);
    const held: ItemOutcome = { kind: 'MachineRequest', id: 'r1', status: 'released', counts: true, heldBy: ['ClusterMachineRequestStatusController'], reason: 'ClusterMachineRequestStatusController: Omni\'s ClusterMachineRequestStatusController holds it until X is gone, then lets go', nextStep: 'do something', settle: { ms: 5000, outcome: 'held' } };
    const gone: ItemOutcome = { kind: 'MachineRequest', id: 'r2', status: 'released', counts: true, settle: { ms: 5000, outcome: 'gone' } };
    const rep = runReport(result({ outcomes: [held, gone], settle: { ms: 5000, items: 2, gone: 1, held: 1 } }, plan, plan), { version: 'test', writes: {} });
    expect(rep.released.map((x) => x.id)).toEqual(['r1', 'r2']);
    expect(rep.blocked).toEqual([{ kind: 'MachineRequest', id: 'r1', reason: `released by stub-provider; still held after 5 s by ${held.reason}`, nextStep: 'do something', counts: false }]);
    expect(rep.settle).toEqual({ ms: 5000, items: 2, gone: 1, held: 1 });
    const text = renderText(rep);
    expect(text).toContain('Watched for up to 5 s after the last write (--settle) the 2 item(s) others still held: 1 gone, 1 still held.');
    expect(text).toMatch(/^ {2}- MachineRequest r1: released by stub-provider; still held after 5 s by ClusterMachineRequestStatusController/m);
    expect(text).not.toMatch(/MachineRequest r2:/);
  });

  it('--settle 0: not watched, and both the entry and the summary say so', async () => {
    const plan = await planOf([providerStatus(KV, false)]);
    const held: ItemOutcome = { kind: 'MachineRequest', id: 'r1', status: 'released', counts: true, heldBy: ['ClusterMachineRequestStatusController'], reason: 'ClusterMachineRequestStatusController: lets go', nextStep: 'nothing to do', settle: { ms: 0, outcome: 'not-watched' } };
    const rep = runReport(result({ outcomes: [held], settle: { ms: 0, items: 1, gone: 0, held: 0 } }, plan, plan), { version: 'test', writes: {} });
    expect(rep.blocked[0]!.reason).toBe('released by stub-provider; still held when last read by ClusterMachineRequestStatusController: lets go (--settle 0: not watched after the last write)');
    expect(renderText(rep)).toContain('Not watched after the last write (--settle 0): 1 item(s) others still held are reported as last read.');
  });

  it('a deletion left to Omni and still held after the settle time is Blocked as such, not as released', async () => {
    const plan = await planOf([providerStatus(KV, false)]);
    const left: ItemOutcome = { kind: 'MachineRequest', id: 'r1', status: 'blocked', counts: false, heldBy: ['ClusterMachineRequestStatusController'], reason: 'ClusterMachineRequestStatusController: x', nextStep: 'y', settle: { ms: 2000, outcome: 'held' } };
    const rep = runReport(result({ outcomes: [left] }, plan, plan), { version: 'test', writes: {} });
    expect(rep.blocked).toEqual([{ kind: 'MachineRequest', id: 'r1', reason: 'being deleted, nothing of ours left on it; still held after 2 s by ClusterMachineRequestStatusController: x', nextStep: 'y', counts: false }]);
    expect(rep.released).toEqual([]);
  });
});
