// Omni's auth and access rules in the sim, over real HTTP on 127.0.0.1:0, with a client of the
// tests' own (test/helpers/raw-client.ts): every refusal with Omni's HTTP status, code and message.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSim, type Sim } from '../../../src/omni-sim/index.js';
import { rawCall, type RawKey, type RawCallOptions, type RawResponse } from '../../helpers/raw-client.js';
import { openStream } from '../../helpers/sim-stream.js';

const UUID = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';
const OTHER = '9b2f6a10-0c1d-4e5f-8a9b-000000000002';

const scenario = (version: string) => `
omni: { version: "${version}" }
identities:
  - name: infra-provider:bare-metal
  - name: infra-provider:ghost
  - { name: admin@example.org, role: Admin }
  - { name: reader@example.org, role: Reader }
resources:
  - metadata: { namespace: infra-provider, type: InfraProviders.omni.sidero.dev, id: bare-metal, version: 1,
                phase: running, finalizers: [InfraProviderCleanupController] }
    spec: {}
  - metadata: { namespace: infra-provider, type: InfraMachines.omni.sidero.dev, id: ${UUID}, version: 2,
                owner: InfraMachineController, phase: tearingDown,
                labels: { omni.sidero.dev/infra-provider-id: bare-metal },
                finalizers: [bare-metal.WipeStatusController] }
    proto_spec: EAE=
  - metadata: { namespace: infra-provider, type: InfraMachines.omni.sidero.dev, id: ${OTHER}, version: 1,
                owner: InfraMachineController, phase: running,
                labels: { omni.sidero.dev/infra-provider-id: proxmox } }
    proto_spec: EAE=
  - metadata: { namespace: default, type: Machines.omni.sidero.dev, id: ${OTHER}, version: 1, owner: MachineController,
                phase: running,
                labels: { omni.sidero.dev/infra-provider-id: bare-metal } }
    proto_spec: ""
  - metadata: { namespace: default, type: Links.omni.sidero.dev, id: ${OTHER}, version: 1, phase: running,
                labels: { omni.sidero.dev/infra-provider-id: bare-metal } }
    proto_spec: ""
`;

let sim: Sim;
const keys: Record<string, RawKey> = {};

beforeAll(async () => {
  sim = await createSim(scenario('1.4.0'));
  for (const [name, k] of Object.entries(sim.generatedKeys))
    keys[name] = { name, armoredPrivateKey: k.armoredPrivateKey };
});
afterAll(async () => {
  await sim?.close();
});

const as =
  (who: string) =>
  (method: string, body: unknown, opts: RawCallOptions = {}) =>
    rawCall(sim.endpoint, keys[who], method, body, opts);
const bm = as('infra-provider:bare-metal');
const admin = as('admin@example.org');

/** A unary error body `{code, message}`, or a stream's error line `{"error": {code, message}}`. */
/** A refusal of Omni's role checks, which run as validations of its API state (as the real-Omni recordings show). */
const roleRefusal = (why: string) =>
  `failed to validate: 1 error occurred:\n\t* rpc error: code = PermissionDenied desc = ${why}\n\n`;

function expectStatus(r: RawResponse, http: number, code: number, message: string): void {
  const line = (r.json ?? r.lines[0]) as { error?: unknown } | undefined;
  const body = (line?.error ?? line) as { code?: number; message?: string } | undefined;
  expect({ status: r.status, code: body?.code, message: body?.message }).toEqual({ status: http, code, message });
}

type Md = Record<string, unknown> & { version: string; finalizers?: string[] };
async function getIm(id = UUID): Promise<{ metadata: Md; spec: { proto_spec?: string } }> {
  const r = await bm('Get', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id });
  expect(r.status).toBe(200);
  return (r.json as { resource: { metadata: Md; spec: { proto_spec?: string } } }).resource;
}

describe('siderov1 over the gateway', () => {
  it('401 code 16 "invalid signature", WWW-Authenticate: tampered, wrong method, stale time, unsigned', async () => {
    const get = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: UUID };
    const cases: RawCallOptions[] = [
      { tamper: (p) => p.replace('Get', 'List') },
      { signMethod: '/cosi.resource.State/List' },
      { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 },
      { unsigned: true },
      { headers: { authorization: 'Bearer x' } },
    ];
    for (const c of cases) {
      const r = await bm('Get', get, c);
      expect(r.status, JSON.stringify(Object.keys(c))).toBe(401);
      expect(r.json).toMatchObject({ code: 16, message: 'invalid signature' });
      expect(r.headers['www-authenticate']).toBe('invalid signature');
    }
    expect((await bm('Get', get)).status).toBe(200);
  });
});

describe('infra provider access over the gateway', () => {
  it('refuses an unregistered provider, foreign namespaces and wrong type suffixes', async () => {
    expectStatus(
      await as('infra-provider:ghost')('List', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev' }),
      403,
      7,
      'infra provider with name "ghost" is not registered in the system',
    );
    expectStatus(
      await bm('List', { namespace: 'infra-provider:proxmox', type: 'X.proxmox.infraprovider.sidero.dev' }),
      403,
      7,
      'namespace not allowed, must be one of: infra-provider, infra-provider-ephemeral, infra-provider:bare-metal',
    );
    expectStatus(
      await bm('Get', { namespace: 'infra-provider:bare-metal', type: 'WipeStatuses.omni.sidero.dev', id: 'x' }),
      400,
      3,
      'resources in namespace "infra-provider:bare-metal" must have a type suffix ' +
        '".bare-metal.infraprovider.sidero.dev"',
    );
  });

  it("keeps InfraMachines read-only apart from finalizers, hides other providers' ones, forces the label", async () => {
    expectStatus(
      await bm('Get', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: OTHER }),
      404,
      5,
      'not found',
    );
    const list = await bm('List', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev' });
    expect(
      list.lines.map((l) => (l as { result: { resource: { metadata: { id: string } } } }).result.resource.metadata.id),
    ).toEqual([UUID]);

    const im = await getIm();
    expectStatus(
      await bm('Create', {
        resource: { metadata: { ...im.metadata, id: 'new', version: 'undefined' }, spec: im.spec },
        options: { owner: 'InfraMachineController' },
      }),
      403,
      7,
      'infra providers are not allowed to create "InfraMachines.omni.sidero.dev" resources',
    );
    expectStatus(
      await bm('Update', {
        new_resource: { metadata: im.metadata, spec: { proto_spec: 'EAI=' } },
        options: { owner: 'InfraMachineController' },
      }),
      403,
      7,
      'infra providers are not allowed to update "InfraMachines.omni.sidero.dev" resources other than setting ' +
        'finalizers',
    );
    expectStatus(
      await bm('Destroy', {
        namespace: 'infra-provider',
        type: 'InfraMachines.omni.sidero.dev',
        id: UUID,
        options: { owner: 'InfraMachineController' },
      }),
      403,
      7,
      'infra providers are not allowed to destroy "InfraMachines.omni.sidero.dev" resources',
    );
    expectStatus(
      await bm('Create', {
        resource: {
          metadata: {
            namespace: 'infra-provider',
            type: 'InfraProviderStatuses.omni.sidero.dev',
            id: 'proxmox',
            version: 'undefined',
            phase: 'running',
          },
          spec: {},
        },
      }),
      400,
      3,
      'resource ID must match the infra provider ID "bare-metal"',
    );

    const mrs = await bm('Create', {
      resource: {
        metadata: {
          namespace: 'infra-provider',
          type: 'InfraMachineStatuses.omni.sidero.dev',
          id: UUID,
          version: 'undefined',
          phase: 'running',
          labels: { [`omni.sidero.dev/infra-provider-id`]: 'proxmox' },
        },
        spec: {},
      },
      options: { owner: 'bare-metal.InfraMachineStatusController' },
    });
    expect(mrs.status).toBe(200);
    expect(
      (mrs.json as { resource: { metadata: { labels: Record<string, string> } } }).resource.metadata.labels,
    ).toEqual({ 'omni.sidero.dev/infra-provider-id': 'bare-metal' });
  });

  it('cannot read Links, can read Machines but not write them; admins cannot strip provider finalizers', async () => {
    expectStatus(
      await bm('Get', { namespace: 'default', type: 'Links.omni.sidero.dev', id: OTHER }),
      403,
      7,
      roleRefusal('unauthorized: access denied: insufficient role: "InfraProvider"'),
    );
    expect((await bm('Get', { namespace: 'default', type: 'Machines.omni.sidero.dev', id: OTHER })).status).toBe(200);
    expectStatus(
      await bm('Destroy', {
        namespace: 'default',
        type: 'Machines.omni.sidero.dev',
        id: OTHER,
        options: { owner: 'MachineController' },
      }),
      403,
      7,
      roleRefusal('only read access is permitted'),
    );
    expectStatus(
      await bm('List', { namespace: 'default', type: 'Secrets.omni.sidero.dev' }),
      403,
      7,
      roleRefusal('no access is permitted'),
    );
    const im = await getIm();
    expectStatus(
      await admin('Update', {
        new_resource: { metadata: { ...im.metadata, finalizers: [] }, spec: im.spec },
        options: { owner: 'InfraMachineController' },
      }),
      403,
      7,
      'users are not allowed to modify "InfraMachines.omni.sidero.dev" resources',
    );
    expectStatus(
      await as('reader@example.org')('List', { namespace: 'infra-provider', type: 'BMCConfigs.omni.sidero.dev' }),
      403,
      7,
      'only admins are allowed to read "BMCConfigs.omni.sidero.dev" resources',
    );
  });

  it("filters watches to the provider's own resources", async () => {
    const s = await openStream(sim.endpoint, keys['infra-provider:bare-metal'], 'Watch', {
      namespace: 'infra-provider',
      type: 'InfraMachines.omni.sidero.dev',
      options: { bootstrap_contents: true },
      api_version: 1,
    });
    try {
      expect(s.status).toBe(200);
      const ids: Array<[number | undefined, string | undefined]> = [];
      for (let i = 0; i < 3; i++) {
        const line = (await s.next(2000)) as {
          result: { event?: Array<{ event_type?: number; resource?: { metadata?: { id?: string } } }> };
        };
        for (const ev of line.result.event ?? []) ids.push([ev.event_type, ev.resource?.metadata?.id]);
      }
      expect(ids).toEqual([
        [undefined, UUID],
        [3, undefined],
      ]); // CREATED (0, omitted) of the own machine only, then BOOTSTRAPPED
    } finally {
      s.close();
    }
  });

  it('releases the machine on a finalizer-only update; Omni then destroys it', async () => {
    const im = await getIm();
    const r = await bm('Update', {
      new_resource: { metadata: { ...im.metadata, finalizers: [] }, spec: im.spec },
      options: { owner: 'InfraMachineController' },
    });
    expect(r.status).toBe(200);
    await sim.controllers?.idle();
    expectStatus(
      await bm('Get', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: UUID }),
      404,
      5,
      `failed to get: resource InfraMachines.omni.sidero.dev(infra-provider/${UUID}@undefined) doesn't exist`,
    );
  });

  it('refuses to delete a provider with running machines (1.4), then deletes it and its account', async () => {
    const msg =
      `failed to validate: 1 error occurred:\n\t* cannot delete the infra provider "bare-metal", as there ` +
      `are 1 running machines managed by it: [${OTHER}]\n\n`;
    expectStatus(
      await admin('Destroy', { namespace: 'infra-provider', type: 'InfraProviders.omni.sidero.dev', id: 'bare-metal' }),
      400,
      3,
      msg,
    );
    sim.controllers?.deleteMachine(OTHER);
    await sim.controllers?.idle();
    const p = await admin('Get', {
      namespace: 'infra-provider',
      type: 'InfraProviders.omni.sidero.dev',
      id: 'bare-metal',
    });
    const md = (p.json as { resource: { metadata: Md } }).resource.metadata;
    const t = await admin('Update', {
      new_resource: { metadata: { ...md, phase: 'tearingDown' }, spec: {} },
      options: { owner: '' },
    });
    expect(t.status).toBe(200);
    await sim.controllers?.idle();
    const after = await bm('List', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev' });
    expect(after.status).toBe(401);
    expectStatus(
      await admin('Get', { namespace: 'infra-provider', type: 'InfraProviders.omni.sidero.dev', id: 'bare-metal' }),
      404,
      5,
      "failed to get: resource InfraProviders.omni.sidero.dev(infra-provider/bare-metal@undefined) doesn't exist",
    );
  });
});
