import { describe, expect, it } from 'vitest';
import { createAccessApi } from '../../../src/omni-sim/access/access.js';
import type { Identity, SimEvent, StateApi, WatchParams } from '../../../src/omni-sim/api.js';
import { INTERNAL } from '../../../src/omni-sim/api.js';
import { SimStore } from '../../../src/omni-sim/store/store.js';
import { EMPTY_QUERY } from '../../../src/omni-sim/store/query.js';
import { OmniError } from '../../../src/omni-api/errors.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import { LABEL_INFRA_PROVIDER_ID as L, newMetadata, T } from '../../../src/omni-api/resource.js';
import { EventType } from '../../../src/omni-api/wire.js';
import { encodeSpec } from '../../../src/omni-api/specs/codec.js';
import { MachineRequestSpec } from '../../../src/omni-api/specs/messages.js';

const BM: Identity = {
  name: 'infra-provider:bare-metal',
  email: 'bare-metal@infra-provider.serviceaccount.omni.sidero.dev',
  role: 'InfraProvider',
  providerId: 'bare-metal',
};
const READER: Identity = { name: 'r@example.org', email: 'r@example.org', role: 'Reader' };
const OPERATOR: Identity = { name: 'o@example.org', email: 'o@example.org', role: 'Operator' };
const ADMIN: Identity = { name: 'a@example.org', email: 'a@example.org', role: 'Admin' };
const NONE: Identity = { name: 'n@example.org', email: 'n@example.org', role: 'None' };

function res(
  namespace: string,
  type: string,
  id: string,
  init: Partial<Resource['metadata']> = {},
  spec: Uint8Array = new Uint8Array([8, 1]),
): Resource {
  return { metadata: newMetadata({ namespace, type, id }, init), spec: { protoSpec: spec } };
}

function setup(version: string, opts: { registered?: boolean } = {}): { store: SimStore; api: StateApi } {
  const store = new SimStore({ clock: { now: () => Date.now() } });
  const seed: Resource[] = [
    res('infra-provider', T.InfraMachine, 'm-own', {
      owner: 'InfraMachineController',
      labels: { [L]: 'bare-metal' },
      finalizers: ['bare-metal.WipeStatusController'],
    }),
    res('infra-provider', T.InfraMachine, 'm-other', { owner: 'InfraMachineController', labels: { [L]: 'proxmox' } }),
    res('infra-provider', T.MachineRequestStatus, 'r-unlabelled', { owner: 'bare-metal.ProvisionController' }),
    res('infra-provider', T.BMCConfig, 'm-own', { owner: 'BMCConfigController', labels: { [L]: 'bare-metal' } }),
    res('default', T.Machine, 'm-own', { owner: 'MachineController', labels: { [L]: 'bare-metal' } }),
    res('default', T.Link, 'm-own', { labels: { [L]: 'bare-metal' } }),
    res('system', T.SysVersion, 'current', {}),
  ];
  if (opts.registered !== false) seed.push(res('infra-provider', T.InfraProvider, 'bare-metal', {}, new Uint8Array()));
  for (const r of seed) store.create(INTERNAL, r, r.metadata.owner);
  return { store, api: createAccessApi(store, { version }) };
}

function expectError(fn: () => unknown, grpcCode: number, message: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught, `expected ${grpcCode} ${message}`).toBeInstanceOf(OmniError);
  expect({ code: (caught as OmniError).grpcCode, message: (caught as OmniError).omniMessage }).toEqual({
    code: grpcCode,
    message,
  });
}

const PD = 7;

/** A refusal of Omni's role checks, which run as validations of its API state (as the real-Omni recordings show). */
const roleRefusal = (why: string) =>
  `failed to validate: 1 error occurred:\n\t* rpc error: code = PermissionDenied desc = ${why}\n\n`;
const IA = 3;
const NF = 5;

function watchParams(p: Partial<WatchParams> & { namespace: string; type: string }): WatchParams {
  return {
    bootstrapContents: false,
    tailEvents: 0,
    query: EMPTY_QUERY,
    aggregated: false,
    bootstrapBookmark: false,
    apiVersion: 1,
    ...p,
  };
}

/** Reads batches until `count` are collected or `ms` pass. */
async function collect(
  api: StateApi,
  who: Identity,
  params: WatchParams,
  count: number,
  ms: number,
  during?: () => void,
): Promise<SimEvent[][]> {
  const ac = new AbortController();
  const out: SimEvent[][] = [];
  const it = api.watch(who, params, ac.signal)[Symbol.asyncIterator]();
  const timer = setTimeout(() => ac.abort(), ms);
  let first = true;
  try {
    while (out.length < count) {
      const next = it.next();
      if (first && during) setTimeout(during, 10);
      first = false;
      const r = await Promise.race([
        next,
        new Promise<undefined>((resolve) =>
          ac.signal.addEventListener('abort', () => resolve(undefined), { once: true }),
        ),
      ]);
      if (!r || r.done) break;
      out.push(r.value);
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
    void it.return?.(undefined);
  }
  return out;
}

describe('infra provider: registration, namespaces, types', () => {
  it('refuses everything while infra.Provider/<id> is missing (0.50+), not before', () => {
    const { api } = setup('1.3', { registered: false });
    expectError(
      () => api.list(BM, 'infra-provider', T.InfraMachine, EMPTY_QUERY),
      PD,
      'infra provider with name "bare-metal" is not registered in the system',
    );
    expectError(
      () =>
        api.get(BM, {
          namespace: 'infra-provider:bare-metal',
          type: 'WipeStatuses.bare-metal.infraprovider.sidero.dev',
          id: 'x',
        }),
      PD,
      'infra provider with name "bare-metal" is not registered in the system',
    );
    const old = setup('0.49', { registered: false });
    expect(old.api.list(BM, 'infra-provider', T.InfraMachine, EMPTY_QUERY).map((r) => r.metadata.id)).toEqual([
      'm-own',
    ]);
  });

  it('checks namespaces and the type suffix in the own namespace', () => {
    const { api } = setup('1.3');
    expectError(
      () => api.list(BM, 'infra-provider:proxmox', 'Foos.proxmox.infraprovider.sidero.dev', EMPTY_QUERY),
      PD,
      'namespace not allowed, must be one of: infra-provider, infra-provider-ephemeral, infra-provider:bare-metal',
    );
    expectError(
      () => api.create(BM, res('infra-provider:bare-metal', 'WipeStatuses.proxmox.infraprovider.sidero.dev', 'x'), ''),
      IA,
      'resources in namespace "infra-provider:bare-metal" must have a type suffix ' +
        '".bare-metal.infraprovider.sidero.dev"',
    );
    const created = api.create(
      BM,
      res('infra-provider:bare-metal', 'WipeStatuses.bare-metal.infraprovider.sidero.dev', 'x'),
      'bare-metal.WipeStatusController',
    );
    expect(created.metadata.labels).toEqual({}); // no label forced in the own namespace
    expectError(
      () => api.list(BM, 'infra-provider', T.Machine, EMPTY_QUERY),
      PD,
      'internal error: resource "Machines.omni.sidero.dev" is not an infra provider managed resource',
    );
    // A type nobody manages: Omni's API reads a Get, Update or Destroy first (the infra-provider state
    // refuses the type), and validates a List, Create or Watch first (the role check refuses it).
    expectError(
      () => api.get(BM, { namespace: 'infra-provider', type: 'Nope.omni.sidero.dev', id: 'x' }),
      PD,
      'internal error: resource "Nope.omni.sidero.dev" is not an infra provider managed resource',
    );
    expectError(
      () => api.destroy(BM, { namespace: 'infra-provider', type: 'Nope.omni.sidero.dev', id: 'x' }, ''),
      PD,
      'internal error: resource "Nope.omni.sidero.dev" is not an infra provider managed resource',
    );
    expectError(
      () => api.list(BM, 'infra-provider', 'Nope.omni.sidero.dev', EMPTY_QUERY),
      PD,
      roleRefusal('no access is permitted'),
    );
    expectError(
      () => api.create(BM, res('infra-provider', 'Nope.omni.sidero.dev', 'x'), ''),
      PD,
      roleRefusal('no access is permitted'),
    );
  });

  it('keeps read-only types read-only apart from finalizers', () => {
    const { api } = setup('1.3');
    const im = api.get(BM, { namespace: 'infra-provider', type: T.InfraMachine, id: 'm-own' });
    expectError(
      () => api.create(BM, res('infra-provider', T.InfraMachine, 'new'), 'InfraMachineController'),
      PD,
      'infra providers are not allowed to create "InfraMachines.omni.sidero.dev" resources',
    );
    expectError(
      () => api.destroy(BM, im.metadata, 'InfraMachineController'),
      PD,
      'infra providers are not allowed to destroy "InfraMachines.omni.sidero.dev" resources',
    );
    const msg =
      'infra providers are not allowed to update "InfraMachines.omni.sidero.dev" resources other than setting ' +
      'finalizers';
    const changed = structuredClone(im);
    changed.spec.protoSpec = new Uint8Array([8, 2]);
    expectError(() => api.update(BM, changed, 'InfraMachineController'), PD, msg);
    const relabelled = structuredClone(im);
    relabelled.metadata.annotations = { a: 'b' };
    expectError(() => api.update(BM, relabelled, 'InfraMachineController'), PD, msg);
    expectError(() => api.teardown(BM, im.metadata, 'InfraMachineController'), PD, msg);
    const released = structuredClone(im);
    released.metadata.finalizers = [];
    const stored = api.update(BM, released, 'InfraMachineController');
    expect(stored.metadata.finalizers).toEqual([]);
    expect(stored.metadata.labels[L]).toBe('bare-metal');
    expectError(
      () =>
        api.update(BM, { ...im, metadata: { ...im.metadata, finalizers: ['bare-metal.X'] } }, 'InfraMachineController'),
      9,
      // Go's %q of the int64 versions 1 and 2: character literals.
      'failed to update: resource InfraMachines.omni.sidero.dev(infra-provider/m-own@2) update conflict: expected ' +
        "version '\\x01', actual version '\\x02'",
    );
    expect([im.metadata.version, stored.metadata.version]).toEqual(['1', '2']);
    expectError(
      () =>
        api.update(BM, { ...im, metadata: { ...im.metadata, type: T.BMCConfig, version: '1' } }, 'BMCConfigController'),
      PD,
      'infra providers are not allowed to update "BMCConfigs.omni.sidero.dev" resources other than setting finalizers',
    );
  });

  it('checks IDs of ProviderStatus and ProviderHealthStatus', () => {
    const { api } = setup('1.3');
    expectError(
      () => api.create(BM, res('infra-provider', T.InfraProviderStatus, 'proxmox'), ''),
      IA,
      'resource ID must match the infra provider ID "bare-metal"',
    );
    expectError(
      () => api.create(BM, res('infra-provider-ephemeral', T.InfraProviderHealthStatus, 'x'), ''),
      IA,
      'resource ID must match the infra provider ID "bare-metal"',
    );
    expect(api.create(BM, res('infra-provider', T.InfraProviderStatus, 'bare-metal'), '').metadata.labels[L]).toBe(
      'bare-metal',
    );
  });

  it('filters by label: Get NotFound, List filtered, label forced on create, Update/Destroy need it', () => {
    const { api } = setup('1.3');
    expectError(
      () => api.get(BM, { namespace: 'infra-provider', type: T.InfraMachine, id: 'm-other' }),
      NF,
      'not found',
    );
    expectError(
      () => api.get(BM, { namespace: 'infra-provider', type: T.InfraProvider, id: 'bare-metal' }),
      NF,
      'not found',
    );
    expect(api.list(BM, 'infra-provider', T.InfraMachine, EMPTY_QUERY).map((r) => r.metadata.id)).toEqual(['m-own']);
    const mrs = api.create(
      BM,
      res('infra-provider', T.MachineRequestStatus, 'r1', { labels: { [L]: 'proxmox', x: 'y' } }),
      'bare-metal.ProvisionController',
    );
    expect(mrs.metadata.labels).toEqual({ [L]: 'bare-metal', x: 'y' });
    const foreign = api.get(ADMIN, { namespace: 'infra-provider', type: T.MachineRequestStatus, id: 'r-unlabelled' });
    expectError(() => api.update(BM, foreign, 'bare-metal.ProvisionController'), NF, 'not found');
    expectError(() => api.destroy(BM, foreign.metadata, 'bare-metal.ProvisionController'), NF, 'not found');
    const dropped = structuredClone(mrs);
    dropped.metadata.labels = {};
    expect(api.update(BM, dropped, 'bare-metal.ProvisionController').metadata.labels).toEqual({ [L]: 'bare-metal' });
  });

  it('filters watches: foreign events dropped, BOOTSTRAPPED passes, no initial event for a missing one', async () => {
    const { api, store } = setup('1.3');
    const boot = await collect(
      api,
      BM,
      watchParams({ namespace: 'infra-provider', type: T.InfraMachine, bootstrapContents: true }),
      2,
      500,
    );
    expect(boot.map((b) => b.map((e) => [e.eventType, e.resource.metadata.id]))).toEqual([
      [[EventType.CREATED, 'm-own']],
      [[EventType.BOOTSTRAPPED, '']],
    ]);

    const single = await collect(
      api,
      BM,
      watchParams({ namespace: 'infra-provider', type: T.MachineRequestStatus, id: 'r9' }),
      1,
      2000,
      () => {
        store.create(INTERNAL, res('infra-provider', T.MachineRequestStatus, 'r9', { labels: { [L]: 'proxmox' } }), '');
        store.destroy(INTERNAL, { namespace: 'infra-provider', type: T.MachineRequestStatus, id: 'r9' }, '');
        store.create(
          INTERNAL,
          res('infra-provider', T.MachineRequestStatus, 'r9', { labels: { [L]: 'bare-metal' } }),
          '',
        );
      },
    );
    expect(single.map((b) => b.map((e) => [e.eventType, e.resource.metadata.labels[L]]))).toEqual([
      [[EventType.CREATED, 'bare-metal']],
    ]);

    const agg = await collect(
      api,
      BM,
      watchParams({ namespace: 'infra-provider', type: T.InfraMachine, aggregated: true }),
      1,
      2000,
      () => {
        store.create(INTERNAL, res('infra-provider', T.InfraMachine, 'm3', { labels: { [L]: 'proxmox' } }), '');
      },
    );
    expect(agg).toEqual([[]]); // an emptied aggregated batch is still sent
  });

  it('lets NOOP bookmarks through from 1.0 only', async () => {
    const p = watchParams({ namespace: 'infra-provider', type: T.InfraMachine, bootstrapBookmark: true });
    const v1 = await collect(setup('1.0').api, BM, p, 1, 300);
    expect(v1.flat().map((e) => e.eventType)).toEqual([EventType.NOOP]);
    const v0 = await collect(setup('0.50').api, BM, p, 1, 300);
    expect(v0).toEqual([]);
  });
});

describe('infra provider: outside the infra namespaces', () => {
  it('reads Machines and SysVersions, nothing else; no writes', () => {
    const { api } = setup('1.3');
    expect(api.list(BM, 'default', T.Machine, EMPTY_QUERY)).toHaveLength(1);
    expect(api.get(BM, { namespace: 'system', type: T.SysVersion, id: 'current' }).metadata.id).toBe('current');
    expectError(
      () => api.destroy(BM, { namespace: 'default', type: T.Machine, id: 'm-own' }, 'MachineController'),
      PD,
      roleRefusal('only read access is permitted'),
    );
    expectError(
      () => api.get(BM, { namespace: 'default', type: T.Link, id: 'm-own' }),
      PD,
      roleRefusal('unauthorized: access denied: insufficient role: "InfraProvider"'),
    );
    expectError(
      () => api.list(BM, 'default', 'Foos.omni.sidero.dev', EMPTY_QUERY),
      PD,
      roleRefusal('no access is permitted'),
    );
    expectError(
      () => api.list(NONE, 'default', T.Machine, EMPTY_QUERY),
      PD,
      roleRefusal('unauthorized: access denied: insufficient role: "None"'),
    );
  });
});

describe('users', () => {
  it('reads all infra namespaces (BMCConfig: Admin only), writes only Providers and (1.7+, Operator+) requests', () => {
    const { api } = setup('1.6');
    expect(api.list(READER, 'infra-provider', T.InfraMachine, EMPTY_QUERY)).toHaveLength(2);
    expectError(
      () => api.list(READER, 'infra-provider', T.BMCConfig, EMPTY_QUERY),
      PD,
      'only admins are allowed to read "BMCConfigs.omni.sidero.dev" resources',
    );
    expect(api.list(ADMIN, 'infra-provider', T.BMCConfig, EMPTY_QUERY)).toHaveLength(1);
    const im = api.get(ADMIN, { namespace: 'infra-provider', type: T.InfraMachine, id: 'm-own' });
    im.metadata.finalizers = [];
    expectError(
      () => api.update(ADMIN, im, 'InfraMachineController'),
      PD,
      'users are not allowed to modify "InfraMachines.omni.sidero.dev" resources',
    );
    expectError(
      () => api.create(OPERATOR, res('infra-provider', T.MachineRequest, 'req'), ''),
      PD,
      'users are not allowed to modify "MachineRequests.omni.sidero.dev" resources',
    );
    expect(api.create(READER, res('infra-provider', T.InfraProvider, 'proxmox'), '').metadata.id).toBe('proxmox');

    const v17 = setup('1.7').api;
    expectError(
      () => v17.create(READER, res('infra-provider', T.MachineRequest, 'req'), ''),
      PD,
      'only operators and admins are allowed to modify "MachineRequests.omni.sidero.dev" resources',
    );
    const spec = encodeSpec(MachineRequestSpec, {
      talos_version: 'v1.10.0',
      extensions: [],
      kernel_args: [],
      meta_values: [],
      provider_data: '',
      grpc_tunnel: 0,
    });
    const req = v17.create(OPERATOR, res('infra-provider', T.MachineRequest, 'req', {}, spec), '');
    req.spec.protoSpec = encodeSpec(MachineRequestSpec, {
      talos_version: 'v1.11.0',
      extensions: [],
      kernel_args: [],
      meta_values: [],
      provider_data: '',
      grpc_tunnel: 0,
    });
    expectError(
      () => v17.update(OPERATOR, req, ''),
      IA,
      'failed to validate: 1 error occurred:\n\t* machine request spec is immutable\n\n',
    );
    expect(v17.teardown(OPERATOR, req.metadata, '')).toBe(true);
  });

  it('an Auditor (1.10.0+) reads the infra namespaces and is refused what needs an Operator', () => {
    const AUDITOR: Identity = { name: 'au@example.org', email: 'au@example.org', role: 'Auditor' };
    const { api } = setup('1.10.4');
    expect(api.list(AUDITOR, 'infra-provider', T.InfraMachine, EMPTY_QUERY)).toHaveLength(2);
    expectError(
      () => api.create(AUDITOR, res('infra-provider', T.MachineRequest, 'req'), ''),
      PD,
      'only operators and admins are allowed to modify "MachineRequests.omni.sidero.dev" resources',
    );
    const link = { namespace: 'default', type: T.Link, id: 'm-own' };
    expect(api.get(AUDITOR, link).metadata.id).toBe('m-own');
    expectError(
      () => api.teardown(AUDITOR, link, ''),
      PD,
      roleRefusal('unauthorized: access denied: insufficient role: "Auditor"'),
    );
  });

  it('update Links up to 1.8; from 1.9 only read and delete, teardown authorised as a destroy', () => {
    const link = { namespace: 'default', type: T.Link, id: 'm-own' };
    const v18 = setup('1.8').api;
    const l = v18.get(READER, link);
    expectError(
      () => v18.update(READER, l, ''),
      PD,
      roleRefusal('unauthorized: access denied: insufficient role: "Reader"'),
    );
    expect(
      v18.update(OPERATOR, { ...l, metadata: { ...l.metadata, annotations: { a: 'b' } } }, '').metadata.version,
    ).toBe('2');
    const v19 = setup('1.9').api;
    expectError(
      () => v19.update(OPERATOR, v19.get(OPERATOR, link), ''),
      PD,
      roleRefusal('only read and delete access is permitted'),
    );
    expect(v19.teardown(OPERATOR, link, '')).toBe(true);
    expect(v19.get(READER, link).metadata.phase).toBe('tearingDown');
  });

  it('from 1.4 refuses to tear down or destroy a provider with Running machines', () => {
    const p = { namespace: 'infra-provider', type: T.InfraProvider, id: 'bare-metal' };
    const msg =
      'failed to validate: 1 error occurred:\n\t* cannot delete the infra provider "bare-metal", as there are 1 ' +
      'running machines managed by it: [m-own]\n\n';
    for (const v of ['1.4', '1.9']) {
      const { api } = setup(v);
      expectError(() => api.teardown(ADMIN, p, ''), IA, msg);
      expectError(() => api.destroy(ADMIN, p, ''), IA, msg);
    }
    expect(setup('1.3').api.teardown(ADMIN, p, '')).toBe(true);
    const { api, store } = setup('1.4');
    store.teardown(INTERNAL, { namespace: 'default', type: T.Machine, id: 'm-own' }, 'MachineController');
    expect(api.teardown(ADMIN, p, '')).toBe(true);
  });
});
