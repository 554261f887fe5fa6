// Positive evidence over real HTTP (docs/design.md rules 4 and 10): a tampering proxy
// (test/helpers/tamper-proxy.ts) between the stub and the simulated Omni empties or thins out Lists
// that it may legitimately answer that way. The stub must then treat nothing as a leftover on that
// absence, never destroy what hangs off a machine or request that exists, and never deregister while
// one exists. The reproduction of the original fault runs the built CLI against `stub-provider sim`; the rest
// runs reconcile() in-process against an in-process sim.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOmniClient } from '../../src/omni-client/client.js';
import type { Resource } from '../../src/omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_MACHINE_REQUEST,
  NS_INFRA_PROVIDER,
  T,
  newMetadata,
} from '../../src/omni-api/resource.js';
import { silentLogger } from '../../src/log.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import type { Scenario } from '../../src/omni-sim/scenario/scenario.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import type { ReconcileResult } from '../../src/provider/run/contract.js';
import type { Report } from '../../src/provider/report/report.js';
import { canonical, checkRelease, keyOf } from '../helpers/release-oracle.js';
import { MAIN } from '../helpers/cli-process.js';
import { startSimProcess, type SimProcess } from '../helpers/sim-process.js';
import { startTamperProxy, type TamperProxy, type TamperRequest, type TamperRule } from '../helpers/tamper-proxy.js';

const ID = 'bare-metal';
const RUNNING = machineUuid(7, 11);

/** The type a List asks for, undefined for every other call. */
export const listedType = (r: TamperRequest): string | undefined =>
  r.rpc === 'List' ? (r.body as { type?: string } | undefined)?.type : undefined;
const WRITES = new Set(['Create', 'Update', 'Destroy', 'Teardown']);

function scenarioOf(resources: Resource[], id = ID): Scenario {
  return {
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${id}`, role: 'InfraProvider', publicKeys: [] }],
    resources,
    faults: {},
  };
}

/** Resources as a comparable list (metadata and spec bytes), sorted, the heartbeat left out. */
const stateOf = (rs: Resource[]) =>
  rs
    .filter((r) => r.metadata.type !== T.InfraProviderHealthStatus)
    .map(canonical)
    .sort();

let sim: Sim | undefined;
let proxy: TamperProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await sim?.close();
  proxy = undefined;
  sim = undefined;
});

async function runThrough(endpoint: string, key: string, id = ID): Promise<ReconcileResult> {
  const client = await createOmniClient({ endpoint, key, concurrency: 16, env: {} });
  try {
    return await reconcile(
      { state: client.state, logger: silentLogger(), version: 'test' },
      {
        providerId: id,
        machines: [],
        profile: 'auto',
        stateTypes: [],
        deregister: true,
        wait: false,
        timeoutMs: 20_000,
        omniWaitMs: 5_000,
        concurrency: 4,
      },
    );
  } finally {
    await client.close();
  }
}

/** An in-process sim behind the proxy with `rule`; returns what the stub left and the state before. */
async function underProxy(
  resources: Resource[],
  rule: TamperRule,
  id = ID,
): Promise<{ result: ReconcileResult; before: Resource[]; after: Resource[] }> {
  sim = await createSim(scenarioOf(resources, id));
  await sim.controllers?.idle();
  const before = sim.store.all();
  proxy = await startTamperProxy(sim.endpoint, rule);
  const result = await runThrough(proxy.endpoint, sim.keys[`infra-provider:${id}`]!, id);
  await sim.controllers?.idle();
  return { result, before, after: sim.store.all() };
}

describe('the built CLI against stub-provider sim, a tampering proxy in between (original fault reproduced)', () => {
  beforeAll(() => {
    expect(existsSync(MAIN), 'run `npm run build` first').toBe(true);
  });

  it('InfraMachines List: empty, {"result":{}} lines: in-use machine kept, none cleaned or deregistered', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stub-evidence-'));
    let simProc: SimProcess | undefined;
    try {
      simProc = await startSimProcess(
        scenarioOf([
          ...providerRegistration(ID, { static: true }),
          ...bareMetalMachine(ID, RUNNING, { phase: 'running' }),
        ]),
        dir,
      );
      // The empty body keeps the upstream status and headers: a legitimate "no items" answer.
      let answer: 'empty' | 'empty-results' = 'empty';
      proxy = await startTamperProxy(simProc.endpoint, (r) =>
        listedType(r) === T.InfraMachine
          ? { kind: 'lines', map: () => (answer === 'empty' ? null : '{"result":{}}') }
          : undefined,
      );
      const env = { ...cleanEnv(), OMNI_SERVICE_ACCOUNT_KEY: simProc.keys[`infra-provider:${ID}`]! };
      const argv = [
        MAIN,
        '--id',
        ID,
        '--omni-api-endpoint',
        proxy.endpoint,
        '--yes',
        '--output',
        'json',
        '--log-format',
        'json',
      ];

      const empty = await runCli(argv, env);
      expect(empty.code, empty.stderr).toBe(0);
      const rep = JSON.parse(empty.stdout) as Report;
      expect(rep).toMatchObject({ result: 'nothing-to-do', cleaned: 0, released: [], failed: [], refused: [] });
      expect(rep.running).toEqual([
        expect.objectContaining({ kind: 'InfraMachine', id: RUNNING, reason: expect.stringMatching(/in use/) }),
      ]);
      expect(rep.deregistration.status).toBe('not-ready');
      expect(rep.deregistration.reasons).toContainEqual(
        expect.stringMatching(new RegExp(`InfraMachines ${RUNNING} was not in its List, but a Get of its ID found it`)),
      );
      // The machine was read by its ID (one Get), and nothing at all was written.
      expect(proxy.seen.filter((r) => r.rpc === 'Get' && (r.body as { id?: string }).id === RUNNING)).toHaveLength(1);
      expect(proxy.seen.filter((r) => WRITES.has(r.rpc))).toEqual([]);

      // Lines without a resource: once they are protocol errors the run stops with exit 5; until then
      // they decode as resources of nobody. Either way nothing is written.
      answer = 'empty-results';
      const results = await runCli(argv, env);
      expect([0, 5], results.stderr).toContain(results.code);
      if (results.code === 0) {
        const again = JSON.parse(results.stdout) as Report;
        expect(again).toMatchObject({ cleaned: 0, released: [], failed: [] });
        expect(again.deregistration.status).toBe('not-ready');
      }
      expect(proxy.seen.filter((r) => WRITES.has(r.rpc))).toEqual([]);

      const after = await simProc.stop();
      const before = simProc.before;
      // Exactly the state before: the InfraMachine with its six finalizers, its InfraMachineStatus,
      // BMCConfiguration, MachineStatus, PowerOperation, RebootStatus, WipeStatus and the ProviderStatus.
      expect(stateOf(after.filter((r) => r.metadata.type !== T.SysVersion))).toEqual(stateOf(before));
      expect(after.find((r) => r.metadata.type === T.InfraMachine)?.metadata.finalizers).toHaveLength(6);
    } finally {
      await simProc?.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('reconcile() through the tampering proxy', () => {
  it('InfraMachines withheld: deleted ones released (Get found them), in-use untouched, not deregistered', async () => {
    const resources = [...providerRegistration(ID, { static: true })];
    for (let i = 0; i < 6; i++)
      resources.push(...bareMetalMachine(ID, machineUuid(i, 12), { phase: i % 3 === 0 ? 'running' : 'tearingDown' }));
    // Every other line of every InfraMachines List left out: running and tearing-down ones alike.
    const { result, before, after } = await underProxy(resources, (r) =>
      listedType(r) === T.InfraMachine ? { kind: 'lines', map: (line, i) => (i % 2 === 0 ? null : line) } : undefined,
    );
    expect(
      checkRelease(before, after, { providerId: ID, complete: true, deregistered: result.deregistered }).problems,
    ).toEqual([]);
    expect(result.deregistered).toBe(false);
    expect(result.outcomes.filter((o) => o.status !== 'released')).toEqual([]);
    expect(
      result.outcomes
        .filter((o) => o.kind === 'InfraMachine')
        .map((o) => o.id)
        .sort(),
    ).toEqual([1, 2, 4, 5].map((i) => machineUuid(i, 12)).sort());
    expect(result.outcomes.filter((o) => o.kind === 'leftover')).toEqual([]);
    // The running ones and everything of them, byte for byte.
    for (const i of [0, 3]) {
      const mine = (rs: Resource[]) => stateOf(rs.filter((r) => r.metadata.id === machineUuid(i, 12)));
      expect(mine(after)).toEqual(mine(before));
      expect(mine(after)).toHaveLength(7);
    }
    expect(after.some((r) => r.metadata.type === T.InfraProviderStatus && r.metadata.id === ID)).toBe(true);
  }, 30_000);

  it('MachineRequests withheld: running one (status, patches) untouched, not refused; deleted released', async () => {
    const id = 'kubevirt';
    const cpr = (rid: string, n: number): Resource => ({
      metadata: newMetadata(
        { namespace: NS_INFRA_PROVIDER, type: T.ConfigPatchRequest, id: `${rid}-patch-${n}` },
        {
          version: '2',
          owner: `${id}.ProvisionController`,
          finalizers: ['ConfigPatchRequestController'],
          labels: { [LABEL_INFRA_PROVIDER_ID]: id, [LABEL_MACHINE_REQUEST]: rid },
        },
      ),
      spec: { protoSpec: new Uint8Array([0x0a, 0x01, 0x78]) },
    });
    const resources = [
      ...providerRegistration(id),
      ...provisionedRequest(id, 'w-run', { phase: 'running' }),
      cpr('w-run', 1),
      cpr('w-run', 2),
      ...provisionedRequest(id, 'w-del'),
      cpr('w-del', 1),
    ];
    const { result, before, after } = await underProxy(
      resources,
      (r) => (listedType(r) === T.MachineRequest ? { kind: 'lines', map: () => null } : undefined),
      id,
    );
    expect(
      checkRelease(before, after, { providerId: id, complete: true, deregistered: result.deregistered }).problems,
    ).toEqual([]);
    expect(result.deregistered).toBe(false);
    expect(result.refusals).toEqual([]);
    expect(result.outcomes.map((o) => `${o.kind}/${o.id}/${o.status}`)).toEqual(['MachineRequest/w-del/released']);
    const ofRunning = (rs: Resource[]) => stateOf(rs.filter((r) => r.metadata.id.startsWith('w-run')));
    expect(ofRunning(after)).toEqual(ofRunning(before));
    expect(ofRunning(after)).toHaveLength(5);
    expect(after.filter((r) => r.metadata.id.startsWith('w-del')).map(keyOf)).toEqual([]);
    expect(result.lastPlan.deregistration.reasons).toContainEqual(
      expect.stringMatching(/MachineRequests w-run was not in its List/),
    );
  }, 30_000);

  it('a machine really gone: leftovers cleaned after its Get answered NotFound, provider deregistered', async () => {
    const gone = machineUuid(9, 12);
    const resources = [...providerRegistration(ID, { static: true }), ...bareMetalMachine(ID, gone).slice(1)];
    const { result, before, after } = await underProxy(resources, () => undefined);
    expect(
      checkRelease(before, after, { providerId: ID, complete: true, deregistered: result.deregistered }).problems,
    ).toEqual([]);
    expect(result.deregistered).toBe(true);
    expect(after.filter((r) => r.metadata.id === gone)).toEqual([]);
    expect(
      proxy!.seen
        .filter((r) => r.rpc === 'Get' && (r.body as { id?: string }).id === gone)
        .map((r) => (r.body as { type?: string }).type),
    ).toEqual([T.InfraMachine]);
  }, 30_000);
});

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const [k, v] of Object.entries(process.env)) if (!/^(OMNI_|STUB_PROVIDER_)/.test(k)) env[k] = v;
  return env;
}

async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}
