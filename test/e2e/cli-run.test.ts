// The built CLI as a Job runs it (docs/operator-guide.md, "Container and Kubernetes Job"):
// `stub-provider sim` serves a scenario in one process; `stub-provider --id ... --yes --output json
// --report FILE` runs in another with the key in the environment and stdin not a terminal. Checked: exit
// codes, the JSON report on stdout and in the file, and the simulated Omni's final state as dumped on SIGTERM.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { Resource } from '../../src/omni-api/resource.js';
import { dumpScenario, parseScenario } from '../../src/omni-sim/scenario/scenario.js';
import type { Report } from '../../src/provider/report/report.js';
import { cleanEnv, MAIN, requireBuiltCli, runCli, scratchDirEachTest } from '../helpers/cli-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BARE = join(ROOT, 'scenarios/bare-metal-stuck.yaml');
const UUID = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';
const ID = 'bare-metal';

const children: ChildProcessWithoutNullStreams[] = [];
requireBuiltCli();
const dir = scratchDirEachTest('cli-run-e2e-');
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function waitExit(child: ChildProcessWithoutNullStreams, limitMs: number, what: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not exit within ${limitMs} ms`));
    }, limitMs);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}

interface SimProc {
  child: ChildProcessWithoutNullStreams;
  endpoint: string;
  key: string;
  stop: () => Promise<number | null>;
}

async function startSim(scenarioFile: string, dump: string): Promise<SimProc> {
  const child = spawn(process.execPath, [MAIN, 'sim', '--scenario', scenarioFile, '--dump', dump], {
    cwd: ROOT,
    env: cleanEnv({}),
  });
  children.push(child);
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  // The first line on stdout says where it listens and holds the keys it generated.
  const lines = createInterface({ input: child.stdout });
  const timer = new AbortController();
  const line = await Promise.race([
    once(lines, 'line').then(([l]) => l as string),
    once(child, 'exit').then(([code]) => {
      throw new Error(`sim exited ${String(code)} before ready; stderr: ${err}`);
    }),
    delay(15_000, undefined, { signal: timer.signal }).then(() => {
      throw new Error(`no ready line within 15 s; stderr: ${err}`);
    }),
  ]).finally(() => timer.abort());
  lines.close();
  const ready = JSON.parse(line) as { endpoint: string; keys: Record<string, string> };
  const key = ready.keys[`infra-provider:${ID}`];
  expect(key, 'the sim generated the provider key').toBeTypeOf('string');
  return {
    child,
    endpoint: ready.endpoint,
    key: key as string,
    stop: async () => {
      child.kill('SIGTERM');
      return waitExit(child, 15_000, 'sim');
    },
  };
}

/** The built CLI as a Job runs it: stdin a pipe, never a terminal (--yes is what allows changes). */
const stub = (args: string[], env: NodeJS.ProcessEnv) =>
  runCli(args, { cwd: ROOT, env: cleanEnv(env), limitMs: 30_000 });

const keyOf = (r: Resource) => `${r.metadata.namespace}/${r.metadata.type}/${r.metadata.id}`;

describe('stub-provider (run) against stub-provider sim, as separate processes', () => {
  it('releases, cleans up, deregisters (exit 0, JSON); re-run changes nothing; usage errors exit 2 first', async () => {
    const dump = join(dir(), 'dump.yaml');
    const reportFile = join(dir(), 'report.json');
    const sim = await startSim(BARE, dump);
    const env = { OMNI_SERVICE_ACCOUNT_KEY: sim.key };
    const base = ['--omni-api-endpoint', sim.endpoint, '--yes', '--output', 'json', '--log-format', 'json'];

    // An --id that is not the key's (differs only in case): refused before anything is written.
    const wrongId = await stub(['--id', 'Bare-Metal', ...base], env);
    expect(wrongId.code, wrongId.stderr).toBe(2);
    expect(wrongId.stderr).toMatch(/Bare-Metal/);
    // No key at all.
    const noKey = await stub(['--id', ID, ...base], {});
    expect(noKey.code, noKey.stderr).toBe(2);
    expect(noKey.stderr).toMatch(/OMNI_SERVICE_ACCOUNT_KEY|service account key/i);

    const first = await stub(['--id', ID, ...base, '--report', reportFile], env);
    expect(first.code, first.stderr).toBe(0);
    const rep = JSON.parse(first.stdout) as Report;
    expect(JSON.parse(await readFile(reportFile, 'utf8'))).toEqual(rep);
    expect(rep).toMatchObject({
      tool: 'stub-provider',
      command: 'run',
      providerId: ID,
      mode: 'whole',
      result: 'done',
      exitCode: 0,
      omniVersion: expect.stringMatching(/1\.3\.4/),
    });
    expect(rep.released).toEqual([expect.objectContaining({ kind: 'InfraMachine', id: UUID })]);
    expect(rep.failed).toEqual([]);
    expect(rep.deregistration).toMatchObject({
      status: 'deregistered',
      lastStep: `omnictl infraprovider delete ${ID}`,
    });
    // The key never reaches the outputs.
    const keyBody = JSON.parse(Buffer.from(sim.key, 'base64').toString('utf8')) as { pgp_key: string };
    for (const text of [first.stdout, first.stderr, await readFile(reportFile, 'utf8')]) {
      expect(text).not.toContain(sim.key);
      expect(text).not.toContain(keyBody.pgp_key.split('\n')[3]);
    }

    const second = await stub(['--id', ID, ...base], env);
    expect(second.code, second.stderr).toBe(0);
    const again = JSON.parse(second.stdout) as Report;
    expect(again).toMatchObject({ result: 'nothing-to-do', released: [], refused: [], exitCode: 0 });
    expect(again.writes).toEqual({});

    expect(await sim.stop()).toBe(0);
    const before = parseScenario(await readFile(BARE, 'utf8'));
    const after = parseScenario(await readFile(dump, 'utf8'));
    const byKey = new Map(after.resources.map((r) => [keyOf(r), r]));
    // Our finalizers are gone from everything; the machine and the provider's outputs are destroyed.
    expect(after.resources.filter((r) => r.metadata.finalizers.some((f) => f.startsWith(`${ID}.`)))).toEqual([]);
    expect(after.resources.filter((r) => r.metadata.id === UUID)).toEqual([]);
    expect(after.resources.filter((r) => r.metadata.namespace === `infra-provider:${ID}`)).toEqual([]);
    // Deregistered: the provider's statuses are gone.
    expect(
      after.resources.filter((r) => /^InfraProvider(Health)?Statuses\./.test(r.metadata.type) && r.metadata.id === ID),
    ).toEqual([]);
    // Omni's own registration is untouched, finalizer and version included: deleting it is the admin's last step.
    const registration = before.resources.find((r) => r.metadata.type === 'InfraProviders.omni.sidero.dev')!;
    expect(byKey.get(keyOf(registration))).toEqual(registration);
    // Nothing else appeared or changed.
    const expectedGone = new Set(
      before.resources
        .filter((r) => r.metadata.id === UUID || r.metadata.type.startsWith('InfraProviderStatuses.'))
        .map(keyOf),
    );
    expect(after.resources.map(keyOf).sort()).toEqual(
      before.resources
        .map(keyOf)
        .filter((k) => !expectedGone.has(k))
        .sort(),
    );
  }, 90_000);

  it('a provider that is not registered: exit 3, how to re-create the registration, nothing written', async () => {
    const sc = parseScenario(await readFile(BARE, 'utf8'));
    const unregistered = join(dir(), 'unregistered.yaml');
    await writeFile(
      unregistered,
      dumpScenario({
        ...sc,
        resources: sc.resources.filter((r) => r.metadata.type !== 'InfraProviders.omni.sidero.dev'),
      }),
    );
    const dump = join(dir(), 'dump.yaml');
    const sim = await startSim(unregistered, dump);
    const r = await stub(['--id', ID, '--omni-api-endpoint', sim.endpoint, '--yes', '--output', 'json'], {
      OMNI_SERVICE_ACCOUNT_KEY: sim.key,
    });
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/omnictl infraprovider create bare-metal/);
    expect(await sim.stop()).toBe(0);
    const after = parseScenario(await readFile(dump, 'utf8'));
    const original = parseScenario(await readFile(unregistered, 'utf8'));
    expect(after.resources).toEqual(original.resources);
  }, 60_000);
});
