// `stub-provider demo` as a user runs it from a clean clone: the built CLI (`npm test` builds first),
// finished well within a minute, exit 0, and output that shows the release and the deregistration.
// Its usage errors, through main() in this process: test/commands/demo/demo.test.ts.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { MAIN, requireBuiltCli } from '../helpers/cli-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const STUCK = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';
const RUNNING = '7c3e1b22-5d6f-4a8b-9c0d-223344556677';

const children: ChildProcessWithoutNullStreams[] = [];
requireBuiltCli();
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function demo(args: string[], limitMs = 60_000): Promise<Ran> {
  const started = Date.now();
  const child = spawn(process.execPath, [MAIN, 'demo', ...args], { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' } });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`demo did not finish within ${limitMs} ms; stdout so far:\n${stdout}\nstderr:\n${stderr}`));
    }, limitMs);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

interface Step {
  step: number;
  title: string;
  command?: string;
  report?: {
    command: string;
    providerId: string;
    released: { id: string }[];
    refused: { id: string; result: string }[];
    running: { id: string }[];
    deregistration: { status: string; lastStep?: string };
    exitCode: number;
  };
}
interface DemoJson {
  omniVersion: string;
  ok: boolean;
  checks: Record<string, boolean>;
  steps: Step[];
  lastSteps: string[];
  warnings: string[];
}

const runs = (r: DemoJson, id: string) =>
  r.steps.filter((s) => s.report?.command === 'run' && s.report.providerId === id).map((s) => s.report!);

describe('stub-provider demo', () => {
  it('narrates the release of the stuck machine and the deregistration, exit 0, well under a minute', async () => {
    const r = await demo([]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.ms).toBeLessThan(60_000);
    const out = r.stdout;
    expect(out).toMatch(/Omni 1\.3\.4/);
    expect(out).toContain('$ stub-provider plan --id bare-metal');
    expect(out).toMatch(new RegExp(`Released \\(1\\):\\n\\s+- InfraMachine ${STUCK}`));
    expect(out).toMatch(new RegExp(`Still running \\(untouched\\) \\(1\\):\\n\\s+- InfraMachine ${RUNNING}`));
    expect(out).toMatch(/Refused \(1\):\n\s+- MachineRequest talos-extra-p4q8rz/);
    expect(out).toMatch(
      /Deregistration: deregistered\n\s+Last step, for an admin: omnictl infraprovider delete bare-metal/,
    );
    expect(out).toContain('$ omnictl infraprovider delete kubevirt');
    expect(out).not.toMatch(/✘/);
    expect(out).toContain('every check passed');
    // The keys the sim generated stay out of the narration and the logs.
    expect(out + r.stderr).not.toMatch(/PRIVATE KEY|OMNI_SERVICE_ACCOUNT_KEY=[A-Za-z0-9+/]{20}/);
  }, 70_000);

  it('--output json on Omni 1.4 behaviour: the facts, checked against the reports of the real runs', async () => {
    const r = await demo(['--omni-version', '1.4.2', '--output', 'json', '--log-level', 'silent']);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout) as DemoJson;
    expect(j.omniVersion).toBe('1.4.2');
    expect(j.ok).toBe(true);
    expect(Object.values(j.checks).every(Boolean)).toBe(true);
    expect(j.checks).toMatchObject({
      stuckReleased: true,
      runningUntouched: true,
      newRequestRefused: true,
      'bare-metal:deregistered': true,
      'kubevirt:deregistered': true,
      planWroteNothing: true,
    });

    const plan = j.steps.find((s) => s.report?.command === 'plan')!.report!;
    expect(plan.released).toEqual([]);

    const [bm1, bm2] = runs(j, 'bare-metal');
    expect(bm1!.released.map((x) => x.id)).toEqual([STUCK]);
    expect(bm1!.running.map((x) => x.id)).toEqual([RUNNING]);
    expect(bm1!.deregistration.status).not.toBe('deregistered');
    expect(bm2!.released.map((x) => x.id)).toEqual([RUNNING]);
    expect(bm2!.deregistration).toMatchObject({
      status: 'deregistered',
      lastStep: 'omnictl infraprovider delete bare-metal',
    });

    const [kv1, kv2] = runs(j, 'kubevirt');
    expect(kv1!.released.map((x) => x.id)).toEqual(['talos-workers-x7k2pq']);
    expect(kv1!.refused).toEqual([expect.objectContaining({ id: 'talos-extra-p4q8rz', result: 'refused' })]);
    expect(kv2!.deregistration.status).toBe('deregistered');
    expect([...runs(j, 'bare-metal'), ...runs(j, 'kubevirt')].every((x) => x.exitCode === 0)).toBe(true);

    expect(j.lastSteps).toEqual(['omnictl infraprovider delete bare-metal', 'omnictl infraprovider delete kubevirt']);
    // 1.4+: deleting a provider also tears down user-owned MachineRequestSets of every provider.
    expect(j.warnings.join(' ')).toMatch(/MachineRequestSet/);
  }, 70_000);
});
