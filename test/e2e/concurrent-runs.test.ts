// One run per provider (docs/design.md rule 7), as two operators or a Job's retry would see it: two
// `run --yes --wipe command` of the same provider started together against one sim, each machine's
// wipe appending its ID to one file. Every machine is wiped exactly once; one run releases, the
// other stops before its first side effect (exit 3 STUB_CONCURRENT_RUN naming the first run's ID),
// or, if the first was done before the second read anything, finds nothing left to do.

import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { cleanEnv, requireBuiltCli, runCli, scratchDirEachTest } from '../helpers/cli-process.js';

requireBuiltCli();
const dir = scratchDirEachTest('concurrent-');
const sims: Sim[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

const N = 20;

describe('two runs of one provider at once', () => {
  it('every machine is wiped once; one run releases, the other refuses (exit 3) or finds nothing to do', async () => {
    const sim = await createSim(generateScenario({ providerId: 'bm', machines: N, omniVersion: '1.9.3' }));
    sims.push(sim);
    const wipes = join(dir(), 'wipes');
    writeFileSync(wipes, '');
    const script = join(dir(), 'wipe.sh');
    writeFileSync(script, '#!/bin/sh\necho "$STUB_MACHINE_ID" >> "$1"\nsleep 0.1\n');
    chmodSync(script, 0o755);
    const env = cleanEnv({ OMNI_ENDPOINT: sim.endpoint, OMNI_SERVICE_ACCOUNT_KEY: sim.keys['infra-provider:bm'] });
    const args = (n: number) => [
      '--id',
      'bm',
      '--yes',
      '--wipe',
      'command',
      '--wipe-command',
      `${script} ${wipes}`,
      '--output',
      'json',
      '--log-level',
      'warn',
      '--audit-log',
      join(dir(), `audit${n}.ndjson`),
    ];
    const runs = await Promise.all([1, 2].map((n) => runCli(args(n), { env, limitMs: 120_000 })));
    const lines = readFileSync(wipes, 'utf8').split('\n').filter(Boolean);
    expect(lines.length).toBe(N);
    expect(new Set(lines).size).toBe(N);
    const results = runs.map((r) => JSON.parse(r.stdout) as Record<string, unknown> & { released: unknown[] });
    const winner = results.findIndex((r) => r.exitCode === 0 && r.released.length > 0);
    expect(winner, runs.map((r) => r.stderr).join('\n')).toBeGreaterThanOrEqual(0);
    const other = results[1 - winner]!;
    if (other.exitCode === 3) {
      expect(other.error).toMatchObject({ code: 'STUB_CONCURRENT_RUN' });
      expect((other.error as { message: string }).message).toContain(`(${results[winner]!.runId as string})`);
      // Nothing it wrote took effect (its one attempt, the heartbeat, lost the race).
      const audit = readFileSync(join(dir(), `audit${2 - winner}.ndjson`), 'utf8')
        .split('\n')
        .filter(Boolean);
      const applied = audit.map((l) => JSON.parse(l) as { event: string; result?: string });
      expect(applied.filter((a) => a.event === 'outcome' && a.result === 'ok')).toEqual([]);
    } else {
      expect(other).toMatchObject({ exitCode: 0, released: [] });
    }
  }, 180_000);
});
