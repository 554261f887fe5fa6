// Review findings on src/commands, through the `run` and `plan` commands' code against the simulated Omni.

import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { NS_INFRA_PROVIDER, T } from '../../src/omni-client/resource.js';
import { executeRun } from '../../src/commands/run.js';
import { executePlan } from '../../src/commands/plan.js';
import type { Args, Io } from '../../src/commands/provider-options.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { bareMetalMachine, providerStatus, res } from '../helpers/provider-fixtures.js';

const ID = 'bare-metal';
const U1 = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';

const sims: Sim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function sim(): Promise<Sim> {
  const s = await createSim({
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider' as const, publicKeys: [] }],
    resources: [res(NS_INFRA_PROVIDER, T.InfraProvider, ID, { finalizers: ['InfraProviderCleanupController'] }), providerStatus(ID, true), ...bareMetalMachine(ID, U1)],
    faults: {} as never,
  });
  sims.push(s);
  return s;
}

function io(s: Sim): Io {
  return { stdout: new PassThrough().resume(), stderr: new PassThrough().resume(), stdinIsTTY: false, env: { OMNI_ENDPOINT: s.endpoint, OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`] }, signals: new EventEmitter() };
}

function args(extra: Args = {}): Args {
  return { id: ID, yes: true, machine: [], 'state-type': [], profile: 'auto', concurrency: 8, output: 'json', 'log-level': 'silent', 'step-timeout': '5s', timeout: '10s', deregister: true, wipe: 'none', ...extra };
}

describe('review 6c: --machine values that match nothing', () => {
  it('none matched: plan exits 2 naming them; run writes nothing, exits 0 and lists them as not found (a re-run stays 0)', async () => {
    const s = await sim();
    const before = JSON.stringify(s.store.all().map((r) => r.metadata));
    const err = await executePlan(args({ machine: ['no-such-machine', 'typo-x'] }), io(s)).catch((e: unknown) => e);
    expect(exitCodeFor(err)).toBe(2);
    expect((err as Error).message).toContain('no-such-machine, typo-x');
    const rep = await executeRun(args({ machine: ['no-such-machine', 'typo-x'] }), io(s));
    expect(rep.exitCode).toBe(0);
    expect(rep.notFound).toEqual(['no-such-machine', 'typo-x']);
    expect(JSON.stringify(s.store.all().map((r) => r.metadata))).toBe(before);
  });

  it('a per-machine re-run after the machine was released exits 0 and writes nothing', async () => {
    const s = await sim();
    expect((await executeRun(args({ machine: [U1] }), io(s))).exitCode).toBe(0);
    const after = JSON.stringify(s.store.all().map((r) => r.metadata));
    const again = await executeRun(args({ machine: [U1] }), io(s));
    expect(again.exitCode).toBe(0);
    expect(again.notFound).toEqual([U1]);
    expect(JSON.stringify(s.store.all().map((r) => r.metadata))).toBe(after);
  });

  it('one matched: the run goes on, exits 0 and lists the other as not found', async () => {
    const s = await sim();
    const rep = await executeRun(args({ machine: [U1, 'no-such-machine'] }), io(s));
    expect(rep.exitCode).toBe(0);
    expect(rep.released).toEqual([expect.objectContaining({ id: U1 })]);
    expect(rep.notFound).toEqual(['no-such-machine']);
  });
});
