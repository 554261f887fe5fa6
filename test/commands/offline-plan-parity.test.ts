// Offline plan = live plan: for every shipped scenario and every provider in it, as shipped and after
// a complete run, `plan` against the sim and `plan --from-dump` on that sim's dump of the same state
// plan the same items, report the same Omni version and exit with the same code (the guide promises
// "the same code as against Omni"). The commands run in this process, configured by the CLI's parser.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { executePlan } from '../../src/commands/plan.js';
import type { Result } from '../../src/commands/result.js';
import { resolveScenarioFile, shippedScenarios } from '../../src/commands/scenario-file.js';
import { describeError } from '../../src/exit-codes.js';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { loadScenarioFile } from '../../src/omni-sim/scenario/scenario.js';
import { planConfigFrom, planIn, runIn, testIo } from '../helpers/cli-config.js';

const dir = mkdtempSync(join(tmpdir(), 'offline-parity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Seen {
  exitCode: number;
  omniVersion: string | undefined;
  items: string[];
  refused: string[];
  running: string[];
  deregistration: string | undefined;
}

/** What a plan printed that both must agree on, or its exit code when it stopped with an error. */
async function seen(plan: Promise<Result>): Promise<Seen> {
  try {
    const r = await plan;
    return {
      exitCode: r.exitCode,
      omniVersion: r.omniVersion,
      items: (r.planned?.items ?? []).map((i) => `${i.kind}/${i.id}`).sort(),
      refused: r.refused.map((x) => `${x.kind}/${x.id}:${x.result}`).sort(),
      running: r.running.map((x) => `${x.kind}/${x.id}`).sort(),
      deregistration: r.deregistration.status,
    };
  } catch (err) {
    const d = describeError(err);
    return {
      exitCode: d.exitCode,
      omniVersion: d.code,
      items: [],
      refused: [],
      running: [],
      deregistration: undefined,
    };
  }
}

function offline(dump: string, id: string): Promise<Result> {
  const env = { STUB_PROVIDER_OUTPUT: 'json', STUB_PROVIDER_LOG_LEVEL: 'silent' };
  return executePlan(planConfigFrom(['--id', id, '--from-dump', dump], env), testIo(env));
}

async function simOf(scenario: string): Promise<Sim> {
  const sim = await createSim(await loadScenarioFile(resolveScenarioFile(scenario, '--scenario')));
  await sim.controllers?.idle();
  return sim;
}

const cases = await Promise.all(
  shippedScenarios().map(async (scenario) => {
    const sim = await simOf(scenario);
    const ids = Object.keys(sim.keys)
      .filter((k) => k.startsWith('infra-provider:'))
      .map((k) => k.slice('infra-provider:'.length));
    await sim.close();
    return ids.map((id) => [scenario, id] as const);
  }),
).then((x) => x.flat());

describe('plan --from-dump on a sim --dump agrees with plan against that sim', () => {
  it('knows the shipped scenarios and their providers', () => {
    expect(cases.length).toBeGreaterThanOrEqual(6);
  });

  it.each(cases.flatMap(([s, id]) => [[s, id, 'as shipped'] as const, [s, id, 'after a complete run'] as const]))(
    '%s, provider %s, %s',
    async (scenario, id, when) => {
      const sim = await simOf(scenario);
      try {
        if (when !== 'as shipped') {
          const run = await runIn(sim, id, ['--yes']);
          expect(run.exitCode, JSON.stringify(run.error)).toBe(0);
          await sim.controllers?.idle();
        }
        const live = await seen(planIn(sim, id));
        const dump = join(dir, `${scenario}-${id}-${when.length}.yaml`);
        writeFileSync(dump, sim.dump());
        const off = await seen(offline(dump, id));
        expect(off).toEqual(live);
        expect(live.omniVersion).toMatch(/^v\d+\.\d+\.\d+/);
        expect(live.exitCode).toBe(when === 'as shipped' ? 10 : 0);
      } finally {
        await sim.close();
      }
    },
    60_000,
  );
});
