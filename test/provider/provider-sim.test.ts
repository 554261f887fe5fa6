// The stub against the simulated Omni over loopback, through the `run` and `plan` commands' code
// (executeRun/executePlan on the configuration the CLI parses), for Omni 1.3 and 1.4+ behaviour.

import { afterEach, describe, expect, it } from 'vitest';
import type { Sim } from '../../src/omni-sim/index.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { NS_DEFAULT, NS_EPHEMERAL, NS_INFRA_PROVIDER, T, providerNamespace } from '../../src/omni-api/resource.js';
import { MachineRequestStatusSpec, SysVersionSpec } from '../../src/omni-api/specs/messages.js';
import { decodeSpec, encodeSpec } from '../../src/omni-api/specs/codec.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { planIn, providerSim, runIn } from '../helpers/cli-config.js';
import {
  bareMetalMachine,
  healthStatus,
  label,
  providerStatus,
  provisionedRequest,
  res,
} from '../helpers/provider-fixtures.js';

const U1 = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';
const U2 = '7c3e1b22-5d6f-4a8b-9c0d-223344556677';
const U3 = '5a4b3c2d-1e0f-4a9b-8c7d-334455667788';

const sims: Sim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

function sysVersion(version: string): Resource {
  return res(NS_EPHEMERAL, T.SysVersion, 'current', {
    spec: encodeSpec(SysVersionSpec, { backend_version: `v${version}`, instance_name: 'sim', backend_api_version: 1 }),
  });
}

async function sim(
  version: string,
  resources: Resource[],
  ids: string[] = ['bare-metal'],
  opts: { registered?: boolean; faults?: Record<string, unknown> } = {},
): Promise<Sim> {
  const s = await providerSim(version, [sysVersion(version), ...resources], { ids, ...opts });
  sims.push(s);
  return s;
}

const find = (s: Sim, namespace: string, type: string, id: string) =>
  s.store.all().find((r) => r.metadata.namespace === namespace && r.metadata.type === type && r.metadata.id === id);
const byType = (s: Sim, type: string) => s.store.all().filter((r) => r.metadata.type === type);

describe.each(['1.3.4', '1.4.2'])('Omni %s', (version) => {
  it('releases a bare-metal machine deleted with the provider gone, deregisters; re-run changes nothing', async () => {
    const s = await sim(version, [providerStatus('bare-metal', true), ...bareMetalMachine('bare-metal', U1)]);
    const rep = await runIn(s, 'bare-metal');
    expect(rep.exitCode).toBe(0);
    expect(rep.released).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'InfraMachine', id: U1 })]));
    expect(rep.omniVersion).toBe(`v${version}`);
    expect(find(s, NS_INFRA_PROVIDER, T.InfraMachine, U1)).toBeUndefined();
    expect(s.store.all().filter((r) => r.metadata.namespace === providerNamespace('bare-metal'))).toEqual([]);
    expect(byType(s, T.InfraMachineStatus)).toEqual([]);
    expect(rep.deregistration).toMatchObject({
      status: 'deregistered',
      lastStep: 'omnictl infraprovider delete bare-metal',
    });
    expect(find(s, NS_INFRA_PROVIDER, T.InfraProviderStatus, 'bare-metal')).toBeUndefined();
    // The registration itself is the admin's to delete.
    expect(find(s, NS_INFRA_PROVIDER, T.InfraProvider, 'bare-metal')).toBeDefined();
    if (version.startsWith('1.4')) expect(rep.deregistration.warning).toMatch(/MachineRequestSet/);

    const before = s.dump();
    const again = await runIn(s, 'bare-metal');
    expect(again).toMatchObject({ exitCode: 0, result: 'nothing-to-do', released: [] });
    expect(Object.keys(again.writes)).toEqual([]);
    expect(s.dump()).toBe(before);
  });

  it('releases a provisioning provider scaled down offline, and a request provisioned but never joined', async () => {
    const id = 'kubevirt';
    const s = await sim(
      version,
      [
        providerStatus(id, false),
        ...provisionedRequest(id, 'workers-aaaaaa', { machineUuid: U1 }),
        ...provisionedRequest(id, 'workers-bbbbbb', { withCpr: false }), // provisioned, never joined: no machine
      ],
      [id],
    );
    const rep = await runIn(s, id);
    expect(rep.exitCode).toBe(0);
    expect(rep.released.map((r) => r.id).sort()).toEqual(['workers-aaaaaa', 'workers-bbbbbb']);
    expect(byType(s, T.MachineRequest)).toEqual([]);
    expect(byType(s, T.MachineRequestStatus)).toEqual([]);
    expect(byType(s, T.ConfigPatchRequest)).toEqual([]);
    expect(s.store.all().filter((r) => r.metadata.namespace === providerNamespace(id))).toEqual([]);
    expect(rep.leftBehind.some((n) => /not deprovisioned/.test(n.reason ?? ''))).toBe(true);
    expect(rep.deregistration.status).toBe('deregistered');
  });

  it('releases one machine with --machine while the others stay in use; other providers untouched', async () => {
    const other = bareMetalMachine('bare-metal-2', U3);
    const s = await sim(
      version,
      [
        providerStatus('bare-metal', true),
        ...bareMetalMachine('bare-metal', U1),
        ...bareMetalMachine('bare-metal', U2, { phase: 'running' }),
        providerStatus('bare-metal-2', true),
        ...other,
      ],
      ['bare-metal', 'bare-metal-2'],
    );
    const untouched = () =>
      s.store
        .all()
        .filter(
          (r) =>
            r.metadata.id === U2 ||
            r.metadata.id === U3 ||
            r.metadata.id === 'bare-metal-2' ||
            r.metadata.namespace.endsWith('bare-metal-2'),
        )
        .map((r) => JSON.stringify(r.metadata))
        .sort();
    const before = untouched();
    const rep = await runIn(s, 'bare-metal', ['--machine', U1]);
    expect(rep.exitCode).toBe(0);
    expect(rep.released).toEqual([expect.objectContaining({ id: U1 })]);
    expect(find(s, NS_INFRA_PROVIDER, T.InfraMachine, U1)).toBeUndefined();
    expect(untouched()).toEqual(before);
    // per-machine mode announces nothing
    expect(find(s, 'infra-provider-ephemeral', T.InfraProviderHealthStatus, 'bare-metal')).toBeUndefined();
    expect(rep.deregistration.status).toBe('per-machine');
  });

  it('leaves an Omni finalizer in place and reports the running machine without failing', async () => {
    const rs = bareMetalMachine('bare-metal', U1);
    rs[0]!.metadata.finalizers.push('MachineSetNodeController');
    const s = await sim(version, [
      providerStatus('bare-metal', true),
      ...rs,
      ...bareMetalMachine('bare-metal', U2, { phase: 'running' }),
    ]);
    const rep = await runIn(s, 'bare-metal', ['--settle', '1s']);
    expect(rep.exitCode).toBe(0);
    expect(find(s, NS_INFRA_PROVIDER, T.InfraMachine, U1)!.metadata.finalizers).toEqual(['MachineSetNodeController']);
    expect(rep.running).toEqual([expect.objectContaining({ kind: 'InfraMachine', id: U2 })]);
    expect(rep.blocked).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'InfraMachine',
          id: U1,
          counts: false,
          reason: expect.stringMatching(
            /^released by stub-provider; still held after 1 s by MachineSetNodeController: /,
          ),
        }),
      ]),
    );
    expect(rep.deregistration.status).toBe('not-ready');
    expect(find(s, NS_INFRA_PROVIDER, T.InfraMachine, U2)!.metadata.finalizers).toHaveLength(6);
  });

  it('refuses a new MachineRequest with a FAILED status', async () => {
    const id = 'kubevirt';
    const rs = provisionedRequest(id, 'workers-cccccc', { phase: 'running', withStatus: false, withCpr: false });
    rs[0]!.metadata.finalizers = [];
    const s = await sim(version, [providerStatus(id, false), ...rs], [id]);
    const rep = await runIn(s, id);
    expect(rep.refused).toEqual([
      expect.objectContaining({ kind: 'MachineRequest', id: 'workers-cccccc', result: 'refused' }),
    ]);
    const st = find(s, NS_INFRA_PROVIDER, T.MachineRequestStatus, 'workers-cccccc')!;
    expect(st.metadata.owner).toBe(`${id}.ProvisionController`);
    expect(decodeSpec(MachineRequestStatusSpec, st.spec.protoSpec).value).toMatchObject({
      stage: 3,
      error: expect.stringMatching(/^stub-provider/),
    });
    // No finalizer of ours: only Omni's own, which it puts on every running request.
    expect(find(s, NS_INFRA_PROVIDER, T.MachineRequest, 'workers-cccccc')!.metadata.finalizers).toEqual([
      'ClusterMachineRequestStatusController',
    ]);
    expect(find(s, 'infra-provider-ephemeral', T.InfraProviderHealthStatus, id)).toBeDefined();
  });
});

describe('preflight against the simulated Omni', () => {
  it('detects a live provider (exit 3) unless --force; a stub heartbeat does not count', async () => {
    const s = await sim('1.3.4', [
      providerStatus('bare-metal', true),
      healthStatus('bare-metal', Date.now() - 5_000),
      ...bareMetalMachine('bare-metal', U1),
    ]);
    const err = await runIn(s, 'bare-metal').catch((e: unknown) => e);
    expect(exitCodeFor(err)).toBe(3);
    expect(String((err as Error).message)).toMatch(/live provider/);
    expect(find(s, NS_INFRA_PROVIDER, T.InfraMachine, U1)!.metadata.finalizers).toHaveLength(6);
    const forced = await runIn(s, 'bare-metal', ['--force']);
    expect(forced.preflight).toMatchObject({ forced: true });
    expect(forced.released.map((r) => r.id)).toContain(U1);
  });

  it('explains a provider that is not registered (exit 3)', async () => {
    const s = await sim('1.3.4', [providerStatus('bare-metal', true)], ['bare-metal'], { registered: false });
    const err = await runIn(s, 'bare-metal').catch((e: unknown) => e);
    expect(exitCodeFor(err)).toBe(3);
    expect((err as Error).message).toMatch(/omnictl infraprovider create bare-metal/);
    expect((err as Error).message).toMatch(/1\.4/);
  });

  it('refuses an --id that differs from the key, even only in case (exit 2)', async () => {
    const s = await sim('1.3.4', [providerStatus('bare-metal', true)]);
    const err = await runIn(s, 'bare-metal', ['--id', 'Bare-Metal']).catch((e: unknown) => e);
    expect(exitCodeFor(err)).toBe(2);
  });

  it('refuses changes without --yes when stdin is not a terminal (exit 2), and plan writes nothing', async () => {
    const s = await sim('1.3.4', [providerStatus('bare-metal', true), ...bareMetalMachine('bare-metal', U1)]);
    const before = s.dump();
    const err = await runIn(s, 'bare-metal', ['--no-yes']).catch((e: unknown) => e);
    expect(exitCodeFor(err)).toBe(2);
    const plan = await planIn(s, 'bare-metal');
    expect(plan.planned!.writes).toBe(9);
    expect(plan.planned!.items[0]!.steps.at(-1)).toMatchObject({
      op: 'remove-finalizers',
      finalizers: expect.arrayContaining(['bare-metal.WipeStatusController']),
    });
    expect(s.dump()).toBe(before);
  });
});

describe('faults during the run', () => {
  it('finishes through conflict storms, 503 bursts and dropped watch streams', async () => {
    const id = 'kubevirt';
    const s = await sim(
      '1.4.2',
      [
        providerStatus(id, false),
        ...['a', 'b', 'c', 'd'].flatMap((x) => provisionedRequest(id, `workers-${x}`, { machineUuid: '' })),
        ...bareMetalMachine(id, U1, { finalizers: [`${id}.WipeStatusController`] }),
      ],
      [id],
      { faults: { dropWatchAfterEvents: 2, unavailableBurst: 3, conflictStorm: { type: T.MachineRequest, count: 3 } } },
    );
    const rep = await runIn(s, id, ['--state-type', 'Machine']);
    expect(rep.failed).toEqual([]);
    expect(rep.exitCode).toBe(0);
    expect(byType(s, T.MachineRequest)).toEqual([]);
    expect(byType(s, T.MachineRequestStatus)).toEqual([]);
    expect(
      s.store
        .all()
        .filter(
          (r) =>
            r.metadata.labels['omni.sidero.dev/infra-provider-id'] === id &&
            r.metadata.finalizers.some((f) => f.startsWith(`${id}.`)),
        ),
    ).toEqual([]);
    void label;
    void NS_DEFAULT;
  });
});
