// Runs one program for a wipe: no shell, an explicit environment, output read line by line, and at
// abort SIGTERM to its whole process group, then SIGKILL after a grace period, so a script that
// started children cannot outlive the timeout.

import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

export type ProcessOutcome =
  | { kind: 'exited'; exitCode: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }
  | { kind: 'not-found' }
  | { kind: 'spawn-error'; message: string }
  | { kind: 'aborted'; killedWith: 'SIGTERM' | 'SIGKILL'; stdout: string; stderr: string };

export interface RunProcessOptions {
  file: string;
  args: string[];
  env: Record<string, string>;
  signal: AbortSignal;
  /** How long after SIGTERM the process group gets SIGKILL. */
  killGraceMs: number;
  /** Called for every complete output line (and a last partial one). */
  onLine?: (stream: 'stdout' | 'stderr', line: string) => void;
  /** At most this many characters of each stream are kept in the outcome (the rest is still read). */
  keepChars?: number;
}

const DEFAULT_KEEP = 64 * 1024;
const MAX_LINE = 8 * 1024;

export function runProcess(o: RunProcessOptions): Promise<ProcessOutcome> {
  return new Promise((resolve) => {
    if (o.signal.aborted) {
      resolve({ kind: 'aborted', killedWith: 'SIGTERM', stdout: '', stderr: '' });
      return;
    }
    const keep = o.keepChars ?? DEFAULT_KEEP;
    const kept = { stdout: '', stderr: '' };
    let exited: { exitCode: number | null; signal: NodeJS.Signals | null } | undefined;

    const child = spawn(o.file, o.args, {
      env: o.env,
      shell: false,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so a timeout reaches everything it started.
      detached: true,
      windowsHide: true,
    });
    const killer = new GroupKiller(child, o.killGraceMs);
    const onAbort = () => killer.start();
    o.signal.addEventListener('abort', onAbort, { once: true });

    let settled = false;
    const finish = (r: ProcessOutcome) => {
      if (settled) return;
      settled = true;
      o.signal.removeEventListener('abort', onAbort);
      killer.stopGrace();
      resolve(r);
    };

    for (const stream of ['stdout', 'stderr'] as const) {
      readLines(child[stream], (line) => {
        if (kept[stream].length < keep) kept[stream] += (line + '\n').slice(0, keep - kept[stream].length);
        o.onLine?.(stream, line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}… (line truncated)` : line);
      });
    }

    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') finish({ kind: 'not-found' });
      else finish({ kind: 'spawn-error', message: err.message });
    });
    child.on('exit', (exitCode, signal) => {
      if (!killer.killedWith) exited = { exitCode, signal };
    });
    // 'close' waits for the output pipes; a grandchild that keeps them open is in our process group
    // and is killed with it at the timeout (the program's own exit status still counts).
    child.on('close', () => {
      if (exited) finish({ kind: 'exited', ...exited, ...kept });
      else finish({ kind: 'aborted', killedWith: killer.killedWith ?? 'SIGTERM', ...kept });
    });
  });
}

/** At abort: SIGTERM to the child's whole process group, then SIGKILL once the grace period has passed. */
class GroupKiller {
  killedWith: 'SIGTERM' | 'SIGKILL' | undefined;
  #graceTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly child: ChildProcess,
    private readonly graceMs: number,
  ) {}

  start(): void {
    this.#kill('SIGTERM');
    this.#graceTimer = setTimeout(() => this.#kill('SIGKILL'), this.graceMs);
  }

  stopGrace(): void {
    if (this.#graceTimer) clearTimeout(this.#graceTimer);
  }

  #kill(sig: 'SIGTERM' | 'SIGKILL'): void {
    this.killedWith = sig;
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, sig);
    } catch {
      // Already gone.
    }
  }
}

/** Every line of a stream, without its line end, as it completes, then a last partial one at the end; what has
 * waited for its line end past MAX_LINE characters is handed on as it is. */
function readLines(s: Readable, emit: (line: string) => void): void {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  s.on('data', (chunk: Buffer) => {
    pending += decoder.write(chunk);
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      emit(pending.slice(0, nl).replace(/\r$/, ''));
      pending = pending.slice(nl + 1);
    }
    // A line that never ends must not grow without bound.
    if (pending.length > MAX_LINE) {
      emit(pending);
      pending = '';
    }
  });
  s.on('end', () => {
    pending += decoder.end();
    if (pending) emit(pending);
    pending = '';
  });
}
