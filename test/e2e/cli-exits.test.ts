// Issue 14 items 5 and 6, with the built CLI against simulated Omnis in this process: every exit of
// `run` and `plan` (0, 2 after parsing, 3, 4, 5, 130, 143, and plan's 10) has its result, with the
// error's stable code and message, on stdout with --output json (and yaml) and in the --report file;
// and plan's exit code predicts run's: 0 nothing to do, 10 changes pending, 3 where run is refused,
// 4 where its key is. TLS failures name --ca-file and --insecure-skip-tls-verify (the sim's --tls).

import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { T } from '../../src/omni-api/resource.js';
import { INTERNAL } from '../../src/omni-sim/api.js';
import { bareMetalMachine, generateScenario, machineUuid } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { generateSelfSignedCert } from '../../src/omni-sim/gateway/tls.js';
import { cleanEnv, requireBuiltCli, runCli, scratchDirEachTest, startCli } from '../helpers/cli-process.js';
import { healthStatus } from '../helpers/provider-fixtures.js';
import { startTamperProxy } from '../helpers/tamper-proxy.js';

const ID = 'bm';
const sims: Sim[] = [];
requireBuiltCli();
const dir = scratchDirEachTest('cli-exits-');
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

interface SimOpts {
  machines?: number;
  running?: number;
  registered?: boolean;
  heartbeatAgeMs?: number;
}

/**
 * A sim of provider ID with stuck machines (and running ones, a fresh heartbeat, no registration, latency) as asked.
 */
async function simWith(o: SimOpts = {}): Promise<Sim> {
  const sc = generateScenario({ providerId: ID, machines: o.machines ?? 1, omniVersion: '1.3.4' });
  for (let i = 0; i < (o.running ?? 0); i++)
    sc.resources.push(...bareMetalMachine(ID, machineUuid(i, 7), { phase: 'running' }));
  if (o.registered === false) sc.resources = sc.resources.filter((r) => r.metadata.type !== T.InfraProvider);
  if (o.heartbeatAgeMs !== undefined) sc.resources.push(healthStatus(ID, Date.now() - o.heartbeatAgeMs));
  const s = await createSim(sc);
  sims.push(s);
  await s.controllers?.idle();
  return s;
}

const keyOf = (s: Sim) => s.keys[`infra-provider:${ID}`]!;

interface Outcome {
  code: number | null;
  stdout: Record<string, unknown>;
  report: Record<string, unknown>;
  stderr: string;
}

/** Runs the CLI with `--output json --report FILE` and reads both results. */
async function withResults(
  args: string[],
  env: NodeJS.ProcessEnv,
  signal?: { send: NodeJS.Signals; when: RegExp | Promise<void> },
): Promise<Outcome> {
  const file = join(dir(), `report-${Math.random().toString(36).slice(2)}.json`);
  const child = startCli([...args, '--output', 'json', '--report', file, '--log-format', 'json'], { env });
  if (signal) {
    await (signal.when instanceof RegExp ? child.stderrMatches(signal.when) : signal.when);
    child.kill(signal.send);
  }
  const r = await child.done;
  const parse = (text: string, what: string) => {
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new Error(`${what} is not JSON (exit ${r.code}):\n${text}\n--- stderr\n${r.stderr}`);
    }
  };
  return {
    code: r.code,
    stdout: parse(r.stdout, 'stdout'),
    report: parse(await readFile(file, 'utf8'), `the report ${file}`),
    stderr: r.stderr,
  };
}

/** A loopback port that nothing listens on (one the OS just gave and took back). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const runArgs = (s: Sim | string, extra: string[] = []) => [
  '--id',
  ID,
  '--yes',
  '--omni-api-endpoint',
  typeof s === 'string' ? s : s.endpoint,
  ...extra,
];
const planArgs = (s: Sim | string, extra: string[] = []) => [
  'plan',
  '--id',
  ID,
  '--omni-api-endpoint',
  typeof s === 'string' ? s : s.endpoint,
  ...extra,
];
const envFor = (s: Sim, extra: NodeJS.ProcessEnv = {}) => cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: keyOf(s), ...extra });

/** A result without its clock (start, end, duration: each run has its own), to compare two runs' results. */
function untimed(r: unknown): unknown {
  expect(r).toMatchObject({
    startedAt: expect.any(String),
    endedAt: expect.any(String),
    durationMs: expect.any(Number),
  });
  const { startedAt: _s, endedAt: _e, durationMs: _d, ...rest } = r as Record<string, unknown>;
  return rest;
}

function expectResult(o: Outcome, exit: number, code: string | undefined, message?: RegExp): void {
  expect(o.code, o.stderr).toBe(exit);
  expect(o.report, 'the report file holds what stdout shows').toEqual(o.stdout);
  expect(o.stdout).toMatchObject({ tool: 'stub-provider', exitCode: exit });
  if (code === undefined) {
    expect(o.stdout.error).toBeUndefined();
    return;
  }
  expect(o.stdout.error).toMatchObject({ code, message: expect.any(String) });
  if (message) expect((o.stdout.error as { message: string }).message).toMatch(message);
  // The logs are JSON: the error is their last record, with the code, and every line of stderr parses.
  const lines = o.stderr.split('\n').filter((l) => l !== '');
  for (const l of lines) expect(() => JSON.parse(l) as unknown, l).not.toThrow();
  expect(JSON.parse(lines.at(-1)!)).toMatchObject({
    code,
    exitCode: exit,
    msg: (o.stdout.error as { message: string }).message,
  });
}

describe('run: every exit has its result, on stdout (--output json) and in --report', () => {
  it('0 done; 0 nothing to do; 2 after parsing (a duration, no endpoint)', async () => {
    const s = await simWith();
    const done = await withResults(runArgs(s), envFor(s));
    expectResult(done, 0, undefined);
    expect(done.stdout).toMatchObject({ command: 'run', result: 'done' });
    expectResult(await withResults(runArgs(s), envFor(s)), 0, undefined);
    const duration = await withResults(runArgs(s, ['--wait', '--timeout', '1000h']), envFor(s));
    expectResult(duration, 2, 'STUB_USAGE', /--timeout 1000h is longer than a timer can wait/);
    expect(duration.stdout).toMatchObject({ command: 'run', providerId: ID, result: 'failed' });
    const noEndpoint = await withResults(['--id', ID, '--yes'], envFor(s));
    expectResult(noEndpoint, 2, 'STUB_USAGE', /no Omni endpoint/);
  }, 60_000);

  it('3 not registered, 3 a live provider, 4 a key Omni does not know', async () => {
    const unregistered = await simWith({ registered: false });
    expectResult(
      await withResults(runArgs(unregistered), envFor(unregistered)),
      3,
      'STUB_NOT_REGISTERED',
      /not registered/,
    );
    const live = await simWith({ heartbeatAgeMs: 1000 });
    const refused = await withResults(runArgs(live), envFor(live));
    expectResult(refused, 3, 'STUB_LIVE_PROVIDER', /live provider/);
    expect(refused.stdout.result).toBe('failed');
    // The same provider ID in another Omni: a key pair of its own, unknown to the first.
    const other = await simWith();
    expectResult(await withResults(runArgs(live), envFor(other)), 4, 'OMNI_UNAUTHENTICATED');
  }, 60_000);

  it('5 Omni unreachable; 5 incomplete (--wait timed out on a machine in use)', async () => {
    const s = await simWith();
    const port = await closedPort();
    expectResult(
      await withResults(runArgs(`http://127.0.0.1:${port}`), envFor(s)),
      5,
      'STUB_TRANSPORT',
      /cannot reach Omni/,
    );
    const busy = await simWith({ machines: 0, running: 1 });
    const timedOut = await withResults(runArgs(busy, ['--wait', '--timeout', '1s']), envFor(busy));
    expectResult(timedOut, 5, 'STUB_INCOMPLETE');
    expect(timedOut.stdout).toMatchObject({ result: 'incomplete', timedOut: true });
  }, 60_000);

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

  it('--report alone: the file gets the failed result, stdout empty; --output yaml is the same result', async () => {
    const s = await simWith({ registered: false });
    const file = join(dir(), 'r.json');
    const r = await runCli([...runArgs(s), '--report', file, '--log-format', 'json'], { env: envFor(s) });
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
      result: 'failed',
      exitCode: 3,
      error: { code: 'STUB_NOT_REGISTERED' },
    });
    const y = await runCli([...runArgs(s), '-o', 'yaml', '--log-format', 'json'], { env: envFor(s) });
    expect(y.code).toBe(3);
    expect(untimed(parseYaml(y.stdout))).toEqual(untimed(JSON.parse(await readFile(file, 'utf8'))));
  }, 60_000);

  it('a report file that cannot be opened: exit 2, the result on stdout only', async () => {
    const s = await simWith();
    const r = await runCli([...runArgs(s), '--output', 'json', '--report', join(dir(), 'missing', 'r.json')], {
      env: envFor(s),
    });
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toMatchObject({
      result: 'failed',
      exitCode: 2,
      error: { code: 'STUB_USAGE', message: expect.stringMatching(/cannot open it for writing/) },
    });
  });
});

describe('plan: its exit code predicts run', () => {
  it('10 changes pending, then (after the run) 0 nothing to do; -o yaml holds what -o json does', async () => {
    const s = await simWith();
    const pending = await withResults(planArgs(s), envFor(s));
    expectResult(pending, 10, undefined);
    expect(pending.stdout).toMatchObject({ command: 'plan', result: 'planned', preflight: { forced: false } });
    expect(pending.stderr).not.toMatch(/stub-provider: /);
    const yaml = await runCli([...planArgs(s), '-o', 'yaml', '--log-format', 'json'], { env: envFor(s) });
    expect(yaml.code).toBe(10);
    expect(untimed(parseYaml(yaml.stdout))).toEqual(untimed(pending.stdout));
    expect((await runCli(runArgs(s, ['--log-format', 'json']), { env: envFor(s) })).code).toBe(0);
    expectResult(await withResults(planArgs(s), envFor(s)), 0, undefined);
  }, 60_000);

  it('3 if run refuses: live provider (plan, "forced": false; --force 10, "forced": true); unregistered', async () => {
    const live = await simWith({ heartbeatAgeMs: 1000 });
    const refused = await withResults(planArgs(live), envFor(live));
    expectResult(refused, 3, 'STUB_LIVE_PROVIDER', /run would refuse to start/);
    expect(refused.stdout).toMatchObject({
      result: 'planned',
      preflight: { forced: false, heartbeatOurs: false },
      planned: { items: [expect.objectContaining({ kind: 'InfraMachine' })] },
    });
    const forced = await withResults(planArgs(live, ['--force']), envFor(live));
    expectResult(forced, 10, undefined);
    expect(forced.stdout).toMatchObject({ preflight: { forced: true } });
    const unregistered = await simWith({ registered: false });
    expectResult(await withResults(planArgs(unregistered), envFor(unregistered)), 3, 'STUB_NOT_REGISTERED');
  }, 60_000);

  it('4 where run would be refused its key', async () => {
    const s = await simWith();
    const other = await simWith();
    expectResult(await withResults(planArgs(s), envFor(other)), 4, 'OMNI_UNAUTHENTICATED');
  }, 60_000);
});

describe('TLS errors say which flag fixes them (sim --tls)', () => {
  it('self-signed cert: --ca-file, --insecure-skip-tls-verify named (stderr, result); --ca-file works', async () => {
    const cert = await generateSelfSignedCert();
    const s = await createSim(generateScenario({ providerId: ID, machines: 1, omniVersion: '1.3.4' }), { tls: cert });
    sims.push(s);
    const o = await withResults(planArgs(s), envFor(s));
    expectResult(o, 5, 'STUB_TRANSPORT', /self-signed certificate.*--ca-file .*--insecure-skip-tls-verify/);
    expect(o.stderr).toMatch(
      /pass --ca-file <the CA certificate, PEM>; only for a test server, --insecure-skip-tls-verify/,
    );
    const ca = join(dir(), 'ca.pem');
    await writeFile(ca, cert.cert);
    expect((await runCli([...planArgs(s), '--ca-file', ca, '--log-format', 'json'], { env: envFor(s) })).code).toBe(10);
  }, 60_000);
});
