// The binary's entry (src/main.ts, src/start.ts, src/early-signal.ts): a Node too old for the
// dependencies gets a sentence and exit 2; SIGINT or SIGTERM while the CLI is still loading ends with
// a result (stage `starting`) on stdout and in --report; a command that stops with nothing left to
// wait for is an internal error, never exit 0 without a result.

import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { cleanEnv, errorLine, MAIN, requireBuiltCli, scratchDirEachTest } from '../helpers/cli-process.js';
import { startTamperProxy } from '../helpers/tamper-proxy.js';
import type { TamperProxy } from '../helpers/tamper-proxy.js';

requireBuiltCli();
const dir = scratchDirEachTest('entry-');
const closing: (Sim | TamperProxy)[] = [];
afterEach(async () => {
  for (const c of closing.splice(0)) await c.close();
});

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * `node [--import hook] main.js args`; `onFd3` gets what the hook writes to fd 3 (a pipe), and may
 * signal the child. Killed after 60 s.
 */
function node(
  args: string[],
  o: {
    hook?: string;
    onFd3?: (text: string, kill: (s: NodeJS.Signals) => void) => void;
    env?: NodeJS.ProcessEnv;
    started?: (kill: (s: NodeJS.Signals) => void) => void;
  } = {},
): Promise<Ran> {
  const child = spawn(process.execPath, [...(o.hook ? ['--import', o.hook] : []), MAIN, ...args], {
    env: cleanEnv(o.env),
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
  });
  child.stdin!.end();
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const fd3 = child.stdio[3] as NodeJS.ReadableStream;
  fd3.setEncoding('utf8');
  fd3.on('data', (d: string) => o.onFd3?.(d, (s) => child.kill(s)));
  o.started?.((s) => child.kill(s));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function hook(name: string, text: string): string {
  const file = join(dir(), name);
  writeFileSync(file, text);
  return file;
}

describe('the entry', () => {
  it('on a Node older than 20.19: one sentence and exit 2, before any dependency loads', async () => {
    const old = hook('old-node.mjs', "Object.defineProperty(process.versions, 'node', { value: '18.20.4' });\n");
    const r = await node(['--version'], { hook: old });
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe('stub-provider needs Node.js 20.19 or later (this is 18.20.4)\n');
    expect(await node(['--version'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it('main.js imports nothing but early-signal.js before the version check (the rest with import())', () => {
    const text = readFileSync(MAIN, 'utf8');
    const imports = [...text.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    expect(imports).toEqual(['./early-signal.js']);
  });

  // The hook says on fd 3 when main.ts listens for SIGTERM: the signal is sent while the CLI loads.
  const listening = () =>
    hook(
      'listening.mjs',
      "import { writeSync } from 'node:fs';\n" +
        "process.on('newListener', (ev) => { if (ev === 'SIGTERM') writeSync(3, 'listening\\n'); });\n",
    );

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    '%s while the CLI loads: exit %i, the result on stdout and in --report, stage starting',
    async (sig, code) => {
      const report = join(dir(), 'report.json');
      let sent = false;
      const r = await node(
        ['--id', 'bm', '--yes', '--omni-api-endpoint', 'http://127.0.0.1:9', '--output', 'json', '--report', report],
        {
          hook: listening(),
          onFd3: (_text, kill) => {
            if (!sent) kill(sig);
            sent = true;
          },
        },
      );
      expect(sent).toBe(true);
      expect(r.code, r.stderr).toBe(code);
      const expected = {
        tool: 'stub-provider',
        command: 'run',
        providerId: 'bm',
        result: 'interrupted',
        exitCode: code,
        stage: 'starting',
        error: { code: 'STUB_INTERRUPTED' },
      };
      expect(JSON.parse(r.stdout)).toMatchObject(expected);
      expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject(expected);
      expect(errorLine(r.stderr)).toContain(`interrupted (${sig}) [STUB_INTERRUPTED]`);
    },
  );

  it('a signal while a command without a handler of its own loads (--help): exit 143, not 0', async () => {
    let sent = false;
    const r = await node(['--help'], {
      hook: listening(),
      onFd3: (_text, kill) => {
        if (!sent) kill('SIGTERM');
        sent = true;
      },
    });
    expect(r.code).toBe(143);
  });

  it('a command that stops with nothing left to wait for: exit 1 and a line, never 0 without a result', async () => {
    // cli.js replaced by a main() whose promise never settles, and nothing else keeps the loop alive.
    const stuck = hook(
      'stuck.mjs',
      "import { register } from 'node:module';\n" +
        `register(${JSON.stringify(
          'data:text/javascript,' +
            encodeURIComponent(
              'export async function resolve(s, c, next) {' +
                " if (s === './cli.js') return { url: 'data:text/javascript,' + encodeURIComponent(" +
                "'export function main() { return new Promise(() => {}); }'), shortCircuit: true };" +
                ' return next(s, c); }',
            ),
        )});\n`,
    );
    const r = await node(['--version'], { hook: stuck });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('internal error: the command stopped with nothing left to wait for');
  });
});

describe('a result on every exit', () => {
  it('SIGTERM while the first Watch opens: exit 143, a result at stage reading (not exit 0, nothing)', async () => {
    const sim = await createSim(generateScenario({ providerId: 'bm', machines: 2, omniVersion: '1.9.3' }));
    closing.push(sim);
    let kill: ((s: NodeJS.Signals) => void) | undefined;
    let watches = 0;
    // The first Watch gets no answer (the watch is not established yet) and the signal goes then.
    const proxy = await startTamperProxy(sim.endpoint, (r) => {
      if (r.rpc !== 'Watch' || watches++ > 0) return undefined;
      kill?.('SIGTERM');
      return { kind: 'respond', write: () => undefined };
    });
    closing.push(proxy);
    const report = join(dir(), 'report.json');
    const r = await node(
      ['--id', 'bm', '--yes', '--omni-api-endpoint', proxy.endpoint, '--output', 'json', '--report', report],
      { env: { OMNI_SERVICE_ACCOUNT_KEY: sim.keys['infra-provider:bm'] }, started: (k) => (kill = k) },
    );
    expect(watches).toBeGreaterThan(0);
    expect(r.code, r.stderr).toBe(143);
    const expected = { result: 'interrupted', exitCode: 143, stage: 'reading' };
    expect(JSON.parse(r.stdout)).toMatchObject(expected);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject(expected);
  });
});
