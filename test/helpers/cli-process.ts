// The built CLI (dist/src/main.js) in a child process, as a person or a Job runs it: stdin not a
// terminal, an environment cleaned of anything that would configure it behind the test's back,
// a hard time limit, and its exit code, stdout and stderr.

import { spawn } from 'node:child_process';
import { closeSync, existsSync, ftruncateSync, openSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, expect } from 'vitest';

export const MAIN = join(process.cwd(), 'dist/src/main.js');

/** Fails the test file at once, saying what to do, when the CLI is not built (call at its top). */
export function requireBuiltCli(): void {
  beforeAll(() => {
    expect(existsSync(MAIN), 'run `npm run build` first').toBe(true);
  });
}

/**
 * A fresh temporary folder for each test of the file, removed after it (call at the top of the file); the function
 * returns the current one.
 */
export function scratchDirEachTest(prefix: string): () => string {
  let dir: string | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
  });
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });
  return () => {
    if (!dir) throw new Error('scratchDirEachTest: no test is running');
    return dir;
  };
}

/** A file of `bytes` at `path` that takes no room (sparse). */
export function sparseFile(path: string, bytes: number): string {
  const fd = openSync(path, 'w');
  ftruncateSync(fd, bytes);
  closeSync(fd);
  return path;
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliChild {
  /** Resolves when the process exits (killed with SIGKILL after `limitMs`). */
  done: Promise<CliRun>;
  kill(sig: NodeJS.Signals): void;
  /** Resolves once stderr holds text matching `re` (rejects when the process ends first). */
  stderrMatches(re: RegExp): Promise<void>;
}

/** The parent's environment without OMNI_* and STUB_PROVIDER_*, with NO_COLOR, plus `extra`. */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const [k, v] of Object.entries(process.env))
    if (!/^(OMNI_|STUB_PROVIDER_|NO_COLOR$|FORCE_COLOR$)/.test(k)) env[k] = v;
  return { ...env, ...extra };
}

export function startCli(
  args: string[],
  o: { env?: NodeJS.ProcessEnv; cwd?: string; limitMs?: number } = {},
): CliChild {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd: o.cwd ?? process.cwd(),
    env: o.env ?? cleanEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end();
  let stdout = '';
  let stderr = '';
  const watchers: { re: RegExp; resolve: () => void }[] = [];
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    for (const w of watchers.splice(0))
      if (w.re.test(stderr)) w.resolve();
      else watchers.push(w);
  });
  const done = new Promise<CliRun>((resolve, reject) => {
    const t = setTimeout(() => child.kill('SIGKILL'), o.limitMs ?? 60_000);
    child.on('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return {
    done,
    kill: (sig) => {
      child.kill(sig);
    },
    stderrMatches: (re) =>
      new Promise<void>((resolve, reject) => {
        if (re.test(stderr)) return resolve();
        watchers.push({ re, resolve });
        void done.then(() => reject(new Error(`the process ended before stderr matched ${re}:\n${stderr}`)));
      }),
  };
}

export function runCli(
  args: string[],
  o: { env?: NodeJS.ProcessEnv; cwd?: string; limitMs?: number } = {},
): Promise<CliRun> {
  return startCli(args, o).done;
}

/**
 * The error a failed command printed, as its line of text `stub-provider: <msg> [<code>]`: with JSON logs (the
 * default off a terminal) it is one JSON record (level "error", msg, code), which this turns back into that line.
 */
export function errorLine(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l !== '');
  for (const line of lines.reverse()) {
    if (!line.startsWith('{')) continue;
    const rec = JSON.parse(line) as { level?: unknown; msg?: string; code?: string };
    if (rec.level === 'error' && rec.code) return `stub-provider: ${rec.msg} [${rec.code}]`;
  }
  return stderr;
}
