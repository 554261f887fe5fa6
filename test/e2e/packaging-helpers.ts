// Shared by the packaging tests (pack.test.ts, dockerfile.test.ts): run a process with a hard time
// limit and capture its output, and copy the package's sources into a scratch folder.

import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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
    throw new Error(`${cmd} ${args.join(' ')} (in ${opts.cwd}) exited ${r.code ?? r.signal}\n--- stdout\n${r.stdout.slice(-4000)}\n--- stderr\n${r.stderr.slice(-4000)}`);
  }
  return r;
}

export function scratchDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `stub-provider-${prefix}-`));
}

/** What a build needs from the repository, never node_modules/ or dist/ (they are made from these). */
export const SOURCE_ENTRIES = ['package.json', 'package-lock.json', 'README.md', 'docs', 'src', 'scripts', 'tsconfig.json', 'tsconfig.build.json'];

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
