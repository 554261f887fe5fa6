// The fault suite: the stub against the simulated Omni with every fault the sim can inject
// (docs/omni-behaviour.md, "Faults the sim can add"). After each run the state must be exactly the
// expected one (test/helpers/release-oracle.ts): all our finalizers gone from tearing-down resources,
// the outputs of released machines gone, and everything else byte-identical, another provider's
// resources and the running machine included.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { createOmniClient } from '../../src/omni-client/client.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { T } from '../../src/omni-api/resource.js';
import { silentLogger } from '../../src/log.js';
import type { FaultConfig } from '../../src/omni-sim/gateway/fault-config.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { createAccessApi } from '../../src/omni-sim/access/access.js';
import { INTERNAL, type Identity, type StateApi, type WatchParams } from '../../src/omni-sim/api.js';
import type { Scenario } from '../../src/omni-sim/scenario/scenario.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import type { ReconcileResult } from '../../src/provider/run/contract.js';
import { checkRelease, keyOf } from '../helpers/release-oracle.js';
import { MAIN } from '../helpers/cli-process.js';
import { startSimProcess } from '../helpers/sim-process.js';

const ID = 'bare-metal';

/**
 * Stuck machines and requests of ours, one running machine, a stuck machine Omni still holds, and look-alike providers.
 */
function faultScenario(o: { stuck?: number; running?: boolean; held?: boolean; faults?: FaultConfig } = {}): Scenario {
  const resources: Resource[] = [...providerRegistration(ID, { static: true })];
  for (let i = 0; i < (o.stuck ?? 8); i++) resources.push(...bareMetalMachine(ID, machineUuid(i, 1)));
  // Held by someone else as well: our finalizers go, theirs stay, the InfraMachine stays.
  if (o.held ?? true)
    resources.push(...bareMetalMachine(ID, machineUuid(100, 1), { extraFinalizers: ['ClusterMachineController'] }));
  if (o.running ?? true) resources.push(...bareMetalMachine(ID, machineUuid(200, 1), { phase: 'running' }));
  for (let i = 0; i < 3; i++) resources.push(...provisionedRequest(ID, `req-${i}`));
  // Other providers whose IDs start like ours or differ only in case: never touched.
  resources.push(
    ...providerRegistration('bare-metal-2', { static: true }),
    ...bareMetalMachine('bare-metal-2', machineUuid(0, 2)),
  );
  resources.push(...bareMetalMachine('Bare-Metal', machineUuid(0, 3)));
  resources.push(...provisionedRequest('bare', 'req-0'.replace('0', 'x')));
  return {
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    resources,
    faults: o.faults ?? {},
  };
}

let sim: Sim | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function runStub(s: Sim): Promise<ReconcileResult> {
  const client = await createOmniClient({
    endpoint: s.endpoint,
    key: s.keys[`infra-provider:${ID}`]!,
    concurrency: 8,
    retries: 8,
  });
  try {
    return await reconcile(
      {
        state: client.state,
        logger: silentLogger(),
        version: 'test',
        now: () => Date.now() + client.serverClockOffsetMs(),
      },
      {
        providerId: ID,
        machines: [],
        profile: 'auto',
        stateTypes: [],
        deregister: true,
        wait: false,
        timeoutMs: 30_000,
        omniWaitMs: 10_000,
        settleMs: 500,
        concurrency: 8,
      },
    );
  } finally {
    await client.close();
  }
}

/** Runs the stub with the faults on, then checks the final state against the oracle and a second run. */
async function releaseUnder(
  faults: FaultConfig,
  during?: (s: Sim) => void,
): Promise<{ result: ReconcileResult; before: Resource[]; after: Resource[]; watches: number }> {
  let watches = 0;
  sim = await createSim(faultScenario(), {
    access: (ctx) => {
      const api = createAccessApi(ctx.store, { version: ctx.omniVersion });
      return Object.assign(Object.create(api) as StateApi, {
        watch: (w: Identity, p: WatchParams, sg: AbortSignal) => (watches++, api.watch(w, p, sg)),
      });
    },
  });
  await sim.controllers?.idle();
  const before = sim.store.all();
  sim.faults.set(faults);
  during?.(sim);
  const result = await runStub(sim);
  await sim.controllers?.idle();
  const spent = sim.faults.config;
  sim.faults.reset();
  // The faults really hit the run: bursts and storms used up.
  expect(spent.unavailableBurst ?? 0).toBe(0);
  expect(spent.conflictStorm?.count ?? 0).toBe(0);
  const after = sim.store.all();
  expect(checkRelease(before, after, { providerId: ID, complete: true }).problems).toEqual([]);
  expect(result.outcomes.filter((x) => x.status === 'failed')).toEqual([]);
  expect(result.outcomes.filter((x) => x.kind === 'InfraMachine' && x.status === 'released')).toHaveLength(9);
  expect(result.outcomes.filter((x) => x.kind === 'MachineRequest' && x.status === 'released')).toHaveLength(3);
  // Released means: the eight free machines and the three requests are gone, their outputs too.
  const left = new Set(after.map(keyOf));
  for (let i = 0; i < 8; i++) expect(left.has(`infra-provider/${T.InfraMachine}/${machineUuid(i, 1)}`)).toBe(false);
  expect(
    after.find((r) => r.metadata.id === machineUuid(100, 1) && r.metadata.type === T.InfraMachine)?.metadata.finalizers,
  ).toEqual(['ClusterMachineController']);
  // A second run changes nothing but the heartbeat.
  const again = await runStub(sim);
  await sim.controllers?.idle();
  const third = sim.store.all().filter((r) => r.metadata.type !== T.InfraProviderHealthStatus);
  expect(third.map((r) => `${keyOf(r)}@${r.metadata.version}`)).toEqual(
    after
      .filter((r) => r.metadata.type !== T.InfraProviderHealthStatus)
      .map((r) => `${keyOf(r)}@${r.metadata.version}`),
  );
  expect(again.outcomes.filter((x) => x.status === 'failed')).toEqual([]);
  return { result, before, after, watches };
}

/** Calls `fn` once the store has seen `n` events (a fault in the middle of the run). */
function afterEvents(s: Sim, n: number, fn: () => void): void {
  let seen = 0;
  const off = s.store.onEvent(() => {
    if (++seen === n) {
      off();
      fn();
    }
  });
}

describe('fault suite: the stub against the simulated Omni', () => {
  it('added latency on every call', async () => {
    await releaseUnder({ latencyMs: 15 });
  });

  it('watch streams cut after every event while the stub waits for a slow Omni (resumed from bookmarks)', async () => {
    // Omni holds one torn-down status a little longer than usual: the stub's wait sees its release
    // only through a watch that has been cut and resumed in between.
    const slow = 'SlowCleanupController';
    const mrs = { namespace: 'infra-provider', type: T.MachineRequestStatus, id: 'req-0' };
    let released = false;
    const { watches, result } = await releaseUnder({ dropWatchAfterEvents: 1 }, (s) => {
      const cur = s.store.peek(mrs)!;
      s.store.update(
        INTERNAL,
        { ...cur, metadata: { ...cur.metadata, finalizers: [...cur.metadata.finalizers, slow] } },
        cur.metadata.owner,
      );
      const off = s.store.onEvent((e) => {
        if (
          e.resource.metadata.type !== mrs.type ||
          e.resource.metadata.id !== mrs.id ||
          e.resource.metadata.phase !== 'tearingDown'
        )
          return;
        off();
        setTimeout(() => {
          const now = s.store.peek(mrs)!;
          s.store.update(
            INTERNAL,
            { ...now, metadata: { ...now.metadata, finalizers: now.metadata.finalizers.filter((f) => f !== slow) } },
            now.metadata.owner,
          );
          released = true;
        }, 800);
      });
    });
    expect(released).toBe(true);
    expect(result.outcomes.find((o) => o.id === 'req-0')?.status).toBe('released');
    // Three kinds are watched at first; every cut adds a reconnect from the last bookmark.
    expect(watches).toBeGreaterThan(3);
  });

  it('503 bursts at the start and in the middle of the run', async () => {
    await releaseUnder({ unavailableBurst: 5 }, (s) => afterEvents(s, 20, () => s.faults.set({ unavailableBurst: 6 })));
  });

  it('conflict storms on the InfraMachines and, mid-run, on the BMCConfigurations', async () => {
    await releaseUnder({ conflictStorm: { type: T.InfraMachine, count: 12 } }, (s) =>
      afterEvents(s, 5, () =>
        s.faults.set({ conflictStorm: { type: `BMCConfiguration.${ID}.infraprovider.sidero.dev`, count: 10 } }),
      ),
    );
  });

  it('Omni restarts twice mid-run while watches are open: streams broken, every bookmark refused', async () => {
    let restarts = 0;
    let brokenStreams = 0;
    await releaseUnder({ latencyMs: 2 }, (s) => {
      afterEvents(s, 15, () => {
        s.faults.restart();
        restarts++;
      });
      // The second one as soon as a watch of the stub is open (its waits for Omni).
      const off = s.store.onEvent(() => {
        if (s.gateway.openStreams === 0) return;
        off();
        brokenStreams = s.gateway.openStreams;
        s.faults.restart();
        restarts++;
      });
    });
    expect(restarts).toBe(2);
    expect(brokenStreams).toBeGreaterThan(0);
  });

  it("a server clock 2 minutes ahead (within Omni's skew)", async () => {
    await releaseUnder({ clockOffsetMs: 2 * 60_000 });
  });

  it("a server clock 8 minutes ahead and one 8 minutes behind (the client adopts Omni's time)", async () => {
    await releaseUnder({ clockOffsetMs: 8 * 60_000 });
    await sim!.close();
    await releaseUnder({ clockOffsetMs: -8 * 60_000 });
  });

  it('the built CLI SIGKILLed mid-run, then run again: exactly the expected state, deregistered', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stub-faults-'));
    try {
      const simProc = await startSimProcess(
        faultScenario({ stuck: 30, running: false, held: false, faults: { latencyMs: 10 } }),
        dir,
      );
      const before = simProc.before;
      const env = { ...process.env, OMNI_SERVICE_ACCOUNT_KEY: simProc.keys[`infra-provider:${ID}`]! };
      const argv = [
        MAIN,
        'run',
        '--id',
        ID,
        '--omni-api-endpoint',
        simProc.endpoint,
        '--yes',
        '--concurrency',
        '4',
        '--output',
        'json',
        '--log-format',
        'json',
      ];

      // First run: killed as soon as it has released a few machines.
      const first = spawn(process.execPath, argv, { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let released = 0;
      const lines = createInterface({ input: first.stderr });
      lines.on('line', (l) => {
        if (l.includes('"released"') && ++released === 3) first.kill('SIGKILL');
      });
      const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
        first.on('exit', (c, s) => r([c, s])),
      );
      expect(signal).toBe('SIGKILL');
      expect(code).toBeNull();

      // Second run: finishes the work, deregisters, exits 0. The killed run's heartbeat is still live:
      // without --force the second run would wait up to 60 s for it to go stale (design rule 7;
      // test/provider/run/one-run.test.ts), as a Job's retry does.
      const second = spawn(process.execPath, [...argv, '--force'], { env, stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      second.stdout.on('data', (d: Buffer) => {
        out += d.toString();
      });
      const code2 = await new Promise<number | null>((r) => second.on('exit', (c) => r(c)));
      expect(code2).toBe(0);
      const report = JSON.parse(out) as Record<string, unknown>;
      expect(JSON.stringify(report)).not.toContain(env.OMNI_SERVICE_ACCOUNT_KEY);

      const after = await simProc.stop();
      expect(checkRelease(before, after, { providerId: ID, complete: true, deregistered: true }).problems).toEqual([]);
      // Deregistered: nothing labelled with our ID or in our namespace is left; the look-alikes are.
      const ours = after.filter(
        (r) =>
          r.metadata.namespace === `infra-provider:${ID}` ||
          r.metadata.labels['omni.sidero.dev/infra-provider-id'] === ID,
      );
      expect(ours.map(keyOf)).toEqual([]);
      expect(
        after
          .filter((r) => r.metadata.type === T.InfraMachine)
          .map((r) => r.metadata.id)
          .sort(),
      ).toEqual([machineUuid(0, 2), machineUuid(0, 3)].sort());
      // The second run finished what the killed one had started, and deregistered.
      const rep = report as { result: string; released: unknown[]; deregistration: { status: string } };
      expect(rep.result).toBe('done');
      expect(rep.deregistration.status).toBe('deregistered');
      expect(rep.released.length).toBeGreaterThan(0);
      expect(rep.released.length).toBeLessThanOrEqual(33 - 3);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
