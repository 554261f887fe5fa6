// `plan --from-dump` through the CLI's main() in this process: it plans offline from `omnictl get -o
// yaml` output, with no key and no endpoint, by the same planning code as a plan against Omni (the
// sim serving the same file must give the same plan); a dump missing what the plan needs is an error
// naming it; what a dump cannot hold (the provider's own namespace) is said. And `sim` refuses a dump
// without InfraProviders (test/e2e/plan-from-dump.test.ts runs `sim` on a dump until its signal).

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { dumpScenario, loadScenarioFile, parseScenario } from '../../src/omni-sim/scenario/scenario.js';
import { cleanEnv, scratchDirEachTest } from '../helpers/cli-process.js';
import { runMain } from '../helpers/in-process-cli.js';
import { OMNICTL_EXAMPLE, ROOT, UUID, dumpWithout as dumpIn, realDump as realDumpIn } from '../helpers/omnictl-dump.js';

const sims: Sim[] = [];
const dir = scratchDirEachTest('plan-dump-');
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

const dumpWithout = (drop: (doc: string) => boolean, name: string) => dumpIn(dir(), drop, name);
const realDump = () => realDumpIn(dir());

async function planJson(
  args: string[],
  env = cleanEnv(),
  id = 'bare-metal',
): Promise<{ code: number | null; json: Record<string, unknown>; stderr: string }> {
  const r = await runMain(['plan', '--id', id, '-o', 'json', '--log-format', 'json', ...args], { env });
  return { code: r.code, json: JSON.parse(r.stdout) as Record<string, unknown>, stderr: r.stderr };
}

describe('plan --from-dump', () => {
  it('the same plan as a sim serving the same file, with no key, no endpoint, nothing in the environment', async () => {
    const offline = await planJson(['--from-dump', OMNICTL_EXAMPLE]);
    expect(offline.code, offline.stderr).toBe(10);
    const sim = await createSim(await loadScenarioFile(OMNICTL_EXAMPLE));
    sims.push(sim);
    await sim.controllers?.idle();
    const live = await planJson(
      ['--omni-api-endpoint', sim.endpoint],
      cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: sim.keys['infra-provider:bare-metal']! }),
    );
    expect(live.code, live.stderr).toBe(10);
    for (const k of ['planned', 'refused', 'blocked', 'running', 'leftBehind', 'waits', 'profile', 'mode'])
      expect(offline.json[k], k).toEqual(live.json[k]);
    expect((offline.json.deregistration as { status: string }).status).toBe(
      (live.json.deregistration as { status: string }).status,
    );
    // Everything the plan reads was in this file: nothing unseen but what omnictl prints nothing for.
    expect(offline.json.offline).toMatchObject({ dump: OMNICTL_EXAMPLE, notSeen: [] });
  }, 60_000);

  it('a dump as omnictl makes it: the provider namespace unseen, said plainly; the release still planned', async () => {
    const file = await realDump();
    const r = await runMain(['plan', '--id', 'bare-metal', '--from-dump', file], { env: cleanEnv() });
    expect(r.code, r.stderr).toBe(10);
    expect(r.stdout).toMatch(/Offline plan from .*omni-dump\.yaml: nothing was asked of Omni/);
    expect(r.stdout).toMatch(
      /Not seen: the provider's own namespace infra-provider:bare-metal \(BMCConfiguration, MachineStatus/,
    );
    expect(r.stdout).toMatch(
      /omnictl cannot dump them\. A plan against Omni also destroys each machine's resources there before its release/,
    );
    expect(r.stdout).toMatch(/Nothing in the dump of: BMCConfigs, MachineRequests/);
    // The machine's chain, on its line (not a terminal: nothing is wrapped), the Gets it rests on
    // first; a step on the machine's own ID names only the type.
    expect(r.stdout).toMatch(
      new RegExp(
        `^  - InfraMachine ${UUID}: InfraMachine being deleted: get BMCConfiguration .* ` +
          '→ remove-finalizers InfraMachines$',
        'm',
      ),
    );
    const j = await planJson(['--from-dump', file]);
    expect(j.json.offline).toMatchObject({
      notSeen: expect.arrayContaining(['BMCConfiguration.bare-metal.infraprovider.sidero.dev']),
      emptyInDump: expect.arrayContaining(['MachineRequests.omni.sidero.dev']),
    });
    // A shipped example by its name works the same way.
    expect(
      (await runMain(['plan', '--id', 'bare-metal', '--from-dump', 'bare-metal-stuck.omnictl'], { env: cleanEnv() }))
        .code,
    ).toBe(10);
  }, 60_000);

  it('missing what the plan needs: no InfraProviders (2), not this ID (3), no status for the kind (2)', async () => {
    const noProviders = await planJson([
      '--from-dump',
      await dumpWithout((d) => d.includes('type: InfraProviders.omni.sidero.dev'), 'a.yaml'),
    ]);
    expect(noProviders.code).toBe(2);
    expect(noProviders.json.error).toMatchObject({
      code: 'STUB_USAGE',
      message: expect.stringMatching(/holds no InfraProviders.*omnictl get infraproviders -o yaml/),
    });
    const other = await planJson(['--from-dump', OMNICTL_EXAMPLE], cleanEnv(), 'BareMetal');
    expect(other.code).toBe(3);
    expect(other.json.error).toMatchObject({
      code: 'STUB_NOT_REGISTERED',
      message: expect.stringMatching(/do not include "BareMetal" \(it has "bare-metal"\)/),
    });
    // InfraMachines say "static" without a status: planned as against Omni, the missing kind named.
    const noStatus = await dumpWithout((d) => d.includes('type: InfraProviderStatuses.omni.sidero.dev'), 'b.yaml');
    const planned = await planJson(['--from-dump', noStatus]);
    expect(planned.code, planned.stderr).toBe(10);
    expect(planned.json.offline).toMatchObject({
      emptyInDump: expect.arrayContaining(['InfraProviderStatuses.omni.sidero.dev']),
    });
    // MachineRequests and no InfraMachines: only the status's static label would tell.
    const requests = parseScenario(await readFile(join(ROOT, 'scenarios/machine-request-stuck.yaml'), 'utf8'));
    requests.resources = requests.resources.filter((r) => r.metadata.type !== 'InfraProviderStatuses.omni.sidero.dev');
    const noRequestStatus = join(dir(), 'c.yaml');
    await writeFile(noRequestStatus, dumpScenario(requests));
    const refused = await planJson(['--from-dump', noRequestStatus], cleanEnv(), 'kubevirt');
    expect(refused.code).toBe(2);
    expect(refused.json.error).toMatchObject({
      message: expect.stringMatching(
        new RegExp(
          'no InfraProviderStatuses, and kubevirt has MachineRequests but no InfraMachines.*' +
            'omnictl get infraproviderstatuses -o yaml.*--profile bare-metal',
        ),
      ),
    });
    expect(
      (await planJson(['--from-dump', noRequestStatus, '--profile', 'provisioning'], cleanEnv(), 'kubevirt')).code,
    ).toBe(10);
  }, 60_000);

  it('refuses an endpoint on the command line; a missing file or example name lists the shipped examples', async () => {
    const both = await planJson(['--from-dump', OMNICTL_EXAMPLE, '--omni-api-endpoint', 'https://omni.example.com']);
    expect(both.code).toBe(2);
    expect(both.json.error).toMatchObject({ message: expect.stringMatching(/drop --omni-api-endpoint/) });
    const missing = await planJson(['--from-dump', 'no-such-dump']);
    expect(missing.code).toBe(2);
    expect(missing.json.error).toMatchObject({
      message: expect.stringMatching(
        new RegExp(
          String.raw`--from-dump no-such-dump: no such file, and no example of that name ships with ` +
            String.raw`stub-provider \(examples: .*bare-metal-stuck`,
        ),
      ),
    });
  });
});

describe('sim on a dump', () => {
  it('refuses a dump without InfraProviders: nobody could log in', async () => {
    const file = await dumpWithout((d) => d.includes('type: InfraProviders.omni.sidero.dev'), 'c.yaml');
    const r = await runMain(['sim', '--scenario', file], { env: cleanEnv() });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /nobody could log in: the file has no `identities:` and no InfraProviders.*omnictl get infraproviders -o yaml/,
    );
  });
});
