// Child processes of the tests: a command run to its end, and a server that prints one JSON line on
// stdout when it is ready (the sim, the COSI peer). Every wait has a time limit; a server that fails
// to start is stopped, not left behind.

import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

const READY_TIMEOUT_MS = 30_000;

/**
 * Runs a command to its end (bounded); answers its stdout. The error names the command, ends with its
 * output, and carries `stdout` and `stderr`.
 */
export function runCommand(
  cmd: string,
  args: string[],
  opts: { cwd?: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      cmd,
      args,
      {
        cwd: opts.cwd,
        timeout: opts.timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 64 << 20,
        env: opts.env ?? process.env,
      },
      (err, stdout, stderr) => {
        if (!err) return resolvePromise(stdout);
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        const tail = `${stderr}${stdout}`.trim().split('\n').slice(-20).join('\n');
        const what = `${cmd} ${args.join(' ')}`;
        if (e.code === 'ENOENT') reject(new Error(`${cmd} is not on PATH`));
        else if (e.killed) reject(new Error(`${what} did not finish within ${opts.timeoutMs / 1000} s:\n${tail}`));
        else reject(Object.assign(new Error(`${what} exited with ${String(e.code)}:\n${tail}`), { stdout, stderr }));
      },
    );
  });
}

export interface Child {
  child: ChildProcessWithoutNullStreams;
  /** The parsed first line of its stdout. */
  ready: Record<string, unknown>;
  stderr(): string;
  /** Its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** Stops it (SIGTERM, then SIGKILL after 5 s) and waits for its exit. */
  stop(): Promise<void>;
}

/** Starts a program that prints one JSON line on stdout when it is ready to serve. */
export async function startWithReadyLine(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Child> {
  const child = spawn(cmd, args, {
    cwd: opts.cwd ?? process.cwd(),
    env: { ...process.env, NO_COLOR: '1', ...opts.env },
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => {
    if (err.length < 1 << 20) err += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    }
  };
  try {
    const line = await new Promise<string>((resolvePromise, reject) => {
      const t = setTimeout(
        () => reject(new Error(`${cmd}: no ready line within ${READY_TIMEOUT_MS / 1000} s; stderr: ${err}`)),
        READY_TIMEOUT_MS,
      );
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const i = out.indexOf('\n');
        if (i >= 0) {
          clearTimeout(t);
          resolvePromise(out.slice(0, i));
        }
      });
      void exited.then(() => {
        clearTimeout(t);
        reject(
          new Error(
            `${cmd} exited (${String(child.exitCode ?? child.signalCode)}) before it was ready; stderr: ${err}`,
          ),
        );
      });
    });
    return { child, ready: JSON.parse(line) as Record<string, unknown>, stderr: () => err, exited, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
