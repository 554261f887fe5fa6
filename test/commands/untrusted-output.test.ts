// Untrusted text is inert (docs/design.md rule 13): what Omni chose (a resource ID, an error message) is shown with
// its control characters escaped wherever a person reads it: the text report, pretty logs, the
// progress line, the confirmation prompt and the error line of the CLI. JSON outputs stay JSON.
// Reproduction: an ID and an Omni message holding ESC, CR and LF used to clear the screen and forge
// lines such as "Deregistration: deregistered" or "stub-provider: done, nothing to do [OK]".

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { emitResult } from '../../src/commands/run-io.js';
import { T } from '../../src/omni-api/resource.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { fakeTty, providerIdentity, runIn, testIo } from '../helpers/cli-config.js';
import { startTamperProxy, type TamperProxy } from '../helpers/tamper-proxy.js';
import { escapeControl } from '../../src/omni-api/untrusted.js';

const ID = 'kubevirt';
const MAIN = join(process.cwd(), 'dist/src/main.js');
/** Clears the screen, homes the cursor, retitles the window, then forges two lines of our own output. */
const FORGE =
  '\x1b[2J\x1b[H\x1b]0;owned\x07\r\nDeregistration: deregistered\r\nstub-provider: done, nothing to do ' +
  '[OK]\u202e\u009b';
const HOSTILE_ID = `req-x${FORGE}`;
/** pino-pretty's colours and the progress line's own erase: the only escape sequences we write. */
const OURS = /\x1b\[[0-9;]*m|\r\x1b\[2K/g; // eslint-disable-line no-control-regex
/** What must not reach a terminal from untrusted text (LF is ours to write; it is checked by line). */
const RAW = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/; // eslint-disable-line no-control-regex
const FORGED_LINE = /^\s*(Deregistration: deregistered|stub-provider: done, nothing to do)/;

let sim: Sim | undefined;
let proxy: TamperProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await sim?.close();
  proxy = undefined;
  sim = undefined;
});

beforeAll(() => {
  expect(existsSync(MAIN), 'run `npm run build` first').toBe(true);
});

/**
 * A request being deleted whose ID forges lines, and a machine whose finalizer removal Omni refuses with a message that
 * does.
 */
async function hostileOmni(): Promise<{ sim: Sim; proxy: TamperProxy }> {
  sim = await createSim({
    omniVersion: '1.3.4',
    identities: [providerIdentity(ID)],
    resources: [
      ...providerRegistration(ID),
      ...provisionedRequest(ID, HOSTILE_ID),
      ...provisionedRequest(ID, 'req-ok'),
      ...bareMetalMachine(ID, machineUuid(0)),
    ],
    faults: {},
  });
  proxy = await startTamperProxy(sim.endpoint, (r) => {
    const target = (r.body as { new_resource?: { metadata?: { type?: string } } } | undefined)?.new_resource?.metadata
      ?.type;
    if (r.rpc !== 'Update' || target !== T.InfraMachine) return undefined;
    return {
      kind: 'respond',
      write: (res) => {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 7, message: `refused${FORGE}` }));
      },
    };
  });
  return { sim, proxy };
}

/** This file's runs: four calls at a time, as a person would not run them (the text shown is what counts). */
const FLAGS = ['--concurrency', '4'];

/** Asserts that terminal bytes hold no raw control character of untrusted text and no forged line. */
function expectInert(bytes: string, what: string): void {
  const text = bytes.replace(OURS, '');
  expect(RAW.exec(text), `${what}: a raw control character`).toBeNull();
  expect(
    text.split('\n').filter((l) => FORGED_LINE.test(l)),
    `${what}: a forged line`,
  ).toEqual([]);
}

describe('untrusted text from Omni is inert on a terminal', () => {
  it('text report, pretty logs and progress line escape a hostile ID and a hostile Omni error message', async () => {
    const { sim: s, proxy: p } = await hostileOmni();
    const stderr = fakeTty(200);
    const stdout = fakeTty(200);
    // At debug, the per-write and per-item log lines too (on a terminal they are debug: docs/design.md, "Output").
    const rep = await runIn(s, ID, [...FLAGS, '--output', 'text', '--log-level', 'debug'], {
      endpoint: p.endpoint,
      stderr,
      stdout,
    });
    await emitResult(rep, 'text', testIo({}, { stdout }));
    // The hostile request was worked on and the refused Update reported, so both texts were shown.
    expect(JSON.stringify(rep)).toContain(JSON.stringify(HOSTILE_ID).slice(1, -1));
    // Omni's message reaches the report as the client words its error: already escaped (design rule 13).
    expect(rep.failed.map((f) => f.reason).join('\n')).toContain(`refused${escapeControl(FORGE)}`);
    expectInert(stdout.text(), 'text report');
    expectInert(stderr.text(), 'pretty logs and progress');
    // Escaped, not dropped: the operator still sees what Omni sent.
    expect(stdout.text()).toContain('req-x\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\r\\nDeregistration: deregistered');
    expect(stderr.text()).toMatch(/refused\\+x1b\[2J/);
    // The machine lines above the progress line show the hostile ID escaped, on one line each.
    expect(stderr.text()).toContain(
      'released MachineRequest req-x\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\r\\nDeregistration: deregistered',
    );
  });

  it('the confirmation prompt shows the plan escaped', async () => {
    const { sim: s } = await hostileOmni();
    const stderr = fakeTty(200);
    let asked = 0;
    const rep = await runIn(s, ID, [...FLAGS, '--output', 'text', '--no-yes', '--log-level', 'silent'], {
      stderr,
      ask: async () => {
        asked++;
        return false;
      },
    });
    expect(asked).toBe(1);
    expect(rep.result).toBe('declined');
    expect(stderr.text()).toContain('req-x\\x1b[2J');
    expectInert(stderr.text(), 'prompt');
  });

  it('--output json stays JSON with the real values, C1 and bidi controls written as \\uXXXX', async () => {
    const { sim: s, proxy: p } = await hostileOmni();
    const stdout = fakeTty(200);
    const rep = await runIn(s, ID, [...FLAGS, '--output', 'json', '--log-level', 'silent'], {
      endpoint: p.endpoint,
      stdout,
    });
    await emitResult(rep, 'json', testIo({}, { stdout }));
    expect(stdout.text()).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/); // eslint-disable-line no-control-regex
    expect(JSON.parse(stdout.text())).toEqual(JSON.parse(JSON.stringify(rep)));
  });

  it("the CLI's error line on stderr: one line, escaped (an Omni error that ends the run)", async () => {
    sim = await createSim({
      omniVersion: '1.3.4',
      identities: [providerIdentity(ID)],
      resources: [...providerRegistration(ID)],
      faults: {},
    });
    proxy = await startTamperProxy(sim.endpoint, () => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 13, message: `broken${FORGE}` }));
      },
    }));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      OMNI_SERVICE_ACCOUNT_KEY: sim.keys[`infra-provider:${ID}`]!,
      NO_COLOR: '1',
    };
    for (const k of Object.keys(env)) if (/^(OMNI_ENDPOINT|STUB_PROVIDER_)/.test(k)) delete env[k];
    const child = spawn(
      process.execPath,
      // Pretty logs: the error is a line of text (with JSON logs it is a JSON record, inert as every log line).
      [
        MAIN,
        '--id',
        ID,
        '--omni-api-endpoint',
        proxy.endpoint,
        '--yes',
        '--log-level',
        'silent',
        '--log-format',
        'pretty',
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.stdout.resume();
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, err).toBe(1);
    expect(err).toContain('broken\\x1b[2J');
    expect(err.trimEnd().split('\n')).toHaveLength(1);
    expectInert(err, 'CLI error line');
  }, 30_000);
});
