// The built CLI (`dist/src/main.js`) against the simulated Omni behind a tampering proxy (docs/design.md
// rules 11 and 12): a gzip bomb, a 400 MB answer, endless Lists, a redirect, a far-off clock and a
// bare 404 each end the run with the documented exit code and error code, nothing written to Omni,
// and (for the memory cases) a peak RSS of the stub's process under 512 MB. The peak is the kernel's
// (getrusage maxRSS), written at exit by the benchmark's preloaded usage hook (bench/usage-hook.ts).

import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { T, type Resource } from '../../src/omni-api/resource.js';
import { bareMetalMachine, machineUuid, providerRegistration } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { wireResource } from '../helpers/fake-gateway.js';
import { startTamperProxy, writeEndlessly, type TamperProxy, type TamperRule } from '../helpers/tamper-proxy.js';
import { run } from './packaging-helpers.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(ROOT, 'dist/src/main.js');
const USAGE_HOOK = join(ROOT, 'dist/bench/usage-hook.js');
const ID = 'bare-metal';
const MiB = 1024 * 1024;
const RSS_LIMIT_MB = 512;

let dir: string;
let sim: Sim;
let proxy: TamperProxy;
let before: Resource[];
let runs = 0;

beforeAll(() => {
  expect(existsSync(MAIN) && existsSync(USAGE_HOOK), 'run `npm run build` first').toBe(true);
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hostile-cli-'));
  sim = await createSim({
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    // One machine in use (running), one being deleted.
    resources: [
      ...providerRegistration(ID, { static: true }),
      ...bareMetalMachine(ID, machineUuid(0), { phase: 'running' }),
      ...bareMetalMachine(ID, machineUuid(1)),
    ],
    faults: {},
  });
  proxy = await startTamperProxy(sim.endpoint);
  before = sim.store.all();
});
afterEach(async () => {
  await proxy.close();
  await sim.close();
  await rm(dir, { recursive: true, force: true });
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  peakRssMb: number;
}

/** `stub-provider --id bare-metal --yes` through the proxy, as a Job runs it; its peak RSS from the hook. */
async function stub(extraEnv: Record<string, string> = {}): Promise<Ran> {
  const usage = join(dir, `usage-${runs++}.json`);
  const env: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const [k, v] of Object.entries(process.env)) if (!/^(OMNI_|STUB_PROVIDER_|NODE_OPTIONS$)/.test(k)) env[k] = v;
  Object.assign(
    env,
    { OMNI_SERVICE_ACCOUNT_KEY: sim.keys[`infra-provider:${ID}`]!, BENCH_USAGE_FILE: usage },
    extraEnv,
  );
  const args = [
    '--import',
    pathToFileURL(USAGE_HOOK).href,
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
  // stdin is not a terminal: --yes is what allows changes.
  const r = await run(process.execPath, args, { cwd: ROOT, env, timeoutMs: 60_000 });
  const peak = existsSync(usage)
    ? (JSON.parse(await readFile(usage, 'utf8')) as { peak_rss_mb: number }).peak_rss_mb
    : Number.NaN;
  return { code: r.code, stdout: r.stdout, stderr: r.stderr, peakRssMb: peak };
}

/** The run failed with `code`, exit `exit`, wrote nothing to Omni (and, given a limit, stayed under it). */
function expectRefused(r: Ran, exit: number, code: string): void {
  expect(r.code, r.stderr.slice(-3000)).toBe(exit);
  expect(r.stderr).toContain(`"code":"${code}"`);
  expect(sim.store.all()).toEqual(before);
}

function expectBoundedMemory(r: Ran): void {
  expect(r.peakRssMb, 'the usage hook wrote the peak RSS at exit').toBeGreaterThan(0);
  expect(r.peakRssMb).toBeLessThan(RSS_LIMIT_MB);
}

/** One gzip member of 16 MiB of spaces (about 16 KB): concatenated members are one gzip stream. */
const SPACES_MEMBER = gzipSync(Buffer.alloc(16 * MiB, ' '), { level: 9 });

const onRpc =
  (rpc: string, write: (res: ServerResponse) => void): TamperRule =>
  (r) =>
    r.rpc === rpc ? { kind: 'respond', write } : undefined;

describe('hostile answers to the built CLI', () => {
  it('a gzip bomb answering every Get (3 MB to 3 GB): exit 5, STUB_ANSWER_TOO_LARGE, bounded memory', async () => {
    const bomb = Buffer.concat(
      Array.from({ length: Math.ceil((3 * MiB) / SPACES_MEMBER.length) }, () => SPACES_MEMBER),
    );
    expect(bomb.length).toBeLessThan(4 * MiB);
    proxy.setRule(
      onRpc('Get', (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        res.end(bomb);
      }),
    );
    const r = await stub();
    expectRefused(r, 5, 'STUB_ANSWER_TOO_LARGE');
    expect(r.stderr).toContain('inflates to more than 64 MiB');
    expectBoundedMemory(r);
  });

  it('a 400 MB answer to a Get: refused while it arrives (exit 5, STUB_ANSWER_TOO_LARGE), bounded memory', async () => {
    let sent: Promise<number> | undefined;
    proxy.setRule(
      onRpc('Get', (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"resource":{"metadata":{},"spec":{"yaml_spec":"');
        sent = writeEndlessly(res, Buffer.alloc(MiB, 'a'), 400 * MiB);
      }),
    );
    const r = await stub();
    expectRefused(r, 5, 'STUB_ANSWER_TOO_LARGE');
    expectBoundedMemory(r);
    expect(await sent).toBeLessThan(200 * MiB);
  });

  it('an endless List of the same InfraMachine: exit 5, STUB_DUPLICATE_ID, bounded memory', async () => {
    const im = before.find((x) => x.metadata.type === T.InfraMachine)!;
    const line = Buffer.from(`${JSON.stringify({ result: { resource: wireResource(im) } })}\n`);
    let sent: Promise<number> | undefined;
    proxy.setRule((q) =>
      q.rpc === 'List' && (q.body as { type?: string }).type === T.InfraMachine
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              sent = writeEndlessly(res, Buffer.concat(Array(64).fill(line)), 4096 * MiB);
            },
          }
        : undefined,
    );
    const r = await stub();
    expectRefused(r, 5, 'STUB_DUPLICATE_ID');
    expectBoundedMemory(r);
    expect(await sent).toBeLessThan(256 * MiB);
  });

  it('an endless InfraMachines List stops at --max-list-items (env): exit 5, STUB_LIST_TOO_LONG, bounded', async () => {
    const w = wireResource(before.find((x) => x.metadata.type === T.InfraMachine)!);
    let n = 0;
    proxy.setRule((q) =>
      q.rpc === 'List' && (q.body as { type?: string }).type === T.InfraMachine
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(200, { 'content-type': 'application/json' });
              const pump = (): void => {
                while (!res.destroyed && n < 10_000_000) {
                  const batch = Array.from({ length: 256 }, () => {
                    const metadata = { ...(w['metadata'] as object), id: machineUuid(n++, 7) };
                    return `${JSON.stringify({ result: { resource: { ...w, metadata } } })}\n`;
                  }).join('');
                  if (!res.write(batch)) return void res.once('drain', pump);
                }
              };
              pump();
            },
          }
        : undefined,
    );
    const r = await stub({ STUB_PROVIDER_MAX_LIST_ITEMS: '50000' });
    expectRefused(r, 5, 'STUB_LIST_TOO_LONG');
    expect(r.stderr).toContain('more than 50000 items in one List');
    expectBoundedMemory(r);
  });

  it('every List an endless gzip line at once: exit 5, refused by line or shared-budget cap, bounded', async () => {
    proxy.setRule(
      onRpc('List', (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        void writeEndlessly(res, SPACES_MEMBER, 64 * 1024 * MiB);
      }),
    );
    const r = await stub();
    expect(r.code, r.stderr.slice(-3000)).toBe(5);
    expect(r.stderr).toMatch(/"code":"STUB_(LINE_TOO_LONG|ANSWER_TOO_LARGE)"/);
    expect(sim.store.all()).toEqual(before);
    expectBoundedMemory(r);
  });

  it('a bare 404 page for the heartbeat Get is not "no heartbeat": exit 5, STUB_HTTP_STATUS', async () => {
    proxy.setRule((q) =>
      (q.body as { type?: string }).type === T.InfraProviderHealthStatus
        ? {
            kind: 'respond',
            write: (res) => {
              res.writeHead(404, { 'content-type': 'text/html' });
              res.end('<html><body><h1>404 Not Found</h1></body></html>');
            },
          }
        : undefined,
    );
    const r = await stub();
    expectRefused(r, 5, 'STUB_HTTP_STATUS');
    expect(r.stderr).toContain('answered HTTP 404 without a gRPC status');
  });

  it('a redirect: exit 2, STUB_REDIRECTED, naming the escaped Location', async () => {
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(302, [['location', 'https://sso.example.com/login?next=\x9b2J']]);
        res.end();
      },
    }));
    const r = await stub();
    expectRefused(r, 2, 'STUB_REDIRECTED');
    // The logs are JSON, so the message is in the last record's msg, escaped once by the client.
    const last = JSON.parse(r.stderr.trim().split('\n').at(-1)!) as { msg: string };
    expect(last.msg).toContain('redirecting to https://sso.example.com/login?next=\\x9b2J');
    expect(r.stderr).not.toContain('\x9b');
  });

  it('"invalid signature" with a Date a month ahead: exit 4, STUB_CLOCK_SKEW, naming both clocks', async () => {
    const ahead = new Date(Date.now() + 31 * 24 * 3_600_000);
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(401, { 'content-type': 'application/json', date: ahead.toUTCString() });
        res.end('{"code":16,"message":"invalid signature"}');
      },
    }));
    const r = await stub();
    expectRefused(r, 4, 'STUB_CLOCK_SKEW');
    expect(r.stderr).toContain(
      `its Date header says ${new Date(Math.floor(ahead.getTime() / 1000) * 1000).toISOString()}`,
    );
    expect(r.stderr).toMatch(/this machine's clock \d{4}-\d\d-\d\dT/);
    expect(proxy.seen).toHaveLength(1);
  });
});
