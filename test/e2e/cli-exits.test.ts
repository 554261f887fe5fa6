// The exits of `run` by signal, with the built CLI against simulated Omnis in this process: 130 for a
// SIGINT while it waits, 143 for a SIGTERM before the preflight answered, each with its result on
// stdout and in --report; and --wait --timeout 0 waits without limit. Every other exit of `run` and
// `plan`, through main() in this process: test/cli-exits.test.ts.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { T } from '../../src/omni-api/resource.js';
import { INTERNAL } from '../../src/omni-sim/api.js';
import { machineUuid } from '../../src/omni-sim/scenario/generate.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { requireBuiltCli, scratchDirEachTest, startCli } from '../helpers/cli-process.js';
import type { Outcome, SimOpts } from '../helpers/cli-results.js';
import { envFor, expectResult, ID, outcomeOf, resultFlags, runArgs, simWith as simIn } from '../helpers/cli-results.js';
import { startTamperProxy } from '../helpers/tamper-proxy.js';

const sims: Sim[] = [];
requireBuiltCli();
const dir = scratchDirEachTest('cli-exits-');
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

const simWith = (o: SimOpts = {}) => simIn(sims, o);

/** Runs the CLI with `--output json --report FILE`, sends `signal.send` once `signal.when`, and reads both results. */
async function withResults(
  args: string[],
  env: NodeJS.ProcessEnv,
  signal: { send: NodeJS.Signals; when: RegExp | Promise<void> },
): Promise<Outcome> {
  const file = join(dir(), `report-${Math.random().toString(36).slice(2)}.json`);
  const child = startCli([...args, ...resultFlags(file)], { env });
  await (signal.when instanceof RegExp ? child.stderrMatches(signal.when) : signal.when);
  child.kill(signal.send);
  const r = await child.done;
  return outcomeOf(r, await readFile(file, 'utf8'), file);
}

describe('run: every exit has its result, on stdout (--output json) and in --report', () => {
  it('130 SIGINT while it waits (a report), 143 SIGTERM before the preflight answered (no report yet)', async () => {
    const busy = await simWith({ machines: 0, running: 1 });
    const int = await withResults(runArgs(busy, ['--wait', '--timeout', '5m']), envFor(busy), {
      send: 'SIGINT',
      when: /announced stub mode/,
    });
    expectResult(int, 130, 'STUB_INTERRUPTED');
    expect(int.stdout).toMatchObject({ command: 'run', result: 'interrupted', interrupted: true });
    // Omni never answers the first call: the signal comes while the preflight waits for it.
    const s = await simWith();
    let asked!: () => void;
    const firstCall = new Promise<void>((r) => {
      asked = r;
    });
    const proxy = await startTamperProxy(s.endpoint, () => ({
      kind: 'respond',
      write: () => {
        asked();
      },
    }));
    const term = await withResults(runArgs(proxy.endpoint), envFor(s), { send: 'SIGTERM', when: firstCall });
    await proxy.close();
    expectResult(term, 143, 'STUB_INTERRUPTED', /SIGTERM/);
    expect(term.stdout).toMatchObject({ command: 'run', providerId: ID, result: 'interrupted' });
  }, 60_000);

  it('--wait --timeout 0: no limit; the run stays until the machine in use is deleted, then exits 0', async () => {
    const busy = await simWith({ machines: 0, running: 1 });
    const child = startCli(
      [...runArgs(busy, ['--wait', '--timeout', '0']), '--output', 'json', '--log-format', 'json'],
      { env: envFor(busy) },
    );
    await child.stderrMatches(/announced stub mode/);
    // Well past what a timer of "0" would have waited (it would fire at once): still waiting.
    const early = await Promise.race([
      child.done.then(() => 'exited'),
      new Promise((r) => setTimeout(() => r('waiting'), 1500)),
    ]);
    expect(early).toBe('waiting');
    const uuid = machineUuid(0, 7);
    const im = busy.store.peek({ namespace: 'infra-provider', type: T.InfraMachine, id: uuid })!;
    busy.store.teardown(INTERNAL, im.metadata, im.metadata.owner);
    const r = await child.done;
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      result: 'done',
      timedOut: false,
      released: [expect.objectContaining({ id: uuid })],
      deregistration: { status: 'deregistered' },
    });
  }, 60_000);
});
