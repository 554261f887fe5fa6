// Every exit of `run` and `plan` through the CLI's main() in this process, against simulated Omnis in
// it (0, 2 after parsing, 3, 4, 5, and plan's 10) has its result, with the error's stable code and
// message, on stdout with --output json (and yaml) and in the --report file; and plan's exit code
// predicts run's: 0 nothing to do, 10 changes pending, 3 where run is refused, 4 where its key is.
// TLS failures name --ca-file and --insecure-skip-tls-verify (the sim's --tls). The exits by signal
// (130, 143) and a wait without limit: test/e2e/cli-exits.test.ts.

import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { generateScenario } from '../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../src/omni-sim/index.js';
import { generateSelfSignedCert } from '../src/omni-sim/gateway/tls.js';
import { scratchDirEachTest } from './helpers/cli-process.js';
import type { SimOpts } from './helpers/cli-results.js';
import {
  envFor,
  expectResult,
  ID,
  outcomeOf,
  planArgs,
  resultFlags,
  runArgs,
  simWith as simIn,
  untimed,
} from './helpers/cli-results.js';
import { runMain } from './helpers/in-process-cli.js';

const sims: Sim[] = [];
const dir = scratchDirEachTest('cli-exits-');
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

const simWith = (o: SimOpts = {}) => simIn(sims, o);

/** Runs the CLI with `--output json --report FILE` and reads both results. */
async function withResults(args: string[], env: NodeJS.ProcessEnv) {
  const file = join(dir(), `report-${Math.random().toString(36).slice(2)}.json`);
  const r = await runMain([...args, ...resultFlags(file)], { env });
  return outcomeOf(r, await readFile(file, 'utf8'), file);
}

/** A loopback port that nothing listens on (one the OS just gave and took back). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
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

  it('--report alone: the file gets the failed result, stdout empty; --output yaml is the same result', async () => {
    const s = await simWith({ registered: false });
    const file = join(dir(), 'r.json');
    const r = await runMain([...runArgs(s), '--report', file, '--log-format', 'json'], { env: envFor(s) });
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
      result: 'failed',
      exitCode: 3,
      error: { code: 'STUB_NOT_REGISTERED' },
    });
    const y = await runMain([...runArgs(s), '-o', 'yaml', '--log-format', 'json'], { env: envFor(s) });
    expect(y.code).toBe(3);
    expect(untimed(parseYaml(y.stdout))).toEqual(untimed(JSON.parse(await readFile(file, 'utf8'))));
  }, 60_000);

  it('a report file that cannot be opened: exit 2, the result on stdout only', async () => {
    const s = await simWith();
    const r = await runMain([...runArgs(s), '--output', 'json', '--report', join(dir(), 'missing', 'r.json')], {
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
    const yaml = await runMain([...planArgs(s), '-o', 'yaml', '--log-format', 'json'], { env: envFor(s) });
    expect(yaml.code).toBe(10);
    expect(untimed(parseYaml(yaml.stdout))).toEqual(untimed(pending.stdout));
    expect((await runMain(runArgs(s, ['--log-format', 'json']), { env: envFor(s) })).code).toBe(0);
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
    expect((await runMain([...planArgs(s), '--ca-file', ca, '--log-format', 'json'], { env: envFor(s) })).code).toBe(
      10,
    );
  }, 60_000);
});
