// The npm package as an operator gets it: built from the sources in a scratch copy, packed, installed
// from the tarball alone into an empty folder, and run with `npx stub-provider`.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BARE_METAL_SCENARIO, copySources, expectBareMetalReleased, npmEnv, packageVersion, REPO, run, runAgainstSim, runOk, scratchDir,
} from './packaging-helpers.js';

const MINUTE = 60_000;
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare', 'preprepare', 'postprepare'];

interface Manifest {
  name: string;
  version: string;
  bin?: Record<string, string>;
  engines?: { node?: string };
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
  await runOk('npm', ['run', 'build'], { cwd: src, env: npmEnv(), timeoutMs: 2 * MINUTE });
  const out = path.join(work, 'out');
  mkdirSync(out);
  const packed = await runOk('npm', ['pack', '--pack-destination', out], { cwd: src, env: npmEnv(), timeoutMs: MINUTE });
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
    expect(files.filter((f) => f.endsWith('.ts') || f.endsWith('.map'))).toEqual([]);
    expect(files.filter((f) => /^(test|src|bench|scripts)\//.test(f))).toEqual([]);
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
      expect(existsSync(path.join(consumer, 'node_modules', dev)), `dev dependency ${dev} must not be installed`).toBe(false);
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

  it('releases a stuck bare-metal machine: `stub-provider sim` and a run, both from the installed package', async () => {
    const bin = path.join(consumer, 'node_modules/.bin/stub-provider');
    const r = await runAgainstSim([bin], { cwd: consumer, env: npmEnv(), scenario: BARE_METAL_SCENARIO, id: 'bare-metal', scratch: work });
    expectBareMetalReleased(r, expect);
  }, 2 * MINUTE);
});

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
