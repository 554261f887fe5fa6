// The Dockerfile's recipe, performed for real without a Docker engine: each stage gets a scratch folder
// standing in for the image's root filesystem; COPY copies from the repository (honouring
// .dockerignore) or from the build stage's folder; RUN runs through `sh -c` in the stage's WORKDIR with
// its ENV. The only steps skipped are RUN lines with apt-get (no root package manager here); the test
// checks statically that they install what the image needs. Then the resulting entrypoint is run, and
// nothing under the runtime root may change (the image runs with readOnlyRootFilesystem).

import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BARE_METAL_SCENARIO,
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

interface Instruction {
  op: string;
  args: string;
  line: number;
}

interface Stage {
  name: string;
  from: string;
  instructions: Instruction[];
}

/** Dockerfile lines -> stages of instructions (continuations joined, comments dropped). */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  let pending = '';
  let startLine = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!pending && (line === '' || line.startsWith('#'))) return;
    if (!pending) startLine = i + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      return;
    }
    const full = (pending + line).trim();
    pending = '';
    const m = /^(\w+)\s+(.*)$/s.exec(full);
    if (!m) throw new Error(`Dockerfile line ${startLine}: cannot parse "${full}"`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!;
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`Dockerfile line ${startLine}: FROM ${args}`);
      stages.push({ from: f[1]!, name: f[2] ?? String(stages.length), instructions: [] });
      return;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`Dockerfile line ${startLine}: ${op} before FROM`);
    stage.instructions.push({ op, args, line: startLine });
  });
  return stages;
}

/** `ENV a=b c=d` (or the legacy `ENV a b`). */
function parseEnv(args: string): Record<string, string> {
  if (!args.includes('=')) {
    const [k, ...v] = args.split(/\s+/);
    return { [k!]: v.join(' ') };
  }
  const out: Record<string, string> = {};
  for (const m of args.matchAll(/(\w+)=("([^"]*)"|\S*)/g)) out[m[1]!] = m[3] ?? m[2]!;
  return out;
}

/** .dockerignore patterns as Docker reads them: relative to the context, `*`, `?`, `**`, `!` re-includes. */
function dockerignore(): (rel: string) => boolean {
  const file = path.join(REPO, '.dockerignore');
  const rules = readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pat = path.posix.normalize(negate ? l.slice(1) : l).replace(/^\/+/, '');
      const rx = pat
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*\*\/?|\*|\?/g, (t) => (t.startsWith('**') ? '(?:.*/)?' : t === '*' ? '[^/]*' : '[^/]'));
      return { negate, rx: new RegExp(`^${rx}$`) };
    });
  return (rel) => {
    // A pattern that matches a directory excludes everything below it.
    const parts = rel.split('/');
    let excluded = false;
    for (const r of rules) {
      for (let n = 1; n <= parts.length; n++) {
        if (r.rx.test(parts.slice(0, n).join('/'))) {
          excluded = !r.negate;
          break;
        }
      }
    }
    return excluded;
  };
}

interface Built {
  stages: Stage[];
  roots: Map<string, string>;
  runtime: Stage;
  env: Record<string, string>;
  workdir: string;
  entrypoint: string[];
  user: string;
  skipped: Instruction[];
}

/** Performs every stage; image paths map to `<scratch>/<stage>/<path>`. */
async function performDockerfile(scratch: string): Promise<Built> {
  const stages = parseDockerfile(readFileSync(path.join(REPO, 'Dockerfile'), 'utf8'));
  const ignored = dockerignore();
  const roots = new Map<string, string>();
  const skipped: Instruction[] = [];
  let env: Record<string, string> = {};
  let workdir = '/';
  let entrypoint: string[] = [];
  let user = '';
  for (const stage of stages) {
    const root = path.join(scratch, stage.name);
    mkdirSync(path.join(root, 'tmp'), { recursive: true });
    roots.set(stage.name, root);
    const inRoot = (p: string) => path.join(root, path.posix.resolve(workdir, p));
    env = {};
    workdir = '/';
    entrypoint = [];
    user = '';
    for (const ins of stage.instructions) {
      const where = `Dockerfile line ${ins.line} (${ins.op})`;
      switch (ins.op) {
        case 'WORKDIR':
          workdir = path.posix.resolve(workdir, ins.args);
          mkdirSync(inRoot('.'), { recursive: true });
          break;
        case 'ENV':
          Object.assign(env, parseEnv(ins.args));
          break;
        case 'USER':
          user = ins.args;
          break;
        case 'ENTRYPOINT':
          entrypoint = JSON.parse(ins.args) as string[];
          break;
        case 'COPY': {
          const words = ins.args.split(/\s+/);
          const from = words[0]?.startsWith('--from=') ? words.shift()!.slice('--from='.length) : undefined;
          if (words.some((w) => w.startsWith('--'))) throw new Error(`${where}: unsupported COPY flag`);
          const dest = words.pop()!;
          const fromRoot = from === undefined ? REPO : roots.get(from);
          if (!fromRoot) throw new Error(`${where}: no stage ${from}`);
          const destPath = inRoot(dest);
          const intoDir = dest.endsWith('/') || words.length > 1;
          for (const src of words) {
            const srcRel = from === undefined ? path.posix.normalize(src) : path.posix.resolve('/', src).slice(1);
            if (from === undefined && ignored(srcRel)) throw new Error(`${where}: ${src} is excluded by .dockerignore`);
            const srcPath = path.join(fromRoot, srcRel);
            if (!existsSync(srcPath)) throw new Error(`${where}: ${src} not found`);
            if (statSync(srcPath).isDirectory()) {
              cpSync(srcPath, destPath, {
                recursive: true,
                filter: (p) => from !== undefined || !ignored(path.relative(REPO, p).split(path.sep).join('/')),
              });
            } else {
              const target = intoDir ? path.join(destPath, path.basename(srcPath)) : destPath;
              mkdirSync(path.dirname(target), { recursive: true });
              cpSync(srcPath, target);
            }
          }
          break;
        }
        case 'RUN':
          if (/\bapt-get\b/.test(ins.args)) {
            skipped.push(ins);
            break;
          }
          // npm gets the user's cache (prefer-offline) through npm_config_* variables; the command is as written.
          await runOk('sh', ['-c', ins.args], { cwd: inRoot('.'), env: npmEnv(env), timeoutMs: 3 * MINUTE });
          break;
        default:
          throw new Error(`${where}: instruction not understood by this test; extend it or keep the Dockerfile simple`);
      }
    }
  }
  const runtime = stages.at(-1)!;
  return { stages, roots, runtime, env, workdir, entrypoint, user, skipped };
}

/** Relative path -> size and mtime of every file and directory under root. */
function snapshot(root: string, rel = '', out = new Map<string, string>()): Map<string, string> {
  for (const e of readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (p === 'tmp') continue;
    const st = statSync(path.join(root, p));
    out.set(p, `${st.size}:${st.mtimeMs}`);
    if (e.isDirectory()) snapshot(root, p, out);
  }
  return out;
}

let scratch: string;
let built: Built;
let runtimeRoot: string;

/**
 * The image's entrypoint as a command line here: tini is dropped (it is not installed here), absolute
 * paths of the image map into the runtime root; with the image's ENV and WORKDIR.
 */
function entrypointCommand(): { cli: string[]; cwd: string; env: NodeJS.ProcessEnv } {
  const [init, sep, ...rest] = built.entrypoint;
  expect([init, sep]).toEqual(['/usr/bin/tini', '--']);
  const cli = rest.map((a) => (a.startsWith('/') ? path.join(runtimeRoot, a) : a));
  const env = Object.fromEntries(
    Object.entries(built.env).map(([k, v]) => [k, v.startsWith('/') ? path.join(runtimeRoot, v) : v]),
  );
  return {
    cli,
    cwd: path.join(runtimeRoot, built.workdir),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  };
}

function entrypoint(args: string[]) {
  const { cli, cwd, env } = entrypointCommand();
  const [cmd, ...cmdArgs] = cli;
  return run(cmd!, [...cmdArgs, ...args], { cwd, env, timeoutMs: MINUTE });
}

beforeAll(async () => {
  scratch = scratchDir('dockerfile');
  built = await performDockerfile(scratch);
  runtimeRoot = built.roots.get(built.runtime.name)!;
}, 6 * MINUTE);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('Dockerfile', () => {
  it('builds on node:22 in one stage and runs from a second stage on a Node >= 20.19 image', () => {
    expect(built.stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    expect(built.stages[0]!.from).toMatch(/^node:22(\.\d+)*-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
    expect(built.runtime.from).toMatch(/^node:(2[2-9]|[3-9]\d)(\.\d+)*-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
  });

  it('installs with the lockfile, builds, and prunes dev dependencies in the build stage', () => {
    const runs = built.stages[0]!.instructions.filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs[0]).toMatch(/^npm ci\b/);
    expect(runs).toContain('npm run build');
    expect(runs.at(-1)).toMatch(/^npm prune --omit=dev\b/);
    const buildModules = path.join(built.roots.get('build')!, 'app/node_modules');
    expect(existsSync(path.join(buildModules, 'typescript'))).toBe(false);
    expect(existsSync(path.join(buildModules, 'yargs'))).toBe(true);
  });

  it('skips only the apt-get step of the runtime stage, which installs ipmitool and tini', () => {
    // Performed by Docker only: this test has no root package manager.
    expect(built.skipped.map((i) => i.line)).toHaveLength(1);
    const apt = built.skipped[0]!.args;
    expect(apt).toMatch(/apt-get install\b.*\bipmitool\b/);
    expect(apt).toMatch(/apt-get install\b.*\btini\b/);
    expect(apt).toMatch(/--no-install-recommends/);
    expect(apt).toMatch(/rm -rf \/var\/lib\/apt\/lists/);
  });

  it('runs as a numeric non-root user, with tini as PID 1 in front of the CLI', () => {
    expect(built.user).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
    expect(built.entrypoint).toEqual(['/usr/bin/tini', '--', 'node', '/app/dist/src/main.js']);
  });

  it('ships the compiled CLI, the example scenarios and runtime dependencies only', () => {
    expect(existsSync(path.join(runtimeRoot, 'app/dist/src/main.js'))).toBe(true);
    // `sim --scenario bare-metal-stuck` finds the shipped example by name, as from the npm package.
    expect(existsSync(path.join(runtimeRoot, 'app/scenarios/bare-metal-stuck.yaml'))).toBe(true);
    expect(existsSync(path.join(runtimeRoot, 'app/src'))).toBe(false);
    expect(existsSync(path.join(runtimeRoot, 'app/node_modules/typescript'))).toBe(false);
    expect(existsSync(path.join(runtimeRoot, 'app/node_modules/vitest'))).toBe(false);
  });

  it('runs the entrypoint: --help, --version, and a usage error, writing nothing outside /tmp', async () => {
    const before = snapshot(runtimeRoot);
    const help = await entrypoint(['--help']);
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--version');
    const version = await entrypoint(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe(packageVersion());
    const bad = await entrypoint(['--id', 'bare-metal', '--bogus-flag']);
    expect(bad.code).toBe(2);
    expect(snapshot(runtimeRoot)).toEqual(before);
  });

  it(
    'releases a stuck bare-metal machine: `stub-provider sim` and a run from the image, writing nothing outside /tmp',
    async () => {
      const before = snapshot(runtimeRoot);
      const { cli, cwd, env } = entrypointCommand();
      const r = await runAgainstSim(cli, { cwd, env, scenario: BARE_METAL_SCENARIO, id: 'bare-metal', scratch });
      expectBareMetalReleased(r, expect);
      expect(snapshot(runtimeRoot)).toEqual(before);
    },
    2 * MINUTE,
  );
});
