// --machine values that match nothing, some or all, through the `run` and `plan` commands' code against
// the simulated Omni.

import { afterEach, describe, expect, it } from 'vitest';
import type { Sim } from '../../src/omni-sim/index.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { planIn, providerSim, runIn } from '../helpers/cli-config.js';
import { bareMetalMachine, providerStatus } from '../helpers/provider-fixtures.js';

const ID = 'bare-metal';
const U1 = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';

const sims: Sim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function sim(): Promise<Sim> {
  const s = await providerSim('1.3.4', [providerStatus(ID, true), ...bareMetalMachine(ID, U1)], { ids: [ID] });
  sims.push(s);
  return s;
}

describe('--machine values that match nothing', () => {
  it('no match: plan exits 2 naming them; run writes nothing, lists them not found, exits 0 (re-run too)', async () => {
    const s = await sim();
    const before = JSON.stringify(s.store.all().map((r) => r.metadata));
    const err = await planIn(s, ID, ['--machine', 'no-such-machine', '--machine', 'typo-x']).catch((e: unknown) => e);
    expect(exitCodeFor(err)).toBe(2);
    expect((err as Error).message).toContain('no-such-machine, typo-x');
    const rep = await runIn(s, ID, ['--machine', 'no-such-machine', '--machine', 'typo-x']);
    expect(rep.exitCode).toBe(0);
    expect(rep.notFound).toEqual(['no-such-machine', 'typo-x']);
    expect(JSON.stringify(s.store.all().map((r) => r.metadata))).toBe(before);
  });

  it('a per-machine re-run after the machine was released exits 0 and writes nothing', async () => {
    const s = await sim();
    expect((await runIn(s, ID, ['--machine', U1])).exitCode).toBe(0);
    const after = JSON.stringify(s.store.all().map((r) => r.metadata));
    const again = await runIn(s, ID, ['--machine', U1]);
    expect(again.exitCode).toBe(0);
    expect(again.notFound).toEqual([U1]);
    expect(JSON.stringify(s.store.all().map((r) => r.metadata))).toBe(after);
  });

  it('one matched: the run goes on, exits 0 and lists the other as not found', async () => {
    const s = await sim();
    const rep = await runIn(s, ID, ['--machine', U1, '--machine', 'no-such-machine']);
    expect(rep.exitCode).toBe(0);
    expect(rep.released).toEqual([expect.objectContaining({ id: U1 })]);
    expect(rep.notFound).toEqual(['no-such-machine']);
  });
});
