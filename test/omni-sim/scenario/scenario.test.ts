// Scenario files: load, serve over HTTP, dump back equal, in both shapes; strict errors.

import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createSim } from '../../../src/omni-sim/index.js';
import {
  dumpScenario,
  loadScenarioFile,
  parseScenario,
  ScenarioError,
} from '../../../src/omni-sim/scenario/scenario.js';
import { rawCall, type RawKey } from '../../helpers/raw-client.js';

const file = (name: string) => fileURLToPath(new URL(`../../../scenarios/${name}`, import.meta.url));
const BARE = file('bare-metal-stuck.yaml');
const BARE_OMNICTL = file('bare-metal-stuck.omnictl.yaml');
const MR = file('machine-request-stuck.yaml');
const UUID = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';

function keyOf(
  sim: { generatedKeys: Record<string, { name: string; armoredPrivateKey: string }> },
  name: string,
): RawKey {
  const k = sim.generatedKeys[name];
  if (!k) throw new Error(`no key for ${name}`);
  return { name: k.name, armoredPrivateKey: k.armoredPrivateKey };
}

type Listed = { result: { resource: { metadata: Record<string, unknown>; spec: Record<string, unknown> } } };

describe('example scenarios', () => {
  for (const [name, path, provider] of [
    ['bare-metal (scenario shape)', BARE, 'bare-metal'],
    ['bare-metal (omnictl -o yaml shape)', BARE_OMNICTL, 'bare-metal'],
    ['machine request', MR, 'kubevirt'],
  ] as const) {
    it(`${name}: loads, serves, dumps back equal`, async () => {
      const sc = await loadScenarioFile(path);
      const sim = await createSim(sc);
      try {
        expect(Object.keys(sim.keys)).toContain(`infra-provider:${provider}`);
        const key = keyOf(sim, `infra-provider:${provider}`);
        const type = provider === 'bare-metal' ? 'InfraMachines.omni.sidero.dev' : 'MachineRequests.omni.sidero.dev';
        const res = await rawCall(sim.endpoint, key, 'List', { namespace: 'infra-provider', type });
        expect(res.status).toBe(200);
        expect(res.lines).toHaveLength(1);
        const md = (res.lines[0] as Listed).result.resource.metadata;
        expect(md).toMatchObject({ phase: 'tearingDown' });
        expect((md['finalizers'] as string[]).every((f) => f.startsWith(`${provider}.`))).toBe(true);

        await sim.controllers?.idle(); // Omni's controllers have nothing to change in a stuck state
        const again = parseScenario(sim.dump(), 'dump');
        // A dump names the version the sim served in its header, whatever the file said it with.
        expect(again).toEqual({ ...sc, omniVersionFromHeader: true });
        expect(dumpScenario(again)).toBe(sim.dump());
      } finally {
        await sim.close();
      }
    });
  }

  it('the scenario and the omnictl shape of the stuck bare-metal machine hold the same resources', async () => {
    const a = await loadScenarioFile(BARE);
    const b = await loadScenarioFile(BARE_OMNICTL);
    expect(b.resources).toEqual(a.resources);
    expect(b.omniVersion).toBe('1.3.4');
    expect(b.identities).toEqual([{ name: 'infra-provider:bare-metal', role: 'InfraProvider', publicKeys: [] }]);
    const im = a.resources.find((r) => r.metadata.type === 'InfraMachines.omni.sidero.dev');
    expect(im?.metadata).toMatchObject({
      id: UUID,
      version: '7',
      owner: 'InfraMachineController',
      created: '2026-03-01T10:00:00Z',
    });
    expect(im?.metadata.finalizers).toHaveLength(6);
    expect(a.resources.filter((r) => r.metadata.namespace === 'infra-provider:bare-metal')).toHaveLength(5);
  });

  it('serves the scenario spec as Omni would: proto_spec bytes and a yaml_spec in omnictl spelling', async () => {
    const sim = await createSim(await loadScenarioFile(BARE));
    try {
      const res = await rawCall(sim.endpoint, keyOf(sim, 'admin@example.org'), 'Get', {
        namespace: 'infra-provider',
        type: 'InfraMachines.omni.sidero.dev',
        id: UUID,
      });
      const spec = (res.json as { resource: { spec: { proto_spec: string; yaml_spec: string } } }).resource.spec;
      expect(spec.yaml_spec).toContain('acceptancestatus: 1');
      expect(spec.yaml_spec).toContain('nodeuniquetoken: nut-9b2f6a10');
      expect(Buffer.from(spec.proto_spec, 'base64').length).toBeGreaterThan(10);
    } finally {
      await sim.close();
    }
  });

  it('a changed state dumps with the new versions and reloads equal', async () => {
    const sim = await createSim(await loadScenarioFile(MR));
    try {
      const p = {
        namespace: 'infra-provider:kubevirt',
        type: 'Machine.kubevirt.infraprovider.sidero.dev',
        id: 'talos-workers-x7k2pq',
      };
      expect(sim.store.bumpVersion(p)).toBe(true);
      const dumped = parseScenario(sim.dump());
      const m = dumped.resources.find((r) => r.metadata.type === p.type);
      expect(m?.metadata.version).toBe('6');
      expect(m?.spec.yamlSpec).toBe('vmname: vm-1\n');
      expect(Buffer.from(m?.spec.protoSpec ?? []).toString('base64')).toBe('CgR2bS0x');
      expect(parseScenario(dumpScenario(dumped))).toEqual(dumped);
    } finally {
      await sim.close();
    }
  });
});

describe('strict validation names the document and the key', () => {
  const bad = (text: string, where: RegExp) => {
    let err: unknown;
    try {
      parseScenario(text, 'test.yaml');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ScenarioError);
    expect((err as Error).message).toMatch(where);
  };
  const res = (meta: string, spec = 'spec: {}') => `
resources:
  - metadata: { namespace: infra-provider, type: InfraMachines.omni.sidero.dev, id: a${meta} }
    ${spec}
`;

  it('metadata', () => {
    bad(res(', phase: gone'), /document 0: resources\[0\]\.metadata\.phase: expected running or tearingDown/);
    bad(res(', version: 0'), /resources\[0\]\.metadata\.version/);
    bad(res(', colour: red'), /resources\[0\]\.metadata\.colour: unknown key/);
    bad(res(', finalizers: a'), /metadata\.finalizers/);
    bad(res(', created: yesterday'), /metadata\.created: expected an RFC 3339/);
    bad(res(', labels: { a: [1] }'), /metadata\.labels\.a: expected a string/);
    bad(`${res('')}${res('').replace('resources:\n', '')}`, /given twice/);
  });

  it('specs', () => {
    bad(res('', 'spec: { acceptance_statuss: 1 }'), /resources\[0\]\.spec.*unknown key "acceptance_statuss"/);
    bad(res('', 'proto_spec: "!!"'), /resources\[0\]\.proto_spec: expected standard base64/);
    bad(res('', 'proto_spec: "/w=="'), /resources\[0\]\.proto_spec: does not decode/);
    bad(res('', 'spec: {}\n    proto_spec: ""'), /give either spec or proto_spec/);
    bad(
      `resources:\n  - metadata: { namespace: x, type: Unknown.example, id: a }\n    spec: { a: 1 }\n`,
      /no spec codec for type Unknown.example; give proto_spec/,
    );
    bad(
      `---\nomni: { version: "1.3" }\n---\nmetadata: { namespace: infra-provider, type: ` +
        `InfraMachines.omni.sidero.dev, id: a }\nspec:\n    acceptancestatus: 1\n    bogus: 2\n`,
      /document 1: spec.*unknown key "bogus"/,
    );
  });

  it('header, identities and faults', () => {
    bad('omni: { version: 1.10 }', /document 0: omni\.version: expected a quoted string/);
    bad('omni: { version: "one" }', /omni\.version/);
    bad('omnii: {}', /document 0: omnii: unknown key/);
    bad('identities:\n  - { name: admin@example.org }', /identities\[0\]\.role: required/);
    bad(
      'identities:\n  - { name: admin@example.org, role: InfraProvider }',
      /identities\[0\]\.role: role InfraProvider/,
    );
    bad('identities:\n  - { name: infra-provider:x, role: Admin }', /identities\[0\]\.role/);
    bad(
      'identities:\n  - { name: infra-provider:x, public_key: nope }',
      /identities\[0\]\.public_key: expected an armored/,
    );
    bad(
      'identities:\n  - { name: infra-provider:x }\n  - { name: infra-provider:x }',
      /identities\[1\]\.name: duplicate/,
    );
    // Auditor exists from Omni 1.10.0 on.
    bad(
      'omni: { version: "1.9.3" }\nidentities:\n  - { name: audit@example.org, role: Auditor }',
      /identities\[0\]\.role: role Auditor exists from Omni 1\.10\.0 on, not 1\.9\.3/,
    );
    expect(
      parseScenario('omni: { version: "1.10.4" }\nidentities:\n  - { name: audit@example.org, role: Auditor }')
        .identities,
    ).toEqual([{ name: 'audit@example.org', role: 'Auditor', publicKeys: [] }]);
    bad('faults: { latency: 5 }', /document 0: faults.*latency: unknown fault/);
    bad('faults: { conflict_storm: { type: T } }', /type and count are required/);
    bad('omni: {}\n---\nomni: {}', /document 1: .*second scenario header/);
    bad('omni: [', /document 0: \(yaml\)/);
  });

  it('accepts both spellings, enum names, and keeps the faults', () => {
    const sc = parseScenario(`
omni: { version: "1.8" }
identities: [{ name: infra-provider:p }]
resources:
  - metadata: { namespace: infra-provider, type: InfraMachines.omni.sidero.dev, id: b, labels: { s: } }
    spec: { acceptancestatus: ACCEPTED, cluster_talos_version: "1.10.0" }
faults: { latency_ms: 5, conflict_storm: { type: InfraMachines.omni.sidero.dev, count: 2 } }
`);
    expect(sc.resources[0]?.metadata).toMatchObject({ version: '1', phase: 'running', owner: '', labels: { s: '' } });
    expect(sc.faults).toEqual({ latencyMs: 5, conflictStorm: { type: 'InfraMachines.omni.sidero.dev', count: 2 } });
    expect(parseScenario(dumpScenario(sc))).toEqual(sc);
  });
});
