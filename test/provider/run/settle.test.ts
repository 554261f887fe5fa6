// Omni's own controllers settle before the report (docs/omni-behaviour.md, "What Omni's own controllers
// wait for, and what the provider can see of it"), against the simulated Omni
// at the two versions the team ran for real (1.3.4, 1.9.3), through the run and plan commands' code:
// the flows a real Omni showed (a MachineRequest stuck after its set was scaled down, with no
// MachineSetNode; a static provider's InfraMachine stuck after `omnictl delete link`) end with
// nothing blocked that Omni let go by itself; what does stay held is reported held by the named
// controller after the settle time, with the next step; `--settle 0` says it did not watch.

import { afterEach, describe, expect, it } from 'vitest';
import type { Sim } from '../../../src/omni-sim/index.js';
import { INTERNAL } from '../../../src/omni-sim/api.js';
import type { Pointer, Resource } from '../../../src/omni-api/resource.js';
import { NS_DEFAULT, T, providerNamespace } from '../../../src/omni-api/resource.js';
import { renderText } from '../../../src/provider/report/text.js';
import { planIn, providerSim, runIn } from '../../helpers/cli-config.js';
import {
  bareMetalMachine,
  omniMachine,
  providerStatus,
  provisionedRequest,
  res,
} from '../../helpers/provider-fixtures.js';

const U1 = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';
const KV = 'kubevirt';
const BM = 'bare-metal';
const CLUSTER_MACHINE = 'ClusterMachines.omni.sidero.dev';

const sims: Sim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function sim(version: string, id: string, resources: Resource[]): Promise<Sim> {
  const s = await providerSim(version, resources, { ids: [id] });
  sims.push(s);
  return s;
}

const find = (s: Sim, p: Pointer) => s.store.peek(p);
const byType = (s: Sim, type: string) => s.store.all().filter((r) => r.metadata.type === type);

/** What the provider did while it ran: its finalizer and its resources on each request Omni made. */
function provision(s: Sim, requests: Resource[], machineUuid = ''): void {
  for (const r of requests) {
    const cur = s.store.get(INTERNAL, r.metadata);
    cur.metadata.finalizers.push(`${KV}.ProvisionController`);
    s.store.update(INTERNAL, cur, cur.metadata.owner);
    const [, ...outputs] = provisionedRequest(KV, r.metadata.id, { machineUuid, omniOnStatus: false, set: 'workers' });
    for (const o of outputs) {
      o.metadata.finalizers = [];
      s.store.create(INTERNAL, o, o.metadata.owner);
    }
  }
}

describe.each(['1.3.4', '1.9.3'])('Omni %s', (version) => {
  it('a MachineRequest stuck after its set scaled down, no MachineSetNode: Omni lets go, nothing blocked', async () => {
    const s = await sim(version, KV, [providerStatus(KV, false)]);
    const { requests } = s.controllers!.createMachineRequestSet({ id: 'workers', providerId: KV, machineCount: 2 });
    provision(s, requests);
    await s.controllers!.idle();
    // Omni's own finalizers, as a real Omni puts them on.
    expect(find(s, requests[0]!.metadata)?.metadata.finalizers.slice().sort()).toEqual([
      'ClusterMachineRequestStatusController',
      `${KV}.ProvisionController`,
    ]);
    expect(byType(s, T.MachineRequestStatus).map((r) => r.metadata.finalizers)).toEqual([
      ['MachineRequestStatusCleanupController'],
      ['MachineRequestStatusCleanupController'],
    ]);
    // The provider stops; the set is scaled down: both requests are torn down and stay stuck on ours.
    s.controllers!.scaleDown('workers', 0);
    await s.controllers!.idle();
    expect(byType(s, T.MachineRequest).map((r) => r.metadata.phase)).toEqual(['tearingDown', 'tearingDown']);

    const plan = await planIn(s, KV);
    expect(plan.waits).toEqual([]);
    expect(plan.unseen).toEqual([]);
    expect(plan.lettingGo.map((n) => n.kind).sort()).toEqual([
      'ConfigPatchRequests',
      'ConfigPatchRequests',
      'MachineRequestStatuses',
      'MachineRequestStatuses',
      'MachineRequests',
      'MachineRequests',
    ]);
    expect(renderText(plan)).not.toMatch(/Will wait for Omni|MachineSetNode .*gone/);

    const rep = await runIn(s, KV);
    expect(rep).toMatchObject({ exitCode: 0, result: 'done', blocked: [], deregistration: { status: 'deregistered' } });
    expect(rep.released.map((r) => r.id).sort()).toEqual(requests.map((r) => r.metadata.id).sort());
    expect(rep.settle).toEqual({ ms: 5000, items: 2, gone: 2, held: 0 });
    // The header: what the first pass found, not the last pass (which saw no requests any more).
    expect(rep.profile.reason).toBe('auto: 2 MachineRequest(s) exist');
    const text = renderText(rep);
    expect(text).not.toMatch(/^Blocked/m);
    expect(text).toMatch(/^Deregistration: deregistered$/m);
    expect(byType(s, T.MachineRequest)).toEqual([]);
  });

  it("static provider's InfraMachine stuck after `omnictl delete link`: released, unblocked, Link gone", async () => {
    const s = await sim(version, BM, [providerStatus(BM, true)]);
    s.controllers!.registerStaticMachine(BM, U1, { accepted: true });
    const [im, ...outputs] = bareMetalMachine(BM, U1);
    const cur = s.store.get(INTERNAL, im!.metadata);
    cur.metadata.finalizers.push(...im!.metadata.finalizers);
    s.store.update(INTERNAL, cur, cur.metadata.owner);
    for (const o of outputs) s.store.create(INTERNAL, o, o.metadata.owner);
    s.controllers!.deleteMachine(U1);
    await s.controllers!.idle();
    expect(find(s, im!.metadata)?.metadata.phase).toBe('tearingDown');

    const plan = await planIn(s, BM);
    expect([...plan.waits, ...plan.unseen, ...plan.blocked]).toEqual([]);
    const rep = await runIn(s, BM);
    expect(rep).toMatchObject({ exitCode: 0, result: 'done', blocked: [], deregistration: { status: 'deregistered' } });
    expect(rep.released).toEqual([expect.objectContaining({ kind: 'InfraMachine', id: U1 })]);
    await s.controllers!.idle();
    expect(find(s, im!.metadata)).toBeUndefined();
    expect(find(s, { namespace: NS_DEFAULT, type: T.Link, id: U1 })).toBeUndefined();
    expect(s.store.all().filter((r) => r.metadata.namespace === providerNamespace(BM))).toEqual([]);
  });

  it("a machine in a cluster holds its request's status: unseen by plan; held, released once it left", async () => {
    const rs = provisionedRequest(KV, 'w-1', { machineUuid: U1, withCpr: false });
    const cm = res(NS_DEFAULT, CLUSTER_MACHINE, U1, { owner: 'MachineSetStatusController' });
    const s = await sim(version, KV, [providerStatus(KV, false), ...rs, omniMachine(KV, U1, { request: 'w-1' }), cm]);

    const plan = await planIn(s, KV);
    expect(plan.waits).toEqual([]);
    expect(plan.unseen).toEqual([
      expect.objectContaining({
        kind: 'MachineRequestStatuses',
        id: 'w-1',
        reason: expect.stringContaining('cannot be seen from here'),
      }),
    ]);

    const rep = await runIn(s, KV, ['--step-timeout', '1s']);
    expect(rep).toMatchObject({ exitCode: 5, result: 'incomplete', released: [] });
    const b = rep.blocked.find((x) => x.kind === 'MachineRequest')!;
    expect(b).toMatchObject({ id: 'w-1', counts: true });
    expect(b.reason).toMatch(
      new RegExp(
        String.raw`MachineRequestStatuses\.omni\.sidero\.dev\/w-1 still held after 1 s by ` +
          String.raw`MachineRequestStatusCleanupController: .*waits while machine 9b2f6a10-.* is in a ` +
          String.raw`cluster`,
      ),
    );
    expect(b.nextStep).toContain(`omnictl get machinesetnodes,clustermachines ${U1}`);
    expect(find(s, rs[0]!.metadata)?.metadata.finalizers).toContain(`${KV}.ProvisionController`);

    // The machine leaves its cluster: Omni lets go, and the next run releases the request.
    s.store.destroy(INTERNAL, cm.metadata, 'MachineSetStatusController');
    await s.controllers!.idle();
    const again = await runIn(s, KV);
    expect(again).toMatchObject({ exitCode: 0, released: [expect.objectContaining({ id: 'w-1' })] });
    expect(again.blocked.filter((x) => x.kind === 'MachineRequest')).toEqual([]);
    expect(find(s, rs[0]!.metadata)).toBeUndefined();
  });

  it('what stays held after release is reported held by the named controllers after settling, next step', async () => {
    const rs = provisionedRequest(KV, 'w-1', { withCpr: false });
    rs[0]!.metadata.finalizers.push('SomeFutureController');
    const s = await sim(version, KV, [providerStatus(KV, false), ...rs]);
    const started = performance.now();
    const rep = await runIn(s, KV, ['--settle', '1s']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1000);
    expect(rep.released).toEqual([expect.objectContaining({ id: 'w-1' })]);
    expect(rep.settle).toEqual({ ms: 1000, items: 1, gone: 0, held: 1 });
    const b = rep.blocked.find((x) => x.kind === 'MachineRequest')!;
    expect(b.reason).toMatch(
      new RegExp(
        String.raw`^released by stub-provider; still held after 1 s by ` +
          String.raw`ClusterMachineRequestStatusController: Omni's ClusterMachineRequestStatusController ` +
          String.raw`holds it until SomeFutureController is gone, then lets go; SomeFutureController: `,
      ),
    );
    expect(b.nextStep).toBeTruthy();
    expect(b.counts).toBe(false);
    expect(rep.exitCode).toBe(0);
    expect(renderText(rep)).toContain('0 gone, 1 still held');
  });

  it('--settle 0 does not watch, and the report says so', async () => {
    const rs = provisionedRequest(KV, 'w-1', { withCpr: false });
    rs[0]!.metadata.finalizers.push('SomeFutureController');
    const s = await sim(version, KV, [providerStatus(KV, false), ...rs]);
    const rep = await runIn(s, KV, ['--settle', '0']);
    expect(rep.settle).toEqual({ ms: 0, items: 1, gone: 0, held: 0 });
    expect(rep.blocked.find((x) => x.kind === 'MachineRequest')!.reason).toMatch(
      new RegExp(
        String.raw`^released by stub-provider; still held when last read by ` +
          String.raw`ClusterMachineRequestStatusController: .*\(--settle 0: not watched after the last ` +
          String.raw`write\)$`,
      ),
    );
    expect(renderText(rep)).toContain('Not watched after the last write (--settle 0)');
  });
});

describe('--settle', () => {
  it('takes the durations of the other flags, and 0 in any unit; refuses the rest before any write', async () => {
    const s = await sim('1.9.3', KV, [providerStatus(KV, false)]);
    for (const v of ['0', '0s', '0ms', '0.0m']) expect((await runIn(s, KV, ['--settle', v])).settle?.ms).toBe(0);
    expect((await runIn(s, KV, ['--settle', '1.5s'])).settle?.ms).toBe(1500);
    await expect(runIn(s, KV, ['--settle', 'soon'])).rejects.toThrow(/--settle must be a duration like 90s/);
    await expect(runIn(s, KV, ['--settle', '1000h'])).rejects.toThrow(/--settle 1000h is longer than a timer can wait/);
  });
});
