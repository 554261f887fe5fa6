// Shared by pack.test.ts and hostile-answers-cli.test.ts: run a process with a hard time
// limit and capture its output, and copy the package's sources into a scratch folder.

import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Killed (SIGKILL) after this many ms; the result then has signal SIGKILL. */
  timeoutMs: number;
}

/** Runs `cmd args` without a shell and resolves with its exit status and output; never rejects on a non-zero exit. */
export function run(cmd: string, args: string[], opts: RunOptions): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Like run(), but throws with the captured output when the process does not exit 0. */
export async function runOk(cmd: string, args: string[], opts: RunOptions): Promise<Ran> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} (in ${opts.cwd}) exited ${r.code ?? r.signal}\n--- ` +
        `stdout\n${r.stdout.slice(-4000)}\n--- stderr\n${r.stderr.slice(-4000)}`,
    );
  }
  return r;
}

export function scratchDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `stub-provider-${prefix}-`));
}

/** What a build needs from the repository, never node_modules/ or dist/ (they are made from these). */
export const SOURCE_ENTRIES = [
  'package.json',
  'package-lock.json',
  'README.md',
  'LICENSE',
  'docs',
  'src',
  'scripts',
  'scenarios',
  'tsconfig.json',
  'tsconfig.build.json',
];

export function copySources(into: string): void {
  for (const e of SOURCE_ENTRIES) {
    const from = path.join(REPO, e);
    if (existsSync(from)) cpSync(from, path.join(into, e), { recursive: true });
  }
}

export function packageVersion(): string {
  return (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The environment for npm in tests: the user's cache, preferring it over the registry, quiet. The
 * npm_* variables of an outer `npm test` are dropped: a nested npm would take the outer project's
 * prefix and config from them.
 */
export function npmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));
  return {
    ...base,
    npm_config_prefer_offline: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    npm_config_loglevel: 'error',
    ...extra,
  };
}

export interface SimRun {
  /** The run's exit code and output. */
  run: Ran;
  /** The sim's final state, dumped on SIGTERM (scenario YAML). */
  dump: string;
}

/**
 * Starts `<cli> sim --scenario <file>` from an installed or built copy, runs `<cli> --id <id> --yes
 * --output json` against it with the key the sim generated, stops the sim with SIGTERM and returns the
 * run and the dumped state. `cli` is the command prefix, e.g. ['node', '/x/dist/src/main.js'].
 */
export async function runAgainstSim(
  cli: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; scenario: string; id: string; scratch: string; extraArgs?: string[] },
): Promise<SimRun> {
  const [cmd, ...pre] = cli;
  const dumpFile = path.join(opts.scratch, `dump-${Date.now()}.yaml`);
  const sim = spawn(cmd!, [...pre, 'sim', '--scenario', opts.scenario, '--dump', dumpFile], {
    cwd: opts.cwd,
    env: opts.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let simErr = '';
  sim.stderr.setEncoding('utf8').on('data', (d: string) => (simErr += d));
  const exited = new Promise<number | null>((resolve) => sim.on('close', (code) => resolve(code)));
  try {
    const ready = await new Promise<{ endpoint: string; keys: Record<string, string> }>((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`sim not ready within 30 s\n${simErr}`)), 30_000);
      sim.stdout.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        const nl = buf.indexOf('\n');
        if (nl < 0) return;
        clearTimeout(timer);
        try {
          resolve(JSON.parse(buf.slice(0, nl)) as { endpoint: string; keys: Record<string, string> });
        } catch (e) {
          reject(e as Error);
        }
      });
      void exited.then((code) => reject(new Error(`sim exited ${code} before it was ready\n${simErr}`)));
    });
    const key = ready.keys[`infra-provider:${opts.id}`];
    if (!key) throw new Error(`the sim generated no key for infra-provider:${opts.id}`);
    const r = await run(cmd!, [...pre, '--id', opts.id, '--yes', '--output', 'json', ...(opts.extraArgs ?? [])], {
      cwd: opts.cwd,
      env: { ...opts.env, OMNI_ENDPOINT: ready.endpoint, OMNI_SERVICE_ACCOUNT_KEY: key },
      timeoutMs: 60_000,
    });
    sim.kill('SIGTERM');
    const simCode = await exited;
    if (simCode !== 0) throw new Error(`sim exited ${simCode} on SIGTERM\n${simErr}`);
    return { run: r, dump: readFileSync(dumpFile, 'utf8') };
  } finally {
    if (sim.exitCode === null && sim.signalCode === null) sim.kill('SIGKILL');
  }
}

/** The resource types left in a sim dump, one entry per resource. */
export function typesInDump(dump: string): string[] {
  const doc = parseYaml(dump) as { resources?: { metadata: { type: string } }[] };
  return (doc.resources ?? []).map((r) => r.metadata.type);
}

/**
 * What a user notices after a whole-provider run against scenarios/bare-metal-stuck.yaml: exit 0, a
 * JSON report, the stuck InfraMachine gone with everything of the provider, its registration kept.
 */
export function expectBareMetalReleased(
  r: SimRun,
  expect: (v: unknown, msg?: string) => { toBe(v: unknown): void; toEqual(v: unknown): void },
): void {
  expect(r.run.code, `run exited ${r.run.code}\n${r.run.stderr.slice(-3000)}`).toBe(0);
  expect(typeof JSON.parse(r.run.stdout)).toBe('object');
  const left = typesInDump(r.dump);
  expect(
    left.filter(
      (t) =>
        t === 'InfraMachines.omni.sidero.dev' ||
        t === 'InfraMachineStatuses.omni.sidero.dev' ||
        t.endsWith('.bare-metal.infraprovider.sidero.dev'),
    ),
  ).toEqual([]);
  expect(left.includes('InfraProviders.omni.sidero.dev')).toBe(true);
}
