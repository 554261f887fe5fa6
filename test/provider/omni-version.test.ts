// The stub learns Omni's version from the simulated Omni's own SysVersion (the sim seeds it like Omni
// does at start-up), reports it, and warns about `omnictl infraprovider delete` from Omni 1.4 on.

import { afterEach, describe, expect, it } from 'vitest';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { parseScenario } from '../../src/omni-sim/scenario/scenario.js';
import { NS_EPHEMERAL, T } from '../../src/omni-api/resource.js';
import { SysVersionSpec } from '../../src/omni-api/specs/messages.js';
import { decodeSpec, encodeSpec } from '../../src/omni-api/specs/codec.js';
import { renderText } from '../../src/provider/report/text.js';
import { DELETE_WARNING, DELETE_WARNING_VERSION_UNKNOWN } from '../../src/provider/plan/facts.js';
import { planIn, runIn } from '../helpers/cli-config.js';
import { res } from '../helpers/provider-fixtures.js';

const ID = 'bare-metal';
const sims: Sim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function sim(
  omniVersion: string,
  extra: Parameters<typeof generateScenario>[0]['faults'] = {},
  sysVersionSpec?: Uint8Array,
): Promise<Sim> {
  const sc = generateScenario({ providerId: ID, machines: 2, omniVersion, faults: extra });
  if (sysVersionSpec) sc.resources.push(res(NS_EPHEMERAL, T.SysVersion, 'current', { spec: sysVersionSpec }));
  const s = await createSim(sc);
  sims.push(s);
  return s;
}

describe('the simulated Omni seeds SysVersion like Omni', () => {
  it("ephemeral/current with backend_version as Omni's git tag, left out of the dump", async () => {
    const s = await sim('1.4');
    const sv = s.store.peek({ namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' });
    expect(sv && decodeSpec(SysVersionSpec, sv.spec.protoSpec).value.backend_version).toBe('v1.4.0');
    expect(parseScenario(s.dump()).resources.some((r) => r.metadata.type === T.SysVersion)).toBe(false);
  });

  it("keeps the scenario's own SysVersion", async () => {
    const s = await sim(
      '1.4.2',
      {},
      encodeSpec(SysVersionSpec, { backend_version: 'v1.4.2-custom', instance_name: 'x', backend_api_version: 1 }),
    );
    const sv = s.store.peek({ namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' });
    expect(sv && decodeSpec(SysVersionSpec, sv.spec.protoSpec).value.backend_version).toBe('v1.4.2-custom');
  });
});

describe.each([
  ['1.3.4', 'v1.3.4', undefined],
  ['1.4.2', 'v1.4.2', DELETE_WARNING],
])('Omni %s', (version, tag, warning) => {
  it('run reports the version read, in JSON and text; warns about the provider deletion only from 1.4', async () => {
    const s = await sim(version);
    const rep = await runIn(s, ID);
    expect(rep).toMatchObject({ exitCode: 0, omniVersion: tag });
    expect(rep.deregistration).toMatchObject({
      status: 'deregistered',
      lastStep: `omnictl infraprovider delete ${ID}`,
    });
    expect(rep.deregistration.warning).toBe(warning);
    const text = renderText(rep);
    expect(text.split('\n')[0]).toContain(`Omni ${tag}`);
    if (warning) expect(text).toContain(`Warning: ${warning}`);
    else expect(text).not.toMatch(/Warning:|MachineRequestSet/);
  });

  it('plan reports the version read', async () => {
    const s = await sim(version);
    const rep = await planIn(s, ID);
    expect(rep.omniVersion).toBe(tag);
    expect(renderText(rep).split('\n')[0]).toContain(`Omni ${tag}`);
  });
});

it('an unreadable version: the report says so and the warning is conditional', async () => {
  const s = await sim(
    '1.3.4',
    {},
    encodeSpec(SysVersionSpec, { backend_version: '', instance_name: 'x', backend_api_version: 1 }),
  );
  const rep = await runIn(s, ID);
  expect(rep.omniVersion).toBeUndefined();
  expect(rep.deregistration.warning).toBe(DELETE_WARNING_VERSION_UNKNOWN);
  const text = renderText(rep);
  expect(text.split('\n')[0]).toContain('Omni version unknown');
  expect(text).toContain('Warning: If this Omni is 1.4 or later');
});
