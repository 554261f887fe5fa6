import { afterEach, describe, expect, it } from 'vitest';
import { C, type ControllerStore } from '../../../src/omni-sim/controllers/actor.js';
import { ControllerError } from '../../../src/omni-sim/controllers/queue.js';
import { startOmniControllers, type OmniControllers } from '../../../src/omni-sim/controllers/controllers.js';
import { INTERNAL } from '../../../src/omni-sim/api.js';
import { SimStore } from '../../../src/omni-sim/store/store.js';
import { EMPTY_QUERY } from '../../../src/omni-sim/store/query.js';
import type { Pointer, Resource } from '../../../src/omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID as L,
  LABEL_MACHINE_REQUEST_SET,
  newMetadata,
  T,
} from '../../../src/omni-api/resource.js';
import { encodeSpec } from '../../../src/omni-api/specs/codec.js';
import { MachineRequestStatusSpec } from '../../../src/omni-api/specs/messages.js';
import { OmniError } from '../../../src/omni-api/errors.js';
import { takeControllerFailures } from '../../setup.js';

const UUID = '6f9c0000-0000-4000-8000-000000000001';
const PROVIDER = { namespace: 'infra-provider', type: T.InfraProvider, id: 'bare-metal' };
const LINK = { namespace: 'default', type: T.Link, id: UUID };
const IM = { namespace: 'infra-provider', type: T.InfraMachine, id: UUID };
const MACHINE = { namespace: 'default', type: T.Machine, id: UUID };
const BM_FINALIZERS = ['bare-metal.WipeStatusController', 'bare-metal.MachineStatusController'];

let running: OmniControllers[] = [];
afterEach(() => {
  for (const c of running) c.stop();
  running = [];
});

function setup(version: string, extra: Resource[] = []): { store: SimStore; omni: OmniControllers; deleted: string[] } {
  const store = new SimStore({ clock: { now: () => Date.now() } });
  const deleted: string[] = [];
  store.seed([res(PROVIDER), ...extra]);
  const omni = startOmniControllers(store, {
    version,
    onServiceAccountDeleted: (id) => deleted.push(id),
    randomSuffix: (() => {
      let n = 0;
      return () => `r${String(n++).padStart(5, '0')}`;
    })(),
  });
  running.push(omni);
  return { store, omni, deleted };
}

function res(p: Pointer, init: Partial<Resource['metadata']> = {}, spec: Uint8Array = new Uint8Array()): Resource {
  return { metadata: newMetadata(p, { version: '1', ...init }), spec: { protoSpec: spec } };
}

const peek = (store: SimStore, p: Pointer) => store.peek(p);

/** What the provider does: put its finalizers on the InfraMachine (as its exact owner, any phase). */
function providerFinalizes(store: SimStore, p: Pointer, finalizers: string[]): void {
  const r = store.get(INTERNAL, p);
  r.metadata.finalizers = [...r.metadata.finalizers, ...finalizers];
  store.update(INTERNAL, r, r.metadata.owner);
}
function providerReleases(store: SimStore, p: Pointer): void {
  const r = store.get(INTERNAL, p);
  r.metadata.finalizers = r.metadata.finalizers.filter((f) => !f.startsWith('bare-metal.'));
  store.update(INTERNAL, r, r.metadata.owner);
}

describe('deleting a static machine', () => {
  it('1.3: provider ID an annotation, the Link destroyed, the InfraMachine stuck on provider finalizers', async () => {
    const { store, omni } = setup('1.3.4');
    const { link, machine } = omni.registerStaticMachine('bare-metal', UUID, { accepted: true });
    expect(link.metadata.annotations[L]).toBe('bare-metal');
    expect(link.metadata.labels[L]).toBeUndefined();
    expect(machine?.metadata.annotations[L]).toBe('bare-metal');
    providerFinalizes(store, IM, BM_FINALIZERS);
    await omni.idle();
    expect(peek(store, LINK)?.metadata.finalizers).toEqual([]); // no InfraMachineController finalizer before 1.4

    omni.deleteMachine(UUID);
    await omni.idle();
    expect(peek(store, LINK)).toBeUndefined();
    expect(peek(store, MACHINE)).toBeUndefined();
    expect(peek(store, IM)?.metadata).toMatchObject({ phase: 'tearingDown', finalizers: BM_FINALIZERS });

    providerReleases(store, IM);
    await omni.idle();
    expect(peek(store, IM)).toBeUndefined();
  });

  it('1.4: provider ID a label, InfraMachineController holds the Link until the InfraMachine is gone', async () => {
    const { store, omni } = setup('1.4.0');
    const { link, machine } = omni.registerStaticMachine('bare-metal', UUID, { accepted: true });
    expect(link.metadata.labels[L]).toBe('bare-metal');
    expect(machine?.metadata.labels[L]).toBe('bare-metal');
    providerFinalizes(store, IM, BM_FINALIZERS);
    await omni.idle();
    expect(peek(store, LINK)?.metadata.finalizers).toEqual([C.InfraMachine]);

    omni.deleteMachine(UUID);
    await omni.idle();
    expect(peek(store, LINK)?.metadata).toMatchObject({ phase: 'tearingDown', finalizers: [C.InfraMachine] });
    expect(peek(store, MACHINE)).toBeUndefined();
    expect(peek(store, IM)?.metadata.phase).toBe('tearingDown');

    providerReleases(store, IM);
    await omni.idle();
    expect(peek(store, IM)).toBeUndefined();
    expect(peek(store, LINK)).toBeUndefined();
  });
});

describe('deleting the infra provider', () => {
  const withStatuses = (): Resource[] => [
    res(
      { namespace: 'infra-provider', type: T.InfraProviderStatus, id: 'bare-metal' },
      { labels: { [L]: 'bare-metal' } },
    ),
    res(
      { namespace: 'infra-provider-ephemeral', type: T.InfraProviderHealthStatus, id: 'bare-metal' },
      { owner: 'bare-metal.ProviderHealthStatusController', labels: { [L]: 'bare-metal' } },
    ),
    res(
      { namespace: 'infra-provider', type: T.InfraMachineStatus, id: UUID },
      { owner: 'bare-metal.InfraMachineStatusController', labels: { [L]: 'bare-metal' } },
    ),
    res({ namespace: 'default', type: T.MachineRequestSet, id: 'other-set' }),
  ];

  it('0.49: there is no infra.Provider cleanup', async () => {
    const { store, omni, deleted } = setup('0.49', withStatuses());
    await omni.idle();
    store.teardown(INTERNAL, PROVIDER, '');
    await omni.idle();
    expect(deleted).toEqual([]);
    expect(peek(store, { namespace: 'infra-provider', type: T.InfraProviderStatus, id: 'bare-metal' })).toBeDefined();
  });

  it('1.3: only statuses with owner "" and the service account go; machines keep the provider finalizers', async () => {
    const { store, omni, deleted } = setup('1.3', withStatuses());
    omni.registerStaticMachine('bare-metal', UUID);
    providerFinalizes(store, IM, BM_FINALIZERS);
    await omni.idle();
    expect(peek(store, PROVIDER)?.metadata.finalizers).toEqual([C.InfraProviderCleanup]);
    store.teardown(INTERNAL, PROVIDER, '');
    await omni.idle();
    expect(deleted).toEqual(['bare-metal']);
    expect(peek(store, PROVIDER)).toBeUndefined();
    expect(peek(store, { namespace: 'infra-provider', type: T.InfraProviderStatus, id: 'bare-metal' })).toBeUndefined();
    expect(
      peek(store, { namespace: 'infra-provider-ephemeral', type: T.InfraProviderHealthStatus, id: 'bare-metal' }),
    ).toBeDefined();
    expect(peek(store, { namespace: 'infra-provider', type: T.InfraMachineStatus, id: UUID })).toBeDefined();
    expect(peek(store, LINK)?.metadata.phase).toBe('running');
    expect(peek(store, IM)?.metadata.finalizers).toEqual(BM_FINALIZERS);
    expect(peek(store, { namespace: 'default', type: T.MachineRequestSet, id: 'other-set' })).toBeDefined();
    // no refusal of registrations before 1.4
    expect(() => omni.registerStaticMachine('bare-metal', 'another-uuid')).not.toThrow();
  });

  it('1.4: tears down Links, strips InfraMachines, drops statuses, user-owned sets; no new registrations', async () => {
    const { store, omni, deleted } = setup('1.4', withStatuses());
    omni.registerStaticMachine('bare-metal', UUID);
    providerFinalizes(store, IM, BM_FINALIZERS);
    await omni.idle();
    store.teardown(INTERNAL, PROVIDER, '');
    let err: unknown;
    try {
      omni.registerStaticMachine('bare-metal', 'another-uuid');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OmniError);
    expect((err as OmniError).grpcCode).toBe(5);
    expect((err as OmniError).omniMessage).toBe("the infra provider is being deleted or doesn't exist");
    await omni.idle();
    expect(deleted).toEqual(['bare-metal']);
    for (const p of [
      PROVIDER,
      LINK,
      IM,
      { namespace: 'infra-provider', type: T.InfraMachineStatus, id: UUID },
      { namespace: 'default', type: T.MachineRequestSet, id: 'other-set' },
    ]) {
      expect(peek(store, p), `${p.type}/${p.id}`).toBeUndefined();
    }
  });
});

describe('MachineRequests and their sets', () => {
  it('1.6: requests owned by MachineRequestSetStatusController, scale-down tears down, no replacements', async () => {
    const { store, omni } = setup('1.6');
    const { requests } = omni.createMachineRequestSet({ id: 'set', providerId: 'bare-metal', machineCount: 2 });
    expect(requests.map((r) => r.metadata.owner)).toEqual([C.MachineRequestSetStatus, C.MachineRequestSetStatus]);
    expect(requests[0]?.metadata.labels).toEqual({ [L]: 'bare-metal', [LABEL_MACHINE_REQUEST_SET]: 'set' });
    providerFinalizes(store, requests[1]!.metadata, ['bare-metal.ProvisionController']);
    omni.scaleDown('set', 1);
    await omni.idle();
    expect(peek(store, requests[1]!.metadata)?.metadata).toMatchObject({
      phase: 'tearingDown',
      finalizers: ['bare-metal.ProvisionController'],
    });
    providerReleases(store, requests[1]!.metadata);
    await omni.idle();
    expect(store.list(INTERNAL, 'infra-provider', T.MachineRequest, EMPTY_QUERY).map((r) => r.metadata.id)).toEqual([
      requests[0]!.metadata.id,
    ]);
  });

  for (const v of ['1.7', '1.8']) {
    it(`${v}: requests have no owner, and a set that still wants machines gets a replacement`, async () => {
      const { store, omni } = setup(v);
      const { requests } = omni.createMachineRequestSet({ id: 'set', providerId: 'bare-metal', machineCount: 2 });
      expect(requests.map((r) => r.metadata.owner)).toEqual(['', '']);
      providerFinalizes(store, requests[0]!.metadata, ['bare-metal.ProvisionController']);
      store.teardown(INTERNAL, requests[0]!.metadata, '');
      await omni.idle();
      // The stuck one still counts.
      expect(store.list(INTERNAL, 'infra-provider', T.MachineRequest, EMPTY_QUERY)).toHaveLength(2);
      providerReleases(store, requests[0]!.metadata);
      await omni.idle();
      const ids = store.list(INTERNAL, 'infra-provider', T.MachineRequest, EMPTY_QUERY).map((r) => r.metadata.id);
      expect(ids).toHaveLength(2);
      expect(ids).not.toContain(requests[0]!.metadata.id);
      const replacement = ids.find((id) => id !== requests[1]!.metadata.id) ?? '';
      expect(replacement).toMatch(/^set-[a-z0-9]{6}$/);
      expect(
        peek(store, { namespace: 'infra-provider', type: T.MachineRequest, id: replacement })?.metadata.labels,
      ).toEqual({ [L]: 'bare-metal', [LABEL_MACHINE_REQUEST_SET]: 'set' });
    });
  }

  it('1.4: a set torn down, its provider gone: requests keep only ClusterMachineRequestStatusController', async () => {
    const { store, omni } = setup('1.4');
    const { set, requests } = omni.createMachineRequestSet({ id: 'set', providerId: 'gone', machineCount: 1 });
    const r = requests[0]!;
    providerFinalizes(store, r.metadata, ['gone.ProvisionController', C.ClusterMachineRequestStatus]);
    store.teardown(INTERNAL, set.metadata, '');
    await omni.idle();
    // ClusterMachineRequestStatusController is released by its own controller once torn down: the request goes.
    expect(peek(store, r.metadata)).toBeUndefined();
    expect(peek(store, set.metadata)).toBeUndefined();

    const v13 = setup('1.3');
    const s13 = v13.omni.createMachineRequestSet({ id: 'set', providerId: 'gone', machineCount: 1 });
    providerFinalizes(v13.store, s13.requests[0]!.metadata, ['gone.ProvisionController']);
    v13.store.teardown(INTERNAL, s13.set.metadata, '');
    await v13.omni.idle();
    expect(peek(v13.store, s13.requests[0]!.metadata)?.metadata.finalizers).toEqual(['gone.ProvisionController']);
    expect(peek(v13.store, s13.set.metadata)?.metadata.phase).toBe('tearingDown');
  });

  it("MachineRequestStatus holds Omni's cleanup finalizer until torn down, which tears down the Link too", async () => {
    const { store, omni } = setup('1.3');
    omni.registerStaticMachine('bare-metal', UUID);
    const p = { namespace: 'infra-provider', type: T.MachineRequestStatus, id: 'req-1' };
    const spec = encodeSpec(MachineRequestStatusSpec, { id: UUID, stage: 2, error: '', status: '' });
    store.create(
      INTERNAL,
      {
        metadata: newMetadata(p, { owner: 'bare-metal.ProvisionController', labels: { [L]: 'bare-metal' } }),
        spec: { protoSpec: spec },
      },
      'bare-metal.ProvisionController',
    );
    await omni.idle();
    expect(peek(store, p)?.metadata.finalizers).toEqual([C.MachineRequestStatusCleanup]);
    expect(store.teardown(INTERNAL, p, 'bare-metal.ProvisionController')).toBe(false);
    await omni.idle();
    expect(peek(store, p)?.metadata.finalizers).toEqual([]);
    expect(peek(store, LINK)).toBeUndefined(); // torn down, no finalizers, destroyed
    store.destroy(INTERNAL, p, 'bare-metal.ProvisionController');
  });

  for (const v of ['1.3.4', '1.9.3']) {
    it(`${v}: ClusterMachineRequestStatusController holds a request while others are on, lets go at once`, async () => {
      const { store, omni } = setup(v);
      const { requests } = omni.createMachineRequestSet({ id: 'set', providerId: 'bare-metal', machineCount: 1 });
      const r = requests[0]!.metadata;
      await omni.idle();
      expect(peek(store, r)?.metadata.finalizers).toEqual([C.ClusterMachineRequestStatus]); // on every running request
      providerFinalizes(store, r, ['bare-metal.ProvisionController']);
      omni.scaleDown('set', 0);
      await omni.idle();
      expect(peek(store, r)?.metadata).toMatchObject({
        phase: 'tearingDown',
        finalizers: [C.ClusterMachineRequestStatus, 'bare-metal.ProvisionController'],
      });
      providerReleases(store, r);
      await omni.idle();
      expect(peek(store, r)).toBeUndefined();
    });

    it(`${v}: MachineRequestStatusCleanupController waits on ClusterMachine, controller's MachineSetNode`, async () => {
      const { store, omni } = setup(v);
      omni.registerStaticMachine('bare-metal', UUID);
      const owner = 'bare-metal.ProvisionController';
      const status = (id: string, machine: string) => {
        const p = { namespace: 'infra-provider', type: T.MachineRequestStatus, id };
        store.create(
          INTERNAL,
          {
            metadata: newMetadata(p, { owner, labels: { [L]: 'bare-metal' } }),
            spec: { protoSpec: encodeSpec(MachineRequestStatusSpec, { id: machine, stage: 2, error: '', status: '' }) },
          },
          owner,
        );
        return p;
      };
      const node = { namespace: 'default', type: 'MachineSetNodes.omni.sidero.dev', id: UUID };
      const cm = { namespace: 'default', type: 'ClusterMachines.omni.sidero.dev', id: UUID };
      store.create(INTERNAL, res(node, { owner: 'MachineSetNodeController' }), 'MachineSetNodeController');
      store.create(INTERNAL, res(cm, { owner: 'MachineSetStatusController' }), 'MachineSetStatusController');
      const held = status('req-1', UUID);
      const none = status('req-2', '');
      await omni.idle();
      store.teardown(INTERNAL, held, owner);
      store.teardown(INTERNAL, none, owner);
      await omni.idle();
      // Naming no machine, there is nothing to wait for: it lets go at once.
      expect(peek(store, none)?.metadata.finalizers).toEqual([]);
      expect(peek(store, held)?.metadata.finalizers).toEqual([C.MachineRequestStatusCleanup]);
      store.destroy(INTERNAL, node, 'MachineSetNodeController');
      await omni.idle();
      // The ClusterMachine still.
      expect(peek(store, held)?.metadata.finalizers).toEqual([C.MachineRequestStatusCleanup]);
      expect(peek(store, LINK)?.metadata.phase).toBe('running');
      store.destroy(INTERNAL, cm, 'MachineSetStatusController');
      await omni.idle();
      expect(peek(store, held)?.metadata.finalizers).toEqual([]);
      expect(peek(store, LINK)).toBeUndefined(); // then it tears the machine's Link down
    });

    it(`${v}: MachineRequestStatusCleanupController destroys a user-owned MachineSetNode of the machine`, async () => {
      const { store, omni } = setup(v);
      const owner = 'bare-metal.ProvisionController';
      const p = { namespace: 'infra-provider', type: T.MachineRequestStatus, id: 'req-1' };
      const node = { namespace: 'default', type: 'MachineSetNodes.omni.sidero.dev', id: UUID };
      store.create(INTERNAL, res(node), '');
      store.create(
        INTERNAL,
        {
          metadata: newMetadata(p, { owner, labels: { [L]: 'bare-metal' } }),
          spec: { protoSpec: encodeSpec(MachineRequestStatusSpec, { id: UUID, stage: 2, error: '', status: '' }) },
        },
        owner,
      );
      await omni.idle();
      store.teardown(INTERNAL, p, owner);
      await omni.idle();
      expect(peek(store, node)).toBeUndefined();
      expect(peek(store, p)?.metadata.finalizers).toEqual([]);
    });
  }

  it("ConfigPatchRequest: Omni's finalizer clears once the request is torn down", async () => {
    const { store, omni } = setup('1.4');
    const p = { namespace: 'infra-provider', type: T.ConfigPatchRequest, id: 'cpr-1' };
    store.create(
      INTERNAL,
      {
        metadata: newMetadata(p, { owner: 'bare-metal.ProvisionController', labels: { [L]: 'bare-metal' } }),
        spec: { protoSpec: new Uint8Array() },
      },
      'bare-metal.ProvisionController',
    );
    await omni.idle();
    expect(peek(store, p)?.metadata.finalizers).toEqual([C.ConfigPatchRequest]);
    store.teardown(INTERNAL, p, 'bare-metal.ProvisionController');
    await omni.idle();
    expect(peek(store, p)?.metadata.finalizers).toEqual([]);
  });
});

describe('a failure inside a controller fails the test that caused it', () => {
  /** A store whose writes of `type` fail as a bug would (not a NotFound or a conflict, which are reconciled). */
  function failingWrites(type: string): ControllerStore {
    const store = new SimStore({ clock: { now: () => Date.now() } });
    store.seed([res(PROVIDER)]);
    return new Proxy(store, {
      get: (target, prop, receiver) => {
        if (prop === 'update') {
          return (who: unknown, r: Resource, ...rest: unknown[]) => {
            if (r.metadata.type === type) throw new TypeError('disk on fire');
            return (target.update as (...a: unknown[]) => unknown).call(target, who, r, ...rest);
          };
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  it('idle() rejects with it, `failures` keeps it, and onError hears of it', async () => {
    const heard: string[] = [];
    const omni = startOmniControllers(failingWrites(T.InfraProvider), {
      version: '1.9.3',
      onError: (f) => heard.push(f.task),
    });
    running.push(omni);
    const err = await omni.idle().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControllerError);
    expect(err).toMatchObject({
      task: 'provider:bare-metal',
      message: expect.stringContaining('disk on fire'),
      cause: expect.any(TypeError),
    });
    expect(omni.failures).toEqual([err]);
    expect(heard).toEqual(['provider:bare-metal']);
    expect(takeControllerFailures()).toEqual([]);
  });

  it('without an onError it reaches the test setup (test/setup.ts), which fails the test', async () => {
    const omni = startOmniControllers(failingWrites(T.InfraProvider), { version: '1.9.3' });
    running.push(omni);
    await expect(omni.idle()).rejects.toBeInstanceOf(ControllerError);
    // Taken here so that this test passes: left, the setup's afterEach would fail it.
    expect(takeControllerFailures().map((f) => f.task)).toEqual(['provider:bare-metal']);
  });
});
