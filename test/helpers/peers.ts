// Test peers written in other languages (docs/architecture.md, "Test peers"): Go programs under
// test/go/<module>/ (each its own module, go.sum committed) and a Python virtual environment from
// test/python/requirements.txt (exact versions). Both are made once and reused:
//
// - a Go peer is built into node_modules/.cache/stub-provider-peers/<module>-<hash>/, where the hash
//   covers the module's files and the Go version, so an edit rebuilds it and nothing else does;
// - the virtual environment is .venv-test/ at the top of the repository (or STUB_TEST_VENV),
//   recreated when requirements.txt or the Python version changes (a stamp file says which).
//
// vitest's globalSetup (test/global-setup.ts) calls preparePeers() once per run, before any test file
// starts, and hands the result to the tests (`inject('peers')`), so parallel test files never build
// the same thing at once; .ci/run calls it first too (scripts/prepare-test-peers.mjs), to fail early
// with the reason. Every step has a time limit; a failure is recorded with what to do, and the tests
// that need that peer fail with it (the others still run).

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CACHE = join(REPO, 'node_modules', '.cache', 'stub-provider-peers');
const REQUIREMENTS = join(REPO, 'test', 'python', 'requirements.txt');
const STAMP = '.stub-provider-requirements';

/** The Go peers: every folder of test/go/ with a go.mod (a new peer needs nothing else). */
export const GO_PEERS: readonly string[] = readdirSync(join(REPO, 'test', 'go'), { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(REPO, 'test', 'go', d.name, 'go.mod')))
  .map((d) => d.name)
  .sort();

const MINUTE = 60_000;
/** A cold build (empty module and build caches) of specs-golden took about 1 min on 2 cores. */
const GO_BUILD_TIMEOUT_MS = 10 * MINUTE;
const VENV_TIMEOUT_MS = 5 * MINUTE;

export type Prepared<T> = ({ ok: true } & T) | { ok: false; error: string };

export interface PythonEnv {
  /** The virtual environment's folder. */
  dir: string;
  /** Its python. */
  python: string;
  /** Folder of the console scripts (sushy-emulator). */
  bin: string;
}

export interface PeersContext {
  go: Record<string, Prepared<GoPeerBinaries>>;
  python: Prepared<PythonEnv>;
  /** Seconds each step took, for .ci/run's log. */
  seconds: Record<string, number>;
}

declare module 'vitest' {
  export interface ProvidedContext {
    peers: PeersContext;
  }
}

interface RunResult {
  stdout: string;
  stderr: string;
}

function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      cmd,
      args,
      {
        cwd: opts.cwd,
        timeout: opts.timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 32 << 20,
        env: opts.env ?? process.env,
      },
      (err, stdout, stderr) => {
        if (!err) return resolvePromise({ stdout, stderr });
        const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: number | string };
        const what = `${cmd} ${args.join(' ')}`;
        const tail = (stderr || stdout).trim().split('\n').slice(-15).join('\n');
        if (e.code === 'ENOENT') reject(new Error(`${cmd} is not on PATH`));
        else if (e.killed)
          reject(new Error(`${what} did not finish within ${opts.timeoutMs / 1000} s${tail ? `:\n${tail}` : ''}`));
        else reject(new Error(`${what} exited with ${e.code}${tail ? `:\n${tail}` : ''}`));
      },
    );
  });
}

function hashFiles(dir: string, names: string[], extra: string): string {
  const h = createHash('sha256').update(extra);
  for (const n of names) h.update(`\0${n}\0`).update(readFileSync(join(dir, n)));
  return h.digest('hex').slice(0, 16);
}

/**
 * Fetches the modules of test/go/<name> from the module proxy into the module cache (`go mod
 * download`); a build does this by itself, .ci/run does it first so that a proxy failure says so.
 */
export async function downloadGoModules(name: string, go = process.env['GO'] ?? 'go'): Promise<void> {
  await run(go, ['mod', 'download'], { cwd: join(REPO, 'test', 'go', name), timeoutMs: GO_BUILD_TIMEOUT_MS });
}

/** A built Go peer: its program, and its test binary when the module has tests (`go test -c`). */
export interface GoPeerBinaries {
  binary: string;
  testBinary?: string;
}

/**
 * Builds test/go/<name> once and answers the binaries' paths: the program, and with `_test.go` files
 * the test binary too (one after the other: the second reuses the first's compiled packages, and 2
 * cores are enough for one). Reads only go.mod, go.sum and the module's top-level .go files;
 * `-mod=readonly`, so a go.sum that does not cover the build fails instead of asking the checksum
 * database.
 */
export async function buildGoPeer(name: string, go = process.env['GO'] ?? 'go'): Promise<GoPeerBinaries> {
  const dir = join(REPO, 'test', 'go', name);
  if (!existsSync(join(dir, 'go.mod'))) throw new Error(`test/go/${name}/go.mod is missing`);
  const files = readdirSync(dir)
    .filter((f) => f === 'go.mod' || f === 'go.sum' || f.endsWith('.go'))
    .sort();
  const hasTests = files.some((f) => f.endsWith('_test.go'));
  const { stdout: version } = await run(go, ['env', 'GOVERSION', 'GOOS', 'GOARCH'], { timeoutMs: MINUTE });
  const key = `${name}-${hashFiles(dir, files, version)}`;
  const out: GoPeerBinaries = {
    binary: join(CACHE, key, name),
    ...(hasTests ? { testBinary: join(CACHE, key, `${name}.test`) } : {}),
  };
  if (existsSync(out.binary) && (!out.testBinary || existsSync(out.testBinary))) return out;

  mkdirSync(join(CACHE, key), { recursive: true });
  // Built beside the final path and renamed: a reader never sees half a binary, and two builds at
  // once (two vitest runs) both end with a whole one.
  const build = async (target: string, args: string[]): Promise<void> => {
    const partial = `${target}.${process.pid}.partial`;
    await run(go, [...args, '-mod=readonly', '-trimpath', '-o', partial, '.'], {
      cwd: dir,
      timeoutMs: GO_BUILD_TIMEOUT_MS,
    });
    renameSync(partial, target);
  };
  await build(out.binary, ['build']);
  if (out.testBinary) await build(out.testBinary, ['test', '-c']);
  // Older builds of the same module are of no further use.
  for (const old of readdirSync(CACHE))
    if (old.startsWith(`${name}-`) && old !== key) rmSync(join(CACHE, old), { recursive: true, force: true });
  return out;
}

export function venvDir(): string {
  const fromEnv = process.env['STUB_TEST_VENV'];
  return fromEnv ? resolve(fromEnv) : join(REPO, '.venv-test');
}

/** The virtual environment of test/python/requirements.txt, made (or remade) when it is not current. */
export async function ensurePythonVenv(python = process.env['PYTHON'] ?? 'python3'): Promise<PythonEnv> {
  const dir = venvDir();
  const env: PythonEnv = { dir, python: join(dir, 'bin', 'python'), bin: join(dir, 'bin') };
  const { stdout: version } = await run(python, ['-c', 'import sys; print(sys.version)'], { timeoutMs: MINUTE });
  const want = `${createHash('sha256').update(readFileSync(REQUIREMENTS)).update(version).digest('hex')}\n`;
  const stampPath = join(dir, STAMP);
  if (existsSync(stampPath) && readFileSync(stampPath, 'utf8') === want && existsSync(env.python)) return env;

  // A virtual environment cannot be moved once made (its scripts name its path), so it is made in
  // place; the stamp is written last, so a half-made one is made again next time.
  rmSync(dir, { recursive: true, force: true });
  try {
    await run(python, ['-m', 'venv', dir], { timeoutMs: VENV_TIMEOUT_MS });
  } catch (e) {
    throw new Error(`${(e as Error).message}\n(on Debian, python3 -m venv needs the python3-venv package)`);
  }
  await run(
    env.python,
    [
      '-m',
      'pip',
      'install',
      '--disable-pip-version-check',
      '--no-input',
      '--quiet',
      '--timeout',
      '60',
      '--require-virtualenv',
      '-r',
      REQUIREMENTS,
    ],
    { timeoutMs: VENV_TIMEOUT_MS },
  );
  writeFileSync(stampPath, want);
  return env;
}

async function timed<T>(
  seconds: Record<string, number>,
  what: string,
  f: () => Promise<T>,
  hint: string,
): Promise<Prepared<T>> {
  const started = Date.now();
  try {
    return { ok: true, ...(await f()) };
  } catch (e) {
    return { ok: false, error: `${what}: ${(e as Error).message}\n${hint}` };
  } finally {
    seconds[what] = Math.round((Date.now() - started) / 100) / 10;
  }
}

/** Every peer, side by side; never throws (each failure is recorded for the tests that need it). */
export async function preparePeers(): Promise<PeersContext> {
  const seconds: Record<string, number> = {};
  const goHint =
    'The golden and COSI tests need Go (see test/go/*/go.mod for the version) and the Go module proxy; .ci/run ' +
    'installs and prepares them.';
  const [python, ...go] = await Promise.all([
    timed(
      seconds,
      'Python virtual environment (test/python/requirements.txt)',
      ensurePythonVenv,
      'The sushy-tools tests need python3 with venv and PyPI; .ci/run installs and prepares them.',
    ),
    ...GO_PEERS.map((name) => timed(seconds, `Go peer test/go/${name}`, () => buildGoPeer(name), goHint)),
  ]);
  return { go: Object.fromEntries(GO_PEERS.map((n, i) => [n, go[i]!])), python: python!, seconds };
}

function provided(): PeersContext {
  const peers = inject('peers');
  if (!peers)
    throw new Error(
      'no test peers were prepared: run the tests through vitest with vitest.config.ts (its globalSetup prepares them)',
    );
  return peers;
}

/** In a test: a Go peer's binaries, or the reason they could not be built. */
export function goPeerBinaries(name: string): GoPeerBinaries {
  const p = provided().go[name];
  if (!p) throw new Error(`no Go peer ${name} was prepared (is there a test/go/${name}/go.mod?)`);
  if (!p.ok) throw new Error(p.error);
  return p;
}

/** In a test: the path of a Go peer's program. */
export function goPeer(name: string): string {
  return goPeerBinaries(name).binary;
}

/** In a test: the Python virtual environment, or the reason it could not be made. */
export function pythonEnv(): PythonEnv {
  const p = provided().python;
  if (!p.ok) throw new Error(p.error);
  return p;
}
