// The npm package as an operator gets it: packed from the sources in a scratch copy without dist/
// (npm pack builds first: prepack), installed from the tarball alone into an empty folder, and run
// with `npx stub-provider`: --help, demo, sim with a shipped example by name, and every command of
// README.md and docs/operator-guide.md (doc-commands.ts) against simulated Omnis.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docCalls, docScript, omnictlFixture, problemOf, shellBlocks, writeFixture } from './doc-commands.js';
import {
  copySources,
  expectBareMetalReleased,
  npmEnv,
  packageVersion,
  REPO,
  run,
  runAgainstSim,
  runOk,
  scratchDir,
} from './packaging-helpers.js';

const MINUTE = 60_000;
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare', 'preprepare', 'postprepare'];

interface Manifest {
  name: string;
  version: string;
  bin?: Record<string, string>;
  engines?: { node?: string };
  license?: string;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

let work: string;
let tarball: string;
let consumer: string;
let installed: string;

function npx(args: string[]) {
  // --yes=false: use the installed bin, never fetch a package of that name from the registry
  // (npx's bare `--no` would swallow the next word as its value).
  return run('npx', ['--yes=false', 'stub-provider', ...args], { cwd: consumer, env: npmEnv(), timeoutMs: MINUTE });
}

beforeAll(async () => {
  work = scratchDir('pack');
  const src = path.join(work, 'src-copy');
  mkdirSync(src);
  copySources(src);
  // tsc and its types come from the repository; the package itself must not need them.
  symlinkSync(path.join(REPO, 'node_modules'), path.join(src, 'node_modules'), 'dir');
  // As from a fresh clone: no dist/ until npm pack builds it (prepack).
  expect(existsSync(path.join(src, 'dist'))).toBe(false);
  const out = path.join(work, 'out');
  mkdirSync(out);
  const packed = await runOk('npm', ['pack', '--pack-destination', out], {
    cwd: src,
    env: npmEnv(),
    timeoutMs: 3 * MINUTE,
  });
  tarball = path.join(out, packed.stdout.trim().split('\n').at(-1) ?? '');
  consumer = path.join(work, 'consumer');
  mkdirSync(consumer);
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true }));
  await runOk('npm', ['install', tarball], { cwd: consumer, env: npmEnv(), timeoutMs: 2 * MINUTE });
  installed = path.join(consumer, 'node_modules', 'stub-provider');
}, 5 * MINUTE);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('npm package', () => {
  it('packs into a tarball with the version of package.json', () => {
    expect(path.basename(tarball)).toBe(`stub-provider-${packageVersion()}.tgz`);
    expect(existsSync(tarball)).toBe(true);
  });

  it('ships compiled JavaScript with a shebang, and no TypeScript sources, tests or source maps', () => {
    const main = readFileSync(path.join(installed, 'dist/src/main.js'), 'utf8');
    expect(main.startsWith('#!/usr/bin/env node\n')).toBe(true);
    const files = listFiles(installed);
    expect(files).toContain('dist/src/cli.js');
    // The examples the README and the guide name, by name.
    expect(files).toEqual(
      expect.arrayContaining([
        'scenarios/bare-metal-stuck.yaml',
        'scenarios/machine-request-stuck.yaml',
        'scenarios/walkthroughs.yaml',
        'scenarios/bare-metal-stuck.omnictl.yaml',
      ]),
    );
    expect(files.filter((f) => f.endsWith('.ts') || f.endsWith('.map'))).toEqual([]);
    expect(files.filter((f) => /^(test|src|bench|scripts)\//.test(f))).toEqual([]);
  });

  it('is under an OSI licence: Apache-2.0 in package.json, its full text in LICENSE', () => {
    const pkg = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as Manifest;
    expect(pkg.license).toBe('Apache-2.0');
    const text = readFileSync(path.join(installed, 'LICENSE'), 'utf8');
    expect(text).toContain('Apache License');
    expect(text).toContain('Version 2.0, January 2004');
    expect(text).toContain('END OF TERMS AND CONDITIONS');
  });

  it('declares a bin, Node >= 20.19, and no install scripts', () => {
    const pkg = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as Manifest;
    expect(pkg.bin).toEqual({ 'stub-provider': 'dist/src/main.js' });
    expect(pkg.engines?.node).toBe('>=20.19');
    const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
    expect(major > 20 || (major === 20 && minor >= 19)).toBe(true);
    expect(Object.keys(pkg.scripts ?? {}).filter((s) => INSTALL_SCRIPTS.includes(s))).toEqual([]);
  });

  it('installs only runtime dependencies', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as Manifest;
    const top = readdirSync(path.join(consumer, 'node_modules'));
    for (const dep of Object.keys(pkg.dependencies ?? {})) {
      expect(existsSync(path.join(consumer, 'node_modules', dep)), `runtime dependency ${dep}`).toBe(true);
    }
    for (const dev of Object.keys(pkg.devDependencies ?? {})) {
      expect(existsSync(path.join(consumer, 'node_modules', dev)), `dev dependency ${dev} must not be installed`).toBe(
        false,
      );
    }
    expect(top).not.toContain('typescript');
  });

  it('runs `npx stub-provider --help`', async () => {
    const r = await npx(['--help']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('stub-provider plan');
    expect(r.stdout).toContain('stub-provider sim');
    expect(r.stdout).toContain('--version');
  });

  it('prints the package version with --version', async () => {
    const r = await npx(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(packageVersion());
  });

  it('rejects an unknown flag with the usage exit code 2', async () => {
    const r = await npx(['--id', 'bare-metal', '--bogus-flag']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bogus-flag');
  });

  it(
    'releases a stuck bare-metal machine: `stub-provider sim --scenario bare-metal-stuck` ' +
      '(a shipped example, by name) and a run, both from the installed package',
    async () => {
      const bin = path.join(consumer, 'node_modules/.bin/stub-provider');
      expect(existsSync(path.join(consumer, 'scenarios'))).toBe(false);
      const r = await runAgainstSim([bin], {
        cwd: consumer,
        env: npmEnv(),
        scenario: 'bare-metal-stuck',
        id: 'bare-metal',
        scratch: work,
      });
      expectBareMetalReleased(r, expect);
    },
    2 * MINUTE,
  );

  it(
    'runs `npx stub-provider demo`',
    async () => {
      const r = await npx(['demo']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/deregistered/);
    },
    MINUTE,
  );

  it('the judge of a documented command can fail: a refused flag, failed run, plan that errs, sim not ready', () => {
    expect(
      problemOf({
        result: '2',
        command: 'stub-provider --id x --bogus',
        stderr: "stub-provider: unknown flag --bogus\nRun 'stub-provider --help' for usage.\n",
      }),
    ).toBeDefined();
    expect(problemOf({ result: '5', command: 'stub-provider --id x --yes', stderr: '' })).toBeDefined();
    expect(
      problemOf({
        result: '2',
        command: 'stub-provider --id x --yes',
        stderr: 'stub-provider: this run would change Omni: pass --yes',
      }),
    ).toBeDefined();
    expect(problemOf({ result: '3', command: 'stub-provider plan --id x', stderr: '' })).toBeDefined();
    expect(problemOf({ result: 'not-ready', command: 'stub-provider sim --scenario x', stderr: '' })).toBeDefined();
    expect(
      problemOf({
        result: '2',
        command: 'stub-provider --id x',
        stderr: 'stub-provider: this run would change Omni: pass --yes (stdin is not a terminal',
      }),
    ).toBeUndefined();
  });

  it.each(['README.md', 'docs/operator-guide.md'])(
    'every command of %s works from the installed package, run as written against simulated Omnis',
    async (doc) => {
      const bin = path.join(consumer, 'node_modules/.bin/stub-provider');
      const here = path.join(work, `doc-${path.basename(doc, '.md')}`);
      const state = path.join(here, '.state');
      mkdirSync(state, { recursive: true });
      symlinkSync(path.join(consumer, 'node_modules'), path.join(here, 'node_modules'), 'dir');
      const fixture = omnictlFixture(path.join(installed, 'scenarios/walkthroughs.yaml'));
      writeFixture(path.join(state, 'omnictl.json'), fixture);
      // What the guide's omnictl loop writes; the README only names the file.
      writeFileSync(path.join(here, 'omni-dump.yaml'), Object.values(fixture).filter(Boolean).join('---\n'));
      const walk = await startSim(bin, here, path.join(state, 'walk-keys'));
      try {
        const blocks = shellBlocks(readFileSync(path.join(installed, doc), 'utf8'));
        const script = path.join(state, 'run.sh');
        writeFileSync(
          script,
          docScript(blocks, {
            work: state,
            bin,
            walkEndpoint: walk.endpoint,
            walkKeys: path.join(state, 'walk-keys'),
            fixture: path.join(state, 'omnictl.json'),
          }),
        );
        const env = npmEnv({ NO_COLOR: '1' });
        for (const k of Object.keys(env)) if (/^(OMNI_|STUB_PROVIDER_)/.test(k)) delete env[k];
        const r = await run('bash', [script], { cwd: here, env, timeoutMs: 4 * MINUTE });
        expect(r.signal, r.stderr).toBeNull();
        const calls = docCalls(state);
        // More than a handful, or the blocks were not found and the test proves nothing.
        expect(calls.length, r.stderr).toBeGreaterThanOrEqual(doc === 'README.md' ? 5 : 12);
        expect(calls.map((c) => [c.command, problemOf(c)]).filter(([, p]) => p !== undefined)).toEqual([]);
        if (doc !== 'README.md') {
          // The guide's redirections landed: the kubevirt walkthrough's report and plan.json.
          expect(JSON.parse(readFileSync(path.join(here, 'kubevirt-report.json'), 'utf8'))).toMatchObject({
            providerId: 'kubevirt',
            result: 'done',
            exitCode: 0,
          });
          expect(JSON.parse(readFileSync(path.join(here, 'plan.json'), 'utf8'))).toMatchObject({
            command: 'plan',
            exitCode: 10,
          });
        }
      } finally {
        walk.stop();
        for (const pid of readPids(path.join(state, 'pids'))) {
          try {
            process.kill(pid, 'SIGTERM');
          } catch {
            // already gone
          }
        }
      }
    },
    5 * MINUTE,
  );
});

/** `stub-provider sim --scenario walkthroughs` from the installed package, ready, with its keys in `keys`. */
async function startSim(bin: string, cwd: string, keys: string): Promise<{ endpoint: string; stop: () => void }> {
  const child = spawn(bin, ['sim', '--scenario', 'walkthroughs', '--keys-dir', keys], {
    cwd,
    env: npmEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const t = setTimeout(() => reject(new Error(`sim not ready within 30 s\n${err}`)), 30_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      if (buf.includes('\n')) {
        clearTimeout(t);
        resolve(buf.slice(0, buf.indexOf('\n')));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`sim exited ${code}\n${err}`));
    });
  });
  return {
    endpoint: (JSON.parse(line) as { endpoint: string }).endpoint,
    stop: () => {
      child.kill('SIGTERM');
    },
  };
}

function readPids(file: string): number[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function listFiles(root: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (p !== 'node_modules') out.push(...listFiles(root, p));
    } else out.push(p);
  }
  return out;
}
