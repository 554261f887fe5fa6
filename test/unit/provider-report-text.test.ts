// What an operator reads: the text summary and the JSON report of plan and run. They must make
// sense without this project's research notes (docs the operator does not have), and say what
// Omni's version means for the last step.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import { bareMetalMachine, healthStatus, omniMachine, providerStatus, provisionedRequest, res } from '../helpers/provider-fixtures.js';
import { takeSnapshot } from '../../src/provider/snapshot.js';
import { buildPlan } from '../../src/provider/plan.js';
import { planReport, renderText } from '../../src/provider/report.js';
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
