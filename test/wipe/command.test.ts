// `--wipe command`: a real program per machine, no shell, a clean environment, killed at the timeout,
// and no secret in the log or the result.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWipeStrategy, runWipes, type MachineFacts, type WipeOptions } from '../../src/wipe/index.js';
import { captureLog } from '../helpers/wipe-log.js';

const PASSWORD = 'bmc-Pa55w0rd-xyz';
const KEY = 'c2VydmljZS1hY2NvdW50LWtleS1jYW5hcnk=';
const CANARY = 'parent-env-canary-value';
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'wipe-command-'));
  process.env.STUB_TEST_CANARY = CANARY;
  process.env.OMNI_SERVICE_ACCOUNT_KEY = KEY;
});
afterAll(() => {
  delete process.env.STUB_TEST_CANARY;
  delete process.env.OMNI_SERVICE_ACCOUNT_KEY;
});

/** Writes a node script and returns a --wipe-command that runs it with the given (quoted) args. */
function script(name: string, body: string, args = ''): string {
  const file = join(dir, name);
  writeFileSync(file, body);
  return `"${process.execPath}" "${file}" ${args}`;
}

/** A killed process may linger as a zombie until init reaps it: that counts as dead. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/**
 * Whether the process is still alive after up to `ms`: a process SIGKILLed with its group closes its
 * pipes early in its exit, before it shows as a zombie, so right after the pipes closed it may still
 * show as running for a moment on a loaded machine.
 */
async function aliveAfter(pid: number, ms = 2000): Promise<boolean> {
  const until = Date.now() + ms;
  for (let i = 0; i < 200 && alive(pid); i++) {
    if (Date.now() >= until) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return alive(pid);
}

const machine: MachineFacts = {
  machineId: 'a1b2c3d4-0000-4000-8000-000000000001',
  providerId: 'bare-metal',
  bmc: { address: '10.0.0.7', port: 623, username: 'ADMIN', password: PASSWORD },
};

async function run(command: string, m: MachineFacts = machine, extra: Partial<WipeOptions> = {}) {
  const log = captureLog();
  const opts: WipeOptions = {
    strategy: 'command',
    command,
    timeoutMs: 10_000,
    requireWipe: false,
    concurrency: 1,
    ...extra,
  };
  const strategy = createWipeStrategy(opts, { logger: log.logger, killGraceMs: 300 });
  const [r] = await runWipes(strategy, [m], { concurrency: 1, timeoutMs: opts.timeoutMs });
  return { r: r!, log };
}

describe('command wipe', () => {
  it('passes exactly PATH and the machine facts, nothing else of the parent environment', async () => {
    const out = join(dir, 'env.json');
    const { r } = await run(
      script(
        'env.mjs',
        `import { writeFileSync } from 'node:fs'; writeFileSync(process.argv[2], JSON.stringify(process.env));`,
        `"${out}"`,
      ),
    );
    expect(r).toMatchObject({ strategy: 'command', outcome: 'succeeded' });
    const env = JSON.parse(readFileSync(out, 'utf8')) as Record<string, string>;
    expect(env).toEqual({
      PATH: process.env.PATH,
      STUB_MACHINE_ID: machine.machineId,
      STUB_PROVIDER_ID: 'bare-metal',
      STUB_BMC_ADDRESS: '10.0.0.7',
      STUB_BMC_PORT: '623',
      STUB_BMC_USERNAME: 'ADMIN',
      STUB_BMC_PASSWORD: PASSWORD,
    });
    expect(JSON.stringify(env)).not.toContain(CANARY);
    expect(JSON.stringify(env)).not.toContain(KEY);
  });

  it('leaves out the BMC variables that are not known', async () => {
    const out = join(dir, 'env-nobmc.json');
    const { r } = await run(
      script(
        'env2.mjs',
        `import { writeFileSync } from 'node:fs'; writeFileSync(process.argv[2], JSON.stringify(process.env));`,
        `"${out}"`,
      ),
      {
        machineId: 'm-2',
        providerId: 'p',
      },
    );
    expect(r.outcome).toBe('succeeded');
    expect(Object.keys(JSON.parse(readFileSync(out, 'utf8')) as object).sort()).toEqual([
      'PATH',
      'STUB_MACHINE_ID',
      'STUB_PROVIDER_ID',
    ]);
  });

  it('runs without a shell: quotes group words, and shell syntax reaches the program as plain text', async () => {
    const out = join(dir, 'argv.json');
    const { r } = await run(
      script(
        'argv.mjs',
        `import { writeFileSync } from 'node:fs'; writeFileSync(process.argv[2], ` +
          `JSON.stringify(process.argv.slice(3)));`,
        `"${out}" "a b" '$HOME' ';' 'x|y' \\$(id) *`,
      ),
    );
    expect(r.outcome).toBe('succeeded');
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(['a b', '$HOME', ';', 'x|y', '$(id)', '*']);
  });

  it('logs its output with the password scrubbed, and keeps secrets out of the result', async () => {
    const { r, log } = await run(
      script(
        'chatty.mjs',
        `console.log('powering off ' + process.env.STUB_BMC_ADDRESS + ' as ' + process.env.STUB_BMC_USERNAME +
           ' with ' + process.env.STUB_BMC_PASSWORD);
         console.error('warning: password=' + process.env.STUB_BMC_PASSWORD);
         process.exit(3);`,
      ),
    );
    expect(r.outcome).toBe('failed');
    expect(r.reason).toBe('wipe command exited with code 3: warning: password=[redacted]');
    const lines = log.records().filter((l) => l.stream !== undefined);
    expect(lines.map((l) => [l.stream, l.msg])).toEqual([
      ['stdout', 'powering off 10.0.0.7 as ADMIN with [redacted]'],
      ['stderr', 'warning: password=[redacted]'],
    ]);
    expect(lines.every((l) => l.machineId === machine.machineId)).toBe(true);
    expect(log.text()).not.toContain(PASSWORD);
    expect(log.text()).not.toContain(KEY);
    expect(JSON.stringify(r)).not.toContain(PASSWORD);
  });

  it('is killed at the timeout, SIGKILL when it ignores SIGTERM, with everything it started', async () => {
    const pids = join(dir, 'pids');
    const started = Date.now();
    const { r } = await run(
      script(
        'stubborn.mjs',
        `import { spawn } from 'node:child_process'; import { writeFileSync } from 'node:fs';
         process.on('SIGTERM', () => {});
         const child = spawn(process.execPath, ['-e', 'process.on("SIGTERM", () => {}); setInterval(() => {}, 1000)'], {
           stdio: 'inherit',
         });
         writeFileSync(process.argv[2], JSON.stringify([process.pid, child.pid]));
         setInterval(() => {}, 1000);`,
        `"${pids}"`,
      ),
      machine,
      { timeoutMs: 6000 },
    );
    expect(r).toMatchObject({ outcome: 'failed', reason: 'wipe command timed out; killed (SIGKILL)' });
    expect(Date.now() - started).toBeLessThan(15_000);
    const [parent, grandchild] = JSON.parse(readFileSync(pids, 'utf8')) as number[];
    expect(await aliveAfter(parent!)).toBe(false);
    expect(await aliveAfter(grandchild!)).toBe(false);
  });

  it('reports a program that does not exist', async () => {
    const { r } = await run('/nonexistent/wipe-it --now');
    expect(r).toMatchObject({
      outcome: 'failed',
      reason: 'wipe command not found: /nonexistent/wipe-it (give a path, or a program on PATH)',
    });
  });
});
