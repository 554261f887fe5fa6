import { describe, expect, it } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import { bareMetalMachine, provisionedRequest, res } from '../../helpers/provider-fixtures.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import { NS_INFRA_PROVIDER, T, newMetadata, providerNamespace, providerType } from '../../../src/omni-api/resource.js';
import { GatewayState, type StateTransport } from '../../../src/omni-client/gateway-state.js';
import { wrapCore } from '../../../src/omni-client/wrap.js';
import { takeSnapshot } from '../../../src/provider/read/snapshot.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';
const SPEC = new Uint8Array([8, 1]);

describe('snapshot: what it keeps of each resource', () => {
  it('keeps no spec of a resource without our finalizers, except the types whose spec the plan reads', async () => {
    const ns = providerNamespace(ID);
    const withSpec = (r: Resource): Resource => ({ ...r, spec: { protoSpec: SPEC } });
    const resources = [
      ...bareMetalMachine(ID, U1).map(withSpec),
      ...provisionedRequest(ID, 'req-1', { machineUuid: U1 }).map(withSpec),
      withSpec(
        res(NS_INFRA_PROVIDER, T.BMCConfig, U1, {
          labels: { 'omni.sidero.dev/infra-provider-id': ID },
          owner: 'InfraMachineBMCConfigController',
        }),
      ),
      withSpec(res(ns, providerType('BMCConfiguration', ID), 'no-finalizers', {})),
    ];
    const snap = await takeSnapshot(new FakeState(resources), { providerId: ID, profile: 'auto', stateTypes: [] });
    const all = [
      ...snap.infraMachines,
      ...snap.infraMachineStatuses,
      ...snap.bmcConfigs,
      ...snap.machineRequests,
      ...snap.machineRequestStatuses,
      ...Object.values(snap.namespace).flat(),
    ];
    const kept = (r: Resource) => !r.spec.omitted && r.spec.protoSpec.length === SPEC.length;
    for (const r of all) {
      const ours = r.metadata.finalizers.some((f) => f.startsWith(`${ID}.`));
      const read = [T.MachineRequestStatus, T.BMCConfig, providerType('BMCConfiguration', ID)].includes(
        r.metadata.type,
      );
      expect({ type: r.metadata.type, id: r.metadata.id, kept: kept(r) }).toEqual({
        type: r.metadata.type,
        id: r.metadata.id,
        kept: ours || read,
      });
      if (!kept(r)) expect(r.spec.omitted).toBe(true);
    }
    // The bare-metal machine's PowerOperation, RebootStatus, WipeStatus and InfraMachineStatus at least.
    expect(all.filter((r) => r.spec.omitted).length).toBeGreaterThanOrEqual(4);
  });
});

describe('client: a resource read without its spec is never written back', () => {
  const omitted: Resource = {
    metadata: newMetadata(
      { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 },
      { version: '4', phase: 'tearingDown', finalizers: [`${ID}.A`, 'Other'] },
    ),
    spec: { protoSpec: new Uint8Array(0), omitted: true },
  };
  const fresh = {
    metadata: {
      namespace: NS_INFRA_PROVIDER,
      type: T.InfraMachine,
      id: U1,
      version: '5',
      phase: 'tearingDown',
      finalizers: [`${ID}.A`, 'Other'],
    },
    spec: { proto_spec: 'CAE=' },
  };

  function recording() {
    const calls: { method: string; body: Record<string, unknown> }[] = [];
    const transport: StateTransport = {
      unary: (async (method: string, body: unknown, _ctx: unknown, decode: (answer: unknown) => unknown) => {
        calls.push({ method, body: body as Record<string, unknown> });
        if (method === 'Get') return decode({ resource: fresh });
        const sent = (body as { new_resource: { metadata: Record<string, unknown>; spec: Record<string, unknown> } })
          .new_resource;
        return decode({ resource: { ...sent, metadata: { ...sent.metadata, version: '6' } } });
      }) as StateTransport['unary'],
      collect: () => Promise.reject(new Error('not used')),
      openStream: () => Promise.reject(new Error('not used')),
    };
    return { calls, state: wrapCore(new GatewayState(transport)) };
  }

  it('refuses an Update or Create of it before any call', async () => {
    const { calls, state } = recording();
    await expect(state.update(omitted)).rejects.toMatchObject({ code: 'CLIENT_SPEC_OMITTED' });
    await expect(state.create(omitted)).rejects.toMatchObject({ code: 'CLIENT_SPEC_OMITTED' });
    expect(calls).toEqual([]);
  });

  it('removeFinalizers reads it again and sends the spec it read, not an empty one', async () => {
    const { calls, state } = recording();
    const res = await state.removeFinalizers(omitted, [`${ID}.A`]);
    expect(res.outcome).toBe('removed');
    expect(calls.map((c) => c.method)).toEqual(['Get', 'Update']);
    const sent = calls[1]!.body['new_resource'] as { spec: Record<string, unknown>; metadata: Record<string, unknown> };
    expect(sent.spec['proto_spec']).toBe('CAE=');
    expect(sent.metadata['finalizers']).toEqual(['Other']);
    expect(sent.metadata['version']).toBe('5');
  });
});
