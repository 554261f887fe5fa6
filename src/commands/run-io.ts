// The process-facing pieces of `run` and `plan`: the real terminal, signals, the confirmation
// prompt, the report and audit log files, and turning a non-zero result into an error that cli.ts
// maps to the exit code.

import { closeSync, constants, fstatSync, ftruncateSync, openSync, statSync, writeFileSync, writeSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { ExitCode, StubError, UsageError } from '../exit-codes.js';
import type { Report } from '../provider/report.js';
import { renderText } from '../provider/report.js';
import { escapeControl, inertJson } from '../untrusted.js';
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

/** The report as JSON: programs read it, a person may print it, so C1 and bidi controls are \uXXXX. */
function reportJson(rep: Report): string {
  return `${inertJson(JSON.stringify(rep, null, 2))}\n`;
}

/** The result on stdout: JSON with `--output json`, the text summary otherwise (`--report` is Outputs'). */
export function emitReport(rep: Report, c: ConnectionConfig, io: Io): void {
  io.stdout.write(c.output === 'json' ? reportJson(rep) : renderText(rep));
}

/** `--report` and `--audit-log`, open from before the first call to Omni until the end of the command. */
export interface Outputs {
  /** Appends one line to the audit log, synchronously (a run stopped by a signal loses none); absent without `--audit-log`. */
  auditSink?: (line: string) => void;
  /** Puts the report into `--report` in place of what the file held; nothing without one. */
  writeReport(rep: Report, io: Io): void;
  close(): void;
}

interface OutputFile {
  flag: string;
  path: string;
  fd: number;
  stats: Stats;
}

/**
 * Opens `--report` and `--audit-log` before anything is asked of Omni (issue 11 item 5): a path that
 * cannot be written is a usage error (exit 2) while nothing was written yet, not a note after the
 * run made its changes. Two of them naming one file (the same path, or another way to it: a symlink,
 * a hard link, /dev/fd/N; compared by device and inode) are refused, as is an output that is one of
 * `inputs` (the key file, the CA file): the report would overwrite the audit log, or the key.
 */
export function openOutputs(o: { report?: string | undefined; auditLog?: string | undefined; inputs?: { flag: string; path: string | undefined }[] }): Outputs {
  const opened: OutputFile[] = [];
  const closeAll = () => { for (const f of opened.splice(0)) closeSync(f.fd); };
  try {
    // The audit log is appended to; the report is not truncated before the checks below have passed.
    if (o.auditLog) opened.push(openOutput('--audit-log', o.auditLog, 'a'));
    if (o.report) opened.push(openOutput('--report', o.report, constants.O_WRONLY | constants.O_CREAT));
    const [a, b] = opened;
    if (a && b && sameFile(a.stats, b.stats)) {
      throw new UsageError(`${a.flag} ${a.path} and ${b.flag} ${b.path} are the same file: the report would overwrite the audit log; give them different files (nothing was written to Omni)`);
    }
    for (const input of o.inputs ?? []) {
      const st = input.path ? statOrUndefined(input.path) : undefined;
      const clash = st && opened.find((f) => sameFile(f.stats, st));
      if (clash) throw new UsageError(`${clash.flag} ${clash.path} is the file of ${input.flag} (${input.path}): writing it would destroy it; give ${clash.flag} another file (nothing was written to Omni)`);
    }
  } catch (err) {
    closeAll();
    throw err;
  }
  const audit = opened.find((f) => f.flag === '--audit-log');
  const report = opened.find((f) => f.flag === '--report');
  // From here on the file is this run's report: empty until the report is written.
  if (report?.stats.isFile()) ftruncateSync(report.fd, 0);
  return {
    ...(audit ? { auditSink: (line: string) => { writeSync(audit.fd, line); } } : {}),
    writeReport: (rep, io) => {
      if (!report) return;
      try {
        writeFileSync(report.fd, reportJson(rep));
      } catch (err) {
        io.stderr.write(`stub-provider: cannot write the report to ${escapeControl(report.path)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}\n`);
      }
    },
    close: closeAll,
  };
}

/** Files an output must not be (it would overwrite them): the key file and the CA file. */
export function inputFiles(c: Pick<ConnectionConfig, 'keyFile' | 'caFile'>): { flag: string; path: string | undefined }[] {
  return [{ flag: '--service-account-key-file', path: c.keyFile }, { flag: '--ca-file', path: c.caFile }];
}

function openOutput(flag: string, path: string, flags: string | number): OutputFile {
  let fd: number;
  try {
    fd = openSync(path, flags, 0o644);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    const hint = code === 'ENOENT' ? 'its folder does not exist' : code === 'EISDIR' ? 'it is a folder' : code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? 'it may not be written here' : 'check the path';
    throw new UsageError(`${flag} ${path}: cannot open it for writing (${code}: ${hint}); nothing was written to Omni`);
  }
  return { flag, path, fd, stats: fstatSync(fd) };
}

function sameFile(a: Stats, b: Stats): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
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
