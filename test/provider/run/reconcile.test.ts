import { describe, expect, it } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import {
  bareMetalMachine,
  label,
  providerStatus,
  provisionedRequest,
  reconcileOptions,
  res,
} from '../../helpers/provider-fixtures.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../../src/provider/run/contract.js';
import { Audit } from '../../../src/provider/report/audit.js';
import { silentLogger } from '../../../src/log.js';
import {
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  T,
  providerNamespace,
  providerType,
} from '../../../src/omni-api/resource.js';
import { FailedPreconditionError, UnavailableError } from '../../../src/omni-api/errors.js';
import { InfraProviderStatusSpec, MachineRequestStatusSpec } from '../../../src/omni-api/specs/messages.js';
import { decodeSpec } from '../../../src/omni-api/specs/codec.js';
import { createWipeStrategy } from '../../../src/wipe/index.js';
import type { WipeStrategy } from '../../../src/wipe/index.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';

const opts = (o: Partial<ReconcileOptions> = {}): ReconcileOptions => reconcileOptions(ID, o);

async function run(fake: FakeState, o: Partial<ReconcileOptions> = {}, audit?: Audit) {
  fake.onWrite = audit?.observer;
  return reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts(o));
}

describe('reconcile against an in-memory State', () => {
  it('releases a deleted bare-metal machine in the floor of 9 writes, deregisters; a re-run is a no-op', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    const lines: string[] = [];
    const r = await run(fake, {}, new Audit((l) => lines.push(l)));
    expect(r.outcomes.find((o) => o.kind === 'InfraMachine')).toMatchObject({ id: U1, status: 'released' });
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })).toBeUndefined();
    expect(fake.all().filter((x) => x.metadata.namespace === providerNamespace(ID))).toEqual([]);
    expect(r.deregistered).toBe(true);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
    const machineWrites = fake.writes.filter((w) => w.pointer.id === U1);
    expect(machineWrites.map((w) => w.method).sort()).toEqual(
      [...Array(6).fill('destroy'), ...Array(3).fill('update')].sort(),
    );
    // No Get before an Update or Destroy of the machine's resources: only the provider-wide ones
    // (two snapshots of 3 single resources, the announcement, the first heartbeat, and the heartbeat
    // read again right before deregistering: design rule 7).
    expect(fake.calls.get).toBeLessThanOrEqual(9);
    const audit = lines.map(
      (l) =>
        JSON.parse(l) as {
          event: string;
          result?: string;
          op: string;
          resource: { id: string };
          finalizersBefore?: string[];
          finalizersAfter?: string[];
        },
    );
    const im = audit.find(
      (a) => a.resource.id === U1 && a.op === 'update' && a.event === 'outcome' && a.finalizersBefore?.length === 6,
    )!;
    expect(im).toMatchObject({ result: 'ok', finalizersAfter: [] });
    // Two lines per write: its intent and its outcome.
    expect(audit.filter((a) => a.event === 'intent')).toHaveLength(fake.writes.length);
    expect(audit.filter((a) => a.event === 'outcome' && a.result === 'ok')).toHaveLength(fake.writes.length);
    expect(lines.join('')).not.toContain('hunter2');

    const writes = fake.writes.length;
    const again = await run(fake);
    expect(fake.writes.length).toBe(writes);
    expect(again.outcomes).toEqual([]);
    expect(again.announced).toBe(false);
  });

  it('a static-labelled provider with a state resource of the other kind in its namespace: emptied too', async () => {
    const stray = res(providerNamespace(ID), providerType('Machine', ID), 'w-1', {
      owner: `${ID}.ProvisionController`,
    });
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1), stray]);
    const r = await run(fake);
    expect(r.deregistered).toBe(true);
    expect(fake.all().filter((x) => x.metadata.namespace === providerNamespace(ID))).toEqual([]);
    // So the run is final: a second one finds nothing.
    const writes = fake.writes.length;
    const again = await run(fake);
    expect(again.outcomes).toEqual([]);
    expect(fake.writes.length).toBe(writes);
  });

  it('leftovers found whatever kind is detected: a bare-metal-type one by a request goes in the 1st run', async () => {
    const id = 'kubevirt';
    const stray = res(providerNamespace(id), providerType('MachineStatus', id), 'gone-machine', {
      owner: `${id}.MachineStatusController`,
    });
    const fake = new FakeState([...provisionedRequest(id, 'w-1'), stray]);
    await run(fake, { providerId: id, deregister: false });
    expect(fake.find(stray.metadata)).toBeUndefined();
    const writes = fake.writes.length;
    const again = await run(fake, { providerId: id, deregister: false });
    expect(again.outcomes).toEqual([]);
    expect(fake.writes.length).toBe(writes);
  });

  it('releases a provisioning request: ConfigPatchRequest, status once Omni lets go, state, finalizer', async () => {
    const id = 'kubevirt';
    const fake = new FakeState([providerStatus(id, false), ...provisionedRequest(id, 'w-1')]);
    const r = await run(fake, { providerId: id });
    expect(r.outcomes[0]).toMatchObject({
      kind: 'MachineRequest',
      id: 'w-1',
      status: 'released',
      settle: { outcome: 'gone' },
    });
    expect(r.outcomes[0]!.heldBy).toBeUndefined();
    // ClusterMachineRequestStatusController let go once ours were gone, and Omni destroyed it.
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequest, id: 'w-1' })).toBeUndefined();
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: 'w-1' })).toBeUndefined();
    expect(
      fake.find({ namespace: providerNamespace(id), type: providerType('Machine', id), id: 'w-1' }),
    ).toBeUndefined();
    const order = fake.writes
      .filter(
        (w) =>
          w.method !== 'create' &&
          w.pointer.namespace !== NS_INFRA_PROVIDER_EPHEMERAL &&
          w.pointer.type !== T.InfraProviderStatus,
      )
      .map((w) => `${w.method} ${w.pointer.type.split('.')[0]}`);
    expect(order).toEqual([
      'update ConfigPatchRequests',
      'destroy ConfigPatchRequests',
      'update MachineRequestStatuses',
      'destroy MachineRequestStatuses',
      'destroy Machine',
      'update MachineRequests',
    ]);
    // The pass waited for Omni to destroy the request, then deregistered.
    expect(r.deregistered).toBe(true);
  });

  it('stops at an Omni finalizer that does not clear, reports it blocked, and touches nothing after it', async () => {
    const id = 'kubevirt';
    const fake = new FakeState(provisionedRequest(id, 'w-1', { withCpr: false }));
    fake.omni.releasesOnTeardown.clear();
    const r = await run(fake, { providerId: id, omniWaitMs: 50 });
    expect(r.outcomes[0]).toMatchObject({ status: 'blocked', counts: true });
    expect(r.outcomes[0]!.reason).toMatch(/MachineRequestStatusCleanupController/);
    expect(
      fake.find({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequest, id: 'w-1' })!.metadata.finalizers,
    ).toContain(`${id}.ProvisionController`);
    expect(fake.find({ namespace: providerNamespace(id), type: providerType('Machine', id), id: 'w-1' })).toBeDefined();
  });

  it('refuses a new MachineRequest with a FAILED status owned by <id>.ProvisionController, labels copied', async () => {
    const id = 'kubevirt';
    const rs = provisionedRequest(id, 'new-1', { phase: 'running', withStatus: false, withCpr: false });
    rs[0]!.metadata.finalizers = [];
    const fake = new FakeState(rs);
    const r = await run(fake, { providerId: id });
    expect(r.refusals).toEqual([expect.objectContaining({ id: 'new-1', result: 'refused' })]);
    const st = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: 'new-1' })!;
    expect(st.metadata.owner).toBe(`${id}.ProvisionController`);
    expect(st.metadata.labels).toEqual(rs[0]!.metadata.labels);
    const spec = decodeSpec(MachineRequestStatusSpec, st.spec.protoSpec).value;
    expect(spec.stage).toBe(3);
    expect(spec.error).toMatch(/^stub-provider: provider kubevirt is being decommissioned/);
    expect(fake.find(rs[0]!.metadata)!.metadata.finalizers).toEqual([]);
    // announced: the ProviderStatus says so, and a heartbeat exists
    const ps = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id })!;
    expect(decodeSpec(InfraProviderStatusSpec, ps.spec.protoSpec).value.version).toBe(
      'stub-provider 0.1.0, decommissioning',
    );
    expect(r.heartbeats).toBeGreaterThanOrEqual(1);
  });

  it('keeps the static label and the schema when announcing', async () => {
    const fake = new FakeState([
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1, { phase: 'running' }),
      ...bareMetalMachine(ID, U2),
    ]);
    await run(fake);
    const ps = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })!;
    expect(Object.keys(ps.metadata.labels)).toContain('omni.sidero.dev/is-static-infra-provider');
    const spec = decodeSpec(InfraProviderStatusSpec, ps.spec.protoSpec).value;
    expect(spec.schema).toBe('{"type":"object"}');
    expect(spec.description).toMatch(/^stub-provider/);
    // the running machine kept everything
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })!.metadata.finalizers).toHaveLength(
      6,
    );
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U1 })).toBeDefined();
  });

  it('in per-machine mode releases the named machine only and writes nothing else', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1), ...bareMetalMachine(ID, U2)]);
    const r = await run(fake, { machines: [U1] });
    expect(r.outcomes.map((o) => o.id)).toEqual([U1]);
    expect(fake.writes.every((w) => w.pointer.id === U1)).toBe(true);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U2 })).toBeDefined();
    expect(r.announced).toBe(false);
  });

  it('retries version conflicts and transient errors without giving up', async () => {
    const fake = new FakeState(bareMetalMachine(ID, U1));
    fake.fail('update', () => new FailedPreconditionError('version conflict'), 2);
    const r = await run(fake, { machines: [U1] });
    expect(r.outcomes[0]).toMatchObject({ status: 'released' });
    const fake2 = new FakeState(bareMetalMachine(ID, U1));
    fake2.fail('destroy', () => new UnavailableError('overloaded'), 1);
    const r2 = await run(fake2, { machines: [U1] });
    expect(r2.outcomes[0]).toMatchObject({ status: 'failed' });
    // the machine keeps its finalizers when something of it could not be destroyed
    expect(
      fake2.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })!.metadata.finalizers,
    ).toHaveLength(6);
    const r3 = await run(fake2, { machines: [U1] });
    expect(r3.outcomes[0]).toMatchObject({ status: 'released' });
  });

  it('waits with Omni before 1.3: tears the InfraMachineStatus down and destroys it once Omni lets go', async () => {
    const fake = new FakeState(bareMetalMachine(ID, U1, { omniOnStatus: true }));
    const r = await run(fake, { machines: [U1] });
    expect(r.outcomes[0]).toMatchObject({ status: 'released' });
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U1 })).toBeUndefined();
  });

  it('with --wait, releases a machine deleted while it runs, then deregisters', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1, { phase: 'running' })]);
    setTimeout(() => {
      const im = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 })!;
      fake.put({ ...im, metadata: { ...im.metadata, phase: 'tearingDown' } });
    }, 50);
    const r = await run(fake, { wait: true, timeoutMs: 5_000 });
    expect(r.timedOut).toBe(false);
    expect(r.deregistered).toBe(true);
    expect(r.outcomes.find((o) => o.kind === 'InfraMachine')).toMatchObject({ status: 'released' });
  });

  it('with --wait, times out while a machine stays in use', async () => {
    const fake = new FakeState(bareMetalMachine(ID, U1, { phase: 'running' }));
    const r = await run(fake, { wait: true, timeoutMs: 100, machines: [U1] });
    expect(r.timedOut).toBe(true);
    expect(fake.writes).toEqual([]);
  });

  it('is interrupted by the signal and stops', async () => {
    const fake = new FakeState(Array.from({ length: 20 }, (_, i) => bareMetalMachine(ID, `m-${i}`)).flat());
    const ac = new AbortController();
    fake.afterWrite = () => ac.abort(new Error('SIGTERM'));
    const r = await run(fake, { signal: ac.signal, machines: Array.from({ length: 20 }, (_, i) => `m-${i}`) });
    expect(r.interrupted).toBe(true);
    expect(fake.writes.length).toBeLessThan(20 * 9);
  });

  it('wipes with BMC data before destroying anything of the machine; --require-wipe holds a failed one', async () => {
    const seen: string[] = [];
    const fake = new FakeState(bareMetalMachine(ID, U1));
    const strategy: WipeStrategy = {
      name: 'test',
      wipe: async (m) => {
        seen.push(`${m.machineId} ${m.bmc?.address} ${fake.writes.length}`);
        return {
          machineId: m.machineId,
          strategy: 'test',
          outcome: 'failed',
          reason: 'hardware unreachable',
          durationMs: 1,
        };
      },
    };
    const wipeOpts = { strategy: 'command' as const, timeoutMs: 1000, requireWipe: true, concurrency: 2 };
    const r = await reconcile(
      { state: fake, logger: silentLogger(), version: '0.1.0', wipe: { strategy, options: wipeOpts } },
      opts({ machines: [U1] }),
    );
    // Before the wipe, only its claim (wipe-claim.ts): an annotation on the machine's InfraMachineStatus.
    expect(seen).toEqual([`${U1} 10.0.0.9 1`]);
    expect(r.outcomes[0]).toMatchObject({ status: 'blocked', counts: true });
    expect(fake.writes.map((w) => `${w.method} ${w.pointer.type} ${w.pointer.id}`)).toEqual([
      `update ${T.InfraMachineStatus} ${U1}`,
    ]);
    const none = createWipeStrategy(
      { strategy: 'none', timeoutMs: 1000, requireWipe: false, concurrency: 1 },
      { logger: silentLogger() },
    );
    const r2 = await reconcile(
      {
        state: fake,
        logger: silentLogger(),
        version: '0.1.0',
        wipe: { strategy: none, options: { strategy: 'none', timeoutMs: 1000, requireWipe: false, concurrency: 1 } },
      },
      opts({ machines: [U1] }),
    );
    expect(r2.outcomes[0]).toMatchObject({ status: 'released' });
  });

  it('cleans leftovers whose machine is gone', async () => {
    const fake = new FakeState([
      res(NS_INFRA_PROVIDER, T.InfraMachineStatus, U1, {
        labels: label(ID),
        owner: `${ID}.InfraMachineStatusController`,
      }),
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
    ]);
    await run(fake);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U1 })).toBeUndefined();
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U2 })).toBeDefined();
  });
});

describe('reconcile: the settle after the last write (what others still held when it was released)', () => {
  const KV = 'kubevirt';
  const heldRequest = () => {
    const rs = provisionedRequest(KV, 'w-1', { withCpr: false });
    rs[0]!.metadata.finalizers.push('other.ProvisionController');
    return rs;
  };

  it('Omni lets go within the settle time: released, not held; the pass waits for it, then deregisters', async () => {
    const fake = new FakeState([providerStatus(KV, false), ...provisionedRequest(KV, 'w-1', { withCpr: false })]);
    const r = await run(fake, { providerId: KV, settleMs: 2_000 });
    expect(r.outcomes.find((o) => o.kind === 'MachineRequest')).toMatchObject({
      status: 'released',
      settle: { ms: 2_000, outcome: 'gone' },
    });
    expect(r.settle).toEqual({ ms: 2_000, items: 1, gone: 1, held: 0 });
    expect(r.deregistered).toBe(true);
  });

  it('still held at the end: held by what the watch saw last, named and explained, after the settle time', async () => {
    const fake = new FakeState([providerStatus(KV, false), ...heldRequest()]);
    const started = performance.now();
    const r = await run(fake, { providerId: KV, settleMs: 300 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    const o = r.outcomes.find((x) => x.kind === 'MachineRequest')!;
    expect(o).toMatchObject({
      status: 'released',
      settle: { ms: 300, outcome: 'held' },
      heldBy: ['ClusterMachineRequestStatusController', 'other.ProvisionController'],
    });
    expect(o.reason).toContain(
      "ClusterMachineRequestStatusController: Omni's ClusterMachineRequestStatusController holds it until " +
        'other.ProvisionController is gone',
    );
    expect(o.nextStep).toContain("run stub-provider with that provider's own ID");
    expect(r.settle).toEqual({ ms: 300, items: 1, gone: 0, held: 1 });
    // One watch per kind the run read (NameReservation too: profile.ts REQUEST_LINKED_TYPES), each listed once: the
    // waits and the settle are queries on them.
    expect(fake.calls.watch).toBe(fake.calls.list);
    expect(fake.calls.list).toBe(15);
  });

  it('the watch shows what holds it at the end, not what held it when released', async () => {
    const fake = new FakeState([providerStatus(KV, false), ...heldRequest()]);
    fake.afterWrite = (method, r) => {
      if (
        method !== 'update' ||
        r.metadata.type !== T.MachineRequest ||
        r.metadata.finalizers.includes(`${KV}.ProvisionController`)
      )
        return;
      // Someone else lets go of theirs after our release; Omni's own is then alone and goes too.
      setTimeout(() => {
        const cur = fake.find(r.metadata)!;
        fake.put({
          ...cur,
          metadata: {
            ...cur.metadata,
            finalizers: ['ClusterMachineRequestStatusController', 'SomethingNewController'],
          },
        });
      }, 20);
    };
    const r = await run(fake, { providerId: KV, settleMs: 300 });
    expect(r.outcomes.find((x) => x.kind === 'MachineRequest')).toMatchObject({
      settle: { outcome: 'held' },
      heldBy: ['ClusterMachineRequestStatusController', 'SomethingNewController'],
    });
  });

  it('settle 0: not watched, and the outcome says so', async () => {
    const fake = new FakeState([providerStatus(KV, false), ...heldRequest()]);
    const r = await run(fake, { providerId: KV, settleMs: 0 });
    expect(r.outcomes.find((x) => x.kind === 'MachineRequest')).toMatchObject({
      status: 'released',
      settle: { ms: 0, outcome: 'not-watched' },
      heldBy: ['ClusterMachineRequestStatusController', 'other.ProvisionController'],
    });
    expect(r.settle).toEqual({ ms: 0, items: 1, gone: 0, held: 0 });
    expect(fake.calls.watch).toBe(fake.calls.list);
  });

  it('a deletion left to Omni (nothing of ours on it) Omni does not let go: blocked at end, after settle', async () => {
    const rs = provisionedRequest(KV, 'w-1', { withStatus: false, withCpr: false });
    rs[0]!.metadata.finalizers = ['ClusterMachineRequestStatusController'];
    const fake = new FakeState([providerStatus(KV, false), ...rs]);
    fake.omni.releasesWhenAlone.clear(); // an Omni whose controller is stuck
    const r = await run(fake, { providerId: KV, settleMs: 200 });
    expect(r.outcomes).toEqual([
      expect.objectContaining({
        kind: 'MachineRequest',
        id: 'w-1',
        status: 'blocked',
        counts: false,
        settle: { ms: 200, outcome: 'held' },
      }),
    ]);
    // Predicted to let go by itself, it did not: said so, not predicted again.
    expect(r.outcomes[0]!.reason).toMatch(
      new RegExp(
        String.raw`^ClusterMachineRequestStatusController: had not let go as expected: Omni's ` +
          String.raw`ClusterMachineRequestStatusController lets go as soon as`,
      ),
    );
    expect(r.outcomes[0]!.nextStep).toContain('check that Omni is healthy');
    // ...and one that Omni lets go of while it is watched is not reported at all.
    const fake2 = new FakeState([providerStatus(KV, false), ...rs]);
    const watchKind = fake2.watchKind.bind(fake2);
    fake2.watchKind = (ns, type, o) => {
      setTimeout(() => fake2.remove(rs[0]!.metadata), 20);
      return watchKind(ns, type, o);
    };
    const r2 = await run(fake2, { providerId: KV, settleMs: 2_000 });
    expect(r2.lastPlan.lettingGo.map((n) => n.id)).toEqual(['w-1']);
    expect(r2.outcomes).toEqual([]);
    expect(r2.settle).toMatchObject({ items: 1, gone: 1, held: 0 });
  });
});
