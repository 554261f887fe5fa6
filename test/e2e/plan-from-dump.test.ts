// `sim` on a dump (`omnictl get -o yaml` output), the built CLI until its signal: a warning for a
// provider without registration, keys in files with --keys-dir that a plan logs in with
// (test/commands/plan-from-dump.test.ts: plan --from-dump, and sim refusing a dump, in this process).

import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, requireBuiltCli, runCli, scratchDirEachTest, startCli } from '../helpers/cli-process.js';
import { OMNICTL_EXAMPLE, UUID, realDump as realDumpIn } from '../helpers/omnictl-dump.js';

requireBuiltCli();
const dir = scratchDirEachTest('plan-dump-');
const realDump = () => realDumpIn(dir());

describe('sim on a dump', () => {
  it('warns of a provider without registration; --keys-dir writes the endpoint and a key usable as file', async () => {
    const file = join(dir(), 'two.yaml');
    const extra = (await readFile(OMNICTL_EXAMPLE, 'utf8'))
      .split(/^---$/m)
      .find((d) => d.includes('type: InfraMachines.omni.sidero.dev'))!
      .replaceAll('bare-metal', 'other-provider')
      .replace(UUID, '11111111-2222-4333-8444-555555555555');
    await writeFile(file, `${await readFile(await realDump(), 'utf8')}\n---\n${extra}`);
    const keys = join(dir(), 'keys');
    const sim = startCli(['sim', '--scenario', file, '--keys-dir', keys], { env: cleanEnv() });
    try {
      await sim.stderrMatches(/simulated Omni ready/);
      const run = await sim
        .stderrMatches(/other-provider but no InfraProvider or identity for them: no key was made/)
        .then(() => true);
      expect(run).toBe(true);
      const endpoint = (await readFile(join(keys, 'endpoint'), 'utf8')).trim();
      expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await stat(join(keys, 'bare-metal.key'))).mode & 0o777).toBe(0o600);
      const r = await runCli(
        [
          'plan',
          '--id',
          'bare-metal',
          '--omni-api-endpoint',
          endpoint,
          '--service-account-key-file',
          join(keys, 'bare-metal.key'),
          '--log-format',
          'json',
        ],
        { env: cleanEnv() },
      );
      expect(r.code, r.stderr).toBe(10);
    } finally {
      sim.kill('SIGTERM');
      expect((await sim.done).code).toBe(0);
    }
  }, 60_000);
});
