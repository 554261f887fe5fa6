// The process-facing pieces of `run` and `plan`: the real terminal, signals, the confirmation
// prompt, writing the report and the audit log, and turning a non-zero result into an error that
// cli.ts maps to the exit code.

import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { ExitCode, StubError, UsageError } from '../exit-codes.js';
import type { Report } from '../provider/report.js';
import { renderText } from '../provider/report.js';
import { inertJson } from '../untrusted.js';
import type { ConnectionConfig, Io } from './provider-options.js';

export function processIo(): Io {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdinIsTTY: process.stdin.isTTY === true,
    env: process.env,
    ask: (question) => askYesNo(process.stdin, process.stderr, question),
    signals: process,
  };
}

/**
 * Asks a yes/no question. On a terminal readline turns Ctrl-C into an AbortError (the process gets
 * no SIGINT): that is an interruption before anything was written, exit 130, not an internal error.
 */
export async function askYesNo(input: NodeJS.ReadableStream, output: NodeJS.WritableStream, question: string): Promise<boolean> {
  // terminal from the input: stdin decides whether Ctrl-C arrives as a key, whatever stderr is.
  const rl = createInterface({ input, output, terminal: (input as { isTTY?: boolean }).isTTY === true });
  try {
    const answer = await rl.question(question);
    return /^y(es)?$/i.test(answer.trim());
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ABORT_ERR') {
      throw new StubError('STUB_INTERRUPTED', ExitCode.SigInt, 'interrupted at the confirmation prompt; nothing was changed', { cause: err });
    }
    throw err;
  } finally {
    rl.close();
  }
}

export function emitReport(rep: Report, c: ConnectionConfig, io: Io): void {
  // Programs read it; a person may print it: the same JSON with C1 and bidi controls as \uXXXX.
  const json = `${inertJson(JSON.stringify(rep, null, 2))}\n`;
  if (c.reportFile) {
    try {
      writeFileSync(c.reportFile, json);
    } catch (err) {
      io.stderr.write(`stub-provider: cannot write the report to ${c.reportFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}\n`);
    }
  }
  io.stdout.write(c.output === 'json' ? json : renderText(rep));
}

/** Opens `--audit-log` for appending; lines are written synchronously so a killed run loses none. */
export function openAuditLog(file: string | undefined): { sink?: (line: string) => void; close: () => void } {
  if (!file) return { close: () => undefined };
  let fd: number;
  try {
    fd = openSync(file, 'a');
  } catch (err) {
    throw new UsageError(`cannot open the audit log ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  return { sink: (line) => { writeSync(fd, line); }, close: () => closeSync(fd) };
}

/** SIGINT/SIGTERM abort the run; the exit code says which (130/143). */
export function trapSignals(io: Io): { signal: AbortSignal; code: () => 130 | 143 | undefined; release: () => void } {
  const ac = new AbortController();
  let code: 130 | 143 | undefined;
  const onInt = () => { code ??= ExitCode.SigInt; ac.abort(new StubError('STUB_INTERRUPTED', ExitCode.SigInt, 'interrupted (SIGINT)')); };
  const onTerm = () => { code ??= ExitCode.SigTerm; ac.abort(new StubError('STUB_INTERRUPTED', ExitCode.SigTerm, 'interrupted (SIGTERM)')); };
  io.signals?.on('SIGINT', onInt);
  io.signals?.on('SIGTERM', onTerm);
  return {
    signal: ac.signal,
    code: () => code,
    release: () => {
      io.signals?.off('SIGINT', onInt);
      io.signals?.off('SIGTERM', onTerm);
    },
  };
}

/** A non-zero exit code as the error cli.ts maps back to it (the report was already printed). */
export function exitWith(code: number): void {
  if (code === ExitCode.OK) return;
  if (code === ExitCode.Incomplete) throw new StubError('STUB_INCOMPLETE', ExitCode.Incomplete, 'not everything could be released (see the report); run again');
  if (code === ExitCode.SigInt || code === ExitCode.SigTerm) throw new StubError('STUB_INTERRUPTED', code, 'interrupted; calls in flight were cancelled');
  throw new StubError('STUB_FAILED', code as 1, 'failed');
}
