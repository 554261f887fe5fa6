// The client against the simulated Omni (src/omni-sim), with Omni's access rules for an infra
// provider: every RPC, read-only types, conflicts, faults (503 bursts, skewed clock, cut streams,
// restarts that invalidate bookmarks).

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import {
  AlreadyExistsError,
  FailedPreconditionError,
  NotFoundError,
  PermissionDeniedError,
  UnauthenticatedError,
} from '../../src/omni-api/errors.js';
import { T, newMetadata, type Resource } from '../../src/omni-api/resource.js';
import type { WatchEvent } from '../../src/omni-api/state.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { generateKey } from '../../src/omni-sim/scenario/keys.js';
import { noDelay } from '../helpers/fake-gateway.js';

const NS = 'infra-provider';
const LABEL = 'omni.sidero.dev/infra-provider-id';
const UNKNOWN_FIELD = Buffer.from([0x98, 0x06, 0x01]).toString('base64'); // field 99 = 1, unknown to Omni's spec

const scenario = `
omni: { version: "1.3.4" }
identities:
  - { name: "infra-provider:bare-metal", role: InfraProvider }
resources:
  - metadata: { namespace: infra-provider, type: ${T.InfraProvider}, id: bare-metal }
    proto_spec: ""
  - metadata:
      namespace: infra-provider
      type: ${T.InfraMachine}
      id: m1
      phase: tearingDown
      labels: { ${LABEL}: bare-metal }
      finalizers: [MachineCleanupController, bare-metal.InfraMachineController]
    proto_spec: "${UNKNOWN_FIELD}"
  - metadata:
      namespace: infra-provider
      type: ${T.InfraMachine}
      id: m2
      labels: { ${LABEL}: bare-metal }
      finalizers: [bare-metal.InfraMachineController]
    proto_spec: ""
  - metadata:
      namespace: infra-provider
      type: ${T.InfraMachine}
      id: other
      labels: { ${LABEL}: proxmox }
    proto_spec: ""
`;

let sim: Sim;
let client: OmniClient;

beforeEach(async () => {
  sim = await createSim(scenario);
  client = await createOmniClient({
    endpoint: sim.endpoint,
    key: sim.keys['infra-provider:bare-metal'] ?? '',
    delay: noDelay,
    env: {},
  });
});
afterEach(async () => {
  await client.close();
  await sim.close();
});

const im = (id: string) => ({ namespace: NS, type: T.InfraMachine, id });
const status = (id: string): Resource => ({
  metadata: newMetadata({ namespace: NS, type: T.InfraMachineStatus, id }),
  spec: { protoSpec: new Uint8Array() },
});

describe('client against the simulated Omni', () => {
  it("get and list see only this provider's resources", async () => {
    expect(client.providerId).toBe('bare-metal');
    const m1 = await client.state.get(im('m1'));
    expect(m1.metadata).toMatchObject({
      phase: 'tearingDown',
      finalizers: ['MachineCleanupController', 'bare-metal.InfraMachineController'],
    });
    await expect(client.state.get(im('other'))).rejects.toBeInstanceOf(NotFoundError);
    expect((await client.state.list(NS, T.InfraMachine)).map((r) => r.metadata.id)).toEqual(['m1', 'm2']);
    expect((await client.state.list(NS, T.InfraMachine, { idRegexp: '1$' })).map((r) => r.metadata.id)).toEqual(['m1']);
  });

  it('create, update, destroy a provider-owned resource; conflicts as Omni reports them', async () => {
    const created = await client.state.create(status('m1'), { owner: 'bare-metal.InfraMachineStatusController' });
    expect(created.metadata).toMatchObject({
      version: '1',
      owner: 'bare-metal.InfraMachineStatusController',
      labels: { [LABEL]: 'bare-metal' },
    });
    await expect(
      client.state.create(status('m1'), { owner: 'bare-metal.InfraMachineStatusController' }),
    ).rejects.toBeInstanceOf(AlreadyExistsError);
    const updated = await client.state.update({ ...created, metadata: { ...created.metadata, finalizers: ['x'] } });
    expect(updated.metadata.version).toBe('2');
    await expect(client.state.update(created)).rejects.toBeInstanceOf(FailedPreconditionError); // stale version
    await expect(client.state.update(updated, { owner: 'someone-else' })).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(
      client.state.destroy(created.metadata, { owner: 'bare-metal.InfraMachineStatusController' }),
    ).rejects.toBeInstanceOf(FailedPreconditionError); // finalizer x
    const released = await client.state.removeFinalizers(updated, ['x']);
    expect(released.outcome).toBe('removed');
    await client.state.destroy(created.metadata, { owner: 'bare-metal.InfraMachineStatusController' });
    await expect(client.state.get(created.metadata)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('teardown on an Omni without the Teardown route (1.3.4): Get + Update of the phase', async () => {
    await client.state.create(status('t1'), { owner: 'bare-metal.C' });
    expect(await client.state.teardown(status('t1').metadata)).toBe(true);
    expect((await client.state.get(status('t1').metadata)).metadata.phase).toBe('tearingDown');
    expect(client.stats().callsByMethod['Teardown']).toBeUndefined();
  });

  it('removeFinalizers on a read-only type keeps everything else, unknown spec fields included', async () => {
    const out = await client.state.removeFinalizers(im('m1'), ['bare-metal.InfraMachineController']);
    expect(out.outcome).toBe('removed');
    const after = await client.state.get(im('m1'));
    expect(after.metadata.finalizers).toEqual(['MachineCleanupController']);
    expect(Buffer.from(after.spec.protoSpec).toString('base64')).toBe(UNKNOWN_FIELD);
    expect((await client.state.removeFinalizers(im('m1'), ['bare-metal.InfraMachineController'])).outcome).toBe(
      'absent',
    );
    // Never found by its ID in this call (design rule 4): not-found, the caller decides.
    expect((await client.state.removeFinalizers(im('gone'), ['bare-metal.InfraMachineController'])).outcome).toBe(
      'not-found',
    );
  });

  it('removeFinalizers wins through a conflict storm', async () => {
    sim.faults.set({ conflictStorm: { type: T.InfraMachine, id: 'm2', count: 3 } });
    const out = await client.state.removeFinalizers(im('m2'), ['bare-metal.InfraMachineController']);
    expect(out).toMatchObject({ outcome: 'removed', attempts: 4 });
    expect((await client.state.get(im('m2'))).metadata.finalizers).toEqual([]);
  });

  it('rides out an Unavailable burst', async () => {
    sim.faults.set({ unavailableBurst: 3 });
    expect((await client.state.get(im('m1'))).metadata.id).toBe('m1');
    expect(client.stats().callsByMethod['Get']).toBe(4);
  });

  it('adopts the clock of an Omni eight minutes ahead', async () => {
    sim.faults.set({ clockOffsetMs: 8 * 60_000 });
    expect((await client.state.get(im('m1'))).metadata.id).toBe('m1');
    expect(Math.abs(client.serverClockOffsetMs() - 8 * 60_000)).toBeLessThan(2_000);
  });

  it('a key Omni does not know is refused, naming identity and fingerprint', async () => {
    const stranger = await generateKey('infra-provider:bare-metal');
    const c = await createOmniClient({
      endpoint: sim.endpoint,
      key: stranger.serviceAccountKey,
      delay: noDelay,
      env: {},
    });
    try {
      const err = await c.state.get(im('m1')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnauthenticatedError);
      expect((err as Error).message).toContain(stranger.fingerprint);
    } finally {
      await c.close();
    }
  });

  it('watch: bootstrap, then resumes from its bookmark after cut streams; starts over after a restart', async () => {
    const ac = new AbortController();
    const seen: WatchEvent[][] = [];
    let resets = 0;
    const done = (async () => {
      for await (const b of client.state.watchKind(NS, T.InfraMachine, { signal: ac.signal, onReset: () => resets++ }))
        seen.push(b);
    })();
    const waitFor = async (pred: () => boolean) => {
      for (let i = 0; i < 300 && !pred(); i++) await new Promise((r) => setTimeout(r, 10));
      expect(pred()).toBe(true);
    };
    const all = () => seen.flat();
    const watches = () => client.stats().callsByMethod['Watch'] ?? 0;
    await waitFor(() => all().some((e) => e.type === 'bootstrapped'));
    expect(
      all()
        .filter((e) => e.type === 'created')
        .map((e) => e.resource.metadata.id),
    ).toEqual(['m1', 'm2']);

    sim.gateway.breakStreams();
    await waitFor(() => watches() === 2);
    await client.state.removeFinalizers(im('m2'), ['bare-metal.InfraMachineController']);
    await waitFor(() => all().some((e) => e.type === 'updated' && e.resource.metadata.id === 'm2'));
    expect(resets).toBe(0);
    expect(all().filter((e) => e.type === 'bootstrapped')).toHaveLength(1); // resumed, not bootstrapped again

    sim.faults.restart(); // bookmarks of the old process are refused
    await waitFor(() => resets === 1 && all().filter((e) => e.type === 'bootstrapped').length === 2);
    ac.abort();
    await done;
  });
});
