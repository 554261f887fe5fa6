// `stub-provider sim` as a user runs it: the built CLI (npm run build), a scenario file, the ready line
// on stdout, real calls (over HTTPS with the generated CA), SIGTERM, the dump, exit 0. Its usage
// errors, through main() in this process: test/commands/sim.test.ts.

import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { MAIN, requireBuiltCli } from '../helpers/cli-process.js';
import { parseScenario } from '../../src/omni-sim/scenario/scenario.js';
import { startWithReadyLine, type Child } from '../helpers/child-process.js';
import { signHeaders } from '../helpers/raw-client.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BARE = join(ROOT, 'scenarios/bare-metal-stuck.yaml');
const UUID = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';

let dir: string;
const children: ChildProcessWithoutNullStreams[] = [];

requireBuiltCli();
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Running extends Child {
  ready: { endpoint: string; keys: Record<string, string> };
}

async function startSim(args: string[]): Promise<Running> {
  const sim = await startWithReadyLine(process.execPath, [MAIN, 'sim', ...args], { cwd: ROOT });
  children.push(sim.child);
  return sim as Running;
}

function keyFrom(serviceAccountKey: string) {
  const k = JSON.parse(Buffer.from(serviceAccountKey, 'base64').toString('utf8')) as { name: string; pgp_key: string };
  return { name: k.name, armoredPrivateKey: k.pgp_key };
}

describe('stub-provider sim', () => {
  it('--keys-dir writes the endpoint and a key per identity: <id>.key per provider, <name>.key per user', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sim-e2e-'));
    const keys = join(dir, 'keys');
    const sim = await startSim(['--scenario', BARE, '--keys-dir', keys]);
    expect((await readdir(keys)).sort()).toEqual(['admin@example.org.key', 'bare-metal.key', 'endpoint']);
    expect(Object.keys(sim.ready.keys).sort()).toEqual(['admin@example.org', 'infra-provider:bare-metal']);
    sim.child.kill('SIGTERM');
  });

  it('serves HTTPS with its generated CA, and dumps the changed state on SIGTERM, exit 0', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sim-e2e-'));
    const dump = join(dir, 'dump.yaml');
    const caFile = join(dir, 'ca.pem');
    const sim = await startSim(['--scenario', BARE, '--dump', dump, '--tls', '--tls-ca-out', caFile]);
    expect(sim.ready.endpoint).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(Object.keys(sim.ready.keys).sort()).toEqual(['admin@example.org', 'infra-provider:bare-metal']);
    expect(sim.stderr()).not.toContain('PRIVATE KEY');

    const key = keyFrom(sim.ready.keys['infra-provider:bare-metal'] as string);
    const agent = new Agent({ connect: { ca: await readFile(caFile, 'utf8') } });
    const post = async (method: string, body: unknown) => {
      const res = await request(`${sim.ready.endpoint}/api/cosi.resource.State/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signHeaders(key, `/cosi.resource.State/${method}`)) },
        body: JSON.stringify(body),
        dispatcher: agent,
      });
      return {
        status: res.statusCode,
        json: (await res.body.json()) as { resource: { metadata: Record<string, unknown>; spec: unknown } },
      };
    };
    try {
      const got = await post('Get', { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: UUID });
      expect(got.status).toBe(200);
      const md = got.json.resource.metadata;
      // The provider removes one of its finalizers (a finalizer-only update, allowed on this read-only type).
      const finalizers = (md['finalizers'] as string[]).filter((f) => f !== 'bare-metal.WipeStatusController');
      const upd = await post('Update', {
        new_resource: { metadata: { ...md, finalizers }, spec: got.json.resource.spec },
        options: { owner: 'InfraMachineController' },
      });
      expect(upd.status).toBe(200);
    } finally {
      await agent.close();
    }
    // A client that does not trust the CA is refused.
    await expect(
      request(`${sim.ready.endpoint}/api/cosi.resource.State/Get`, { method: 'POST', body: '{}' }),
    ).rejects.toThrow();

    sim.child.kill('SIGTERM');
    expect(await sim.exited).toBe(0);
    const state = parseScenario(await readFile(dump, 'utf8'));
    const im = state.resources.find((r) => r.metadata.type === 'InfraMachines.omni.sidero.dev');
    expect(im?.metadata.version).toBe('8');
    expect(im?.metadata.finalizers).toHaveLength(5);
    expect(im?.metadata.finalizers).not.toContain('bare-metal.WipeStatusController');
    const original = parseScenario(await readFile(BARE, 'utf8'));
    expect(state.resources.filter((r) => r !== im)).toEqual(
      original.resources.filter((r) => r.metadata.type !== 'InfraMachines.omni.sidero.dev'),
    );
  });

  it('plain HTTP on loopback by default; SIGINT also dumps and exits 0', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sim-e2e-'));
    const dump = join(dir, 'dump.yaml');
    const sim = await startSim(['--scenario', join(ROOT, 'scenarios/machine-request-stuck.yaml'), '--dump', dump]);
    expect(sim.ready.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    sim.child.kill('SIGINT');
    expect(await sim.exited).toBe(0);
    expect(parseScenario(await readFile(dump, 'utf8')).resources).toHaveLength(6);
  });

  it("--faults adds faults on top of the scenario's: Omni's write budget, a proxy's 503 with Retry-After", async () => {
    const sim = await startSim([
      '--scenario',
      BARE,
      '--faults',
      '{throttle: {infra_provider: {bytes_per_second: 1, burst: 10}}}',
    ]);
    const key = keyFrom(sim.ready.keys['infra-provider:bare-metal'] as string);
    const post = async (endpoint: string, method: string, body: unknown) => {
      const res = await request(`${endpoint}/api/cosi.resource.State/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signHeaders(key, `/cosi.resource.State/${method}`)) },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
    };
    const ptr = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: UUID };
    const got = JSON.parse((await post(sim.ready.endpoint, 'Get', ptr)).text) as {
      resource: { metadata: Record<string, unknown>; spec: unknown };
    };
    const md = got.resource.metadata;
    const upd = await post(sim.ready.endpoint, 'Update', {
      new_resource: { metadata: { ...md, finalizers: [] }, spec: got.resource.spec },
      options: { owner: 'InfraMachineController' },
    });
    // The write costs more than the burst of 10 bytes.
    expect([upd.status, (JSON.parse(upd.text) as { code: number }).code]).toEqual([429, 8]);
    sim.child.kill('SIGTERM');
    expect(await sim.exited).toBe(0);

    const proxied = await startSim([
      '--scenario',
      BARE,
      '--faults',
      '{"proxy_limit": {"requests_per_second": 0, "burst": 0, "status": 503, "retry_after_s": 9}}',
    ]);
    const refused = await post(proxied.ready.endpoint, 'Get', ptr);
    expect([refused.status, refused.headers['retry-after']]).toEqual([503, '9']);
  });
});
