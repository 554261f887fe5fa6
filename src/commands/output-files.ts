// `--report` and `--audit-log`: opened before anything is asked of Omni, checked to be two different files and
// neither an input (the key, the CA file), and held open until the command ends. Apart from the handler
// (run-io.ts) because it is the one place that writes files.

import { closeSync, constants, fstatSync, ftruncateSync, openSync, statSync, writeFileSync, writeSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { UsageError } from '../exit-codes.js';
import { escapeControl } from '../omni-api/untrusted.js';
import { redact } from '../redact.js';
import type { Io } from './provider-options.js';
import { reportJson } from './result.js';
import type { AnyResult } from './result.js';

/** `--report` and `--audit-log`, open from before the first call to Omni until the end of the command. */
export interface Outputs {
  /**
   * Appends one line to the audit log, synchronously (a run stopped by a signal loses none); absent without
   * `--audit-log`.
   */
  auditSink?: (line: string) => void;
  /** Puts the result into `--report` in place of what the file held; nothing without one. */
  writeReport(rep: AnyResult, io: Io): void;
  close(): void;
}

interface OutputFile {
  flag: string;
  path: string;
  fd: number;
  stats: Stats;
}

/**
 * Opens `--report` and `--audit-log` before anything is asked of Omni (docs/design.md 'Output'): a path that
 * cannot be written is a usage error (exit 2) while nothing was written yet, not a note after the
 * run made its changes. Two of them naming one file (the same path, or another way to it: a symlink,
 * a hard link, /dev/fd/N; compared by device and inode) are refused, as is an output that is one of
 * `inputs` (the key file, the CA file): the report would overwrite the audit log, or the key.
 */
export function openOutputs(o: {
  report?: string | undefined;
  auditLog?: string | undefined;
  inputs?: { flag: string; path: string | undefined }[];
}): Outputs {
  const opened: OutputFile[] = [];
  const closeAll = () => {
    for (const f of opened.splice(0)) closeSync(f.fd);
  };
  try {
    // The audit log is appended to; the report is not truncated before the checks below have passed.
    if (o.auditLog) opened.push(openOutput('--audit-log', o.auditLog, 'a'));
    if (o.report) opened.push(openOutput('--report', o.report, constants.O_WRONLY | constants.O_CREAT));
    const [a, b] = opened;
    if (a && b && sameFile(a.stats, b.stats)) {
      throw new UsageError(
        `${a.flag} ${a.path} and ${b.flag} ${b.path} are the same file: the report would overwrite the audit log; ` +
          `give them different files (nothing was written to Omni)`,
      );
    }
    for (const input of o.inputs ?? []) {
      const st = input.path ? statOrUndefined(input.path) : undefined;
      const clash = st && opened.find((f) => sameFile(f.stats, st));
      if (clash)
        throw new UsageError(
          `${clash.flag} ${clash.path} is the file of ${input.flag} (${input.path}): writing it would destroy it; ` +
            `give ${clash.flag} another file (nothing was written to Omni)`,
        );
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
    ...(audit
      ? {
          auditSink: (line: string) => {
            writeSync(audit.fd, redact(line));
          },
        }
      : {}),
    writeReport: (rep, io) => {
      if (!report) return;
      try {
        writeFileSync(report.fd, reportJson(rep));
      } catch (err) {
        io.stderr.write(
          redact(
            `stub-provider: cannot write the report to ${escapeControl(report.path)}: ` +
              `${(err as NodeJS.ErrnoException).code ?? String(err)}\n`,
          ),
        );
      }
    },
    close: closeAll,
  };
}

function openOutput(flag: string, path: string, flags: string | number): OutputFile {
  let fd: number;
  try {
    // Created readable by its owner only: a report or an audit log names the provider's machines.
    fd = openSync(path, flags, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    const hint =
      code === 'ENOENT'
        ? 'its folder does not exist'
        : code === 'EISDIR'
          ? 'it is a folder'
          : code === 'EACCES' || code === 'EPERM' || code === 'EROFS'
            ? 'it may not be written here'
            : 'check the path';
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
