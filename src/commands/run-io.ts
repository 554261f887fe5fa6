// The process-facing pieces of `run` and `plan`: the real terminal, signals, the confirmation
// prompt, the report and audit log files, and turning a non-zero result into an error that cli.ts
// maps to the exit code.

import { closeSync, constants, fstatSync, ftruncateSync, openSync, statSync, writeFileSync, writeSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { describeError, ExitCode, ResultExit, StubError, UsageError } from '../exit-codes.js';
import type { ExitCodeValue } from '../exit-codes.js';
import type { Report, Throttling } from '../provider/report/report.js';
import { StageTracker } from '../provider/run/stage.js';
import type { Stage } from '../provider/run/stage.js';
import { renderText } from '../provider/report/text.js';
import { wrapText } from '../provider/report/wrap.js';
import { escapeControl, inertJson } from '../omni-api/untrusted.js';
import { redact, redactDeep } from '../redact.js';
import { takeEarlySignal } from '../early-signal.js';
import { VERSION } from '../version.js';
import type { CliContext } from './options.js';
import type { Io, OutputFormat, ResultTarget } from './provider-options.js';
import { resultTarget } from './provider-options.js';

export function processIo(
  env: NodeJS.ProcessEnv = process.env,
  streams: Pick<CliContext, 'stdout' | 'stderr'> = process,
): Io {
  return {
    stdout: streams.stdout,
    stderr: streams.stderr,
    stdinIsTTY: process.stdin.isTTY === true,
    env,
    ask: (question) => askYesNo(process.stdin, streams.stderr, question),
    signals: process,
    takeEarlySignal,
  };
}

/**
 * Asks a yes/no question. On a terminal readline turns Ctrl-C into an AbortError (the process gets
 * no SIGINT): that is an interruption before anything was written, exit 130, not an internal error.
 */
export async function askYesNo(
  input: NodeJS.ReadableStream,
  output: NodeJS.WritableStream,
  question: string,
): Promise<boolean> {
  // terminal from the input: stdin decides whether Ctrl-C arrives as a key, whatever stderr is.
  const rl = createInterface({ input, output, terminal: (input as { isTTY?: boolean }).isTTY === true });
  try {
    const answer = await rl.question(question);
    return /^y(es)?$/i.test(answer.trim());
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ABORT_ERR') {
      throw new StubError(
        'STUB_INTERRUPTED',
        ExitCode.SigInt,
        'interrupted at the confirmation prompt; nothing was changed',
        { cause: err },
      );
    }
    throw err;
  } finally {
    rl.close();
  }
}

/** Why a command ended with a non-zero exit code: the error's stable code and its message. */
export interface ResultError {
  code: string;
  message: string;
}

/**
 * What `plan --from-dump` could not see (the dump holds no provider namespace, kinds it holds nothing
 * of), and what a plan against Omni would add.
 */
export interface OfflineNote {
  dump: string;
  /** Kinds in `infra-provider:<id>` that the plan read nothing of (omnictl cannot dump them). */
  notSeen: string[];
  /** Kinds of the shared namespaces the dump holds nothing of: none in Omni, or not dumped. */
  emptyInDump: string[];
  notes: string[];
}

/**
 * The report of a command that got to a plan, with the error behind its exit code when it is not 0,
 * and the stage it ended in (`done` when its work finished on its own).
 */
export type Result = Report & { error?: ResultError; offline?: OfflineNote; stage?: Stage };

/**
 * The result of a command that stopped before it had a report (a refused preflight, a refused key,
 * Omni unreachable, an interruption, a usage error found after parsing): the same fields a program
 * checks first, and the error.
 */
export interface FailedResult {
  tool: 'stub-provider';
  version: string;
  command: 'run' | 'plan';
  providerId?: string;
  result: 'failed' | 'interrupted';
  exitCode: number;
  /** How far it got: the stage it was in when it stopped. */
  stage: Stage;
  error: ResultError;
  startedAt?: string;
  endedAt?: string;
  durationMs?: number;
  /** run, once it had a client: its writes by op and outcome, and how it was throttled (as a report has them). */
  writes?: Record<string, number>;
  throttling?: Throttling;
}

/** What a run that stopped with an error can still tell: its writes and how it was throttled. */
export interface RunFacts {
  writes: Record<string, number>;
  throttling: Throttling | undefined;
}

const runFacts = new WeakMap<object, RunFacts>();

/** `err`, with the facts of the run it ended (failedResult adds them to its result). */
export function withRunFacts(err: unknown, facts: RunFacts): unknown {
  if (err !== null && typeof err === 'object') runFacts.set(err, facts);
  return err;
}

function runFactsOf(err: unknown): RunFacts | undefined {
  return err !== null && typeof err === 'object' ? runFacts.get(err) : undefined;
}

export type AnyResult = Result | FailedResult;

export function failedResult(
  command: 'run' | 'plan',
  target: ResultTarget,
  err: unknown,
  stage: Stage = 'starting',
): FailedResult {
  const d = describeError(err);
  const facts = runFactsOf(err);
  return {
    tool: 'stub-provider',
    version: VERSION,
    command,
    ...(target.providerId ? { providerId: target.providerId } : {}),
    result: d.exitCode === ExitCode.SigInt || d.exitCode === ExitCode.SigTerm ? 'interrupted' : 'failed',
    exitCode: d.exitCode,
    stage,
    error: { code: d.code, message: d.message },
    ...(facts ? { writes: facts.writes, ...(facts.throttling ? { throttling: facts.throttling } : {}) } : {}),
  };
}

/**
 * The error a report's own exit code stands for (run: 5 incomplete, 130/143 interrupted), as the
 * result carries it; a result that has one already keeps it.
 */
export function withError(rep: Result): Result {
  if (rep.error || rep.exitCode === ExitCode.OK || rep.exitCode === ExitCode.ChangesPending) return rep;
  const e = errorForExit(rep.exitCode);
  return { ...rep, error: { code: e.code, message: rep.timedOut ? timedOutMessage(rep) : e.message } };
}

/** STUB_INCOMPLETE after --timeout: what it left, by the report's lists. */
function timedOutMessage(rep: Result): string {
  const left = [
    rep.remaining.length > 0 ? `${rep.remaining.length} not done` : '',
    rep.running.length > 0 ? `${rep.running.length} still in use` : '',
    rep.blocked.some((b) => b.counts) ? `${rep.blocked.filter((b) => b.counts).length} blocked` : '',
    rep.failed.length > 0 ? `${rep.failed.length} failed` : '',
  ].filter(Boolean);
  const what = left.length > 0 ? ` (${left.join(', ')})` : '';
  return `--timeout passed before everything was released${what}; see the report, and run again`;
}

function errorForExit(code: number): StubError {
  if (code === ExitCode.Incomplete)
    return new StubError(
      'STUB_INCOMPLETE',
      ExitCode.Incomplete,
      'not everything could be released (see the report); run again',
    );
  if (code === ExitCode.SigInt || code === ExitCode.SigTerm)
    return new StubError('STUB_INTERRUPTED', code, 'interrupted; calls in flight were cancelled');
  return new StubError('STUB_FAILED', code as ExitCodeValue, 'failed');
}

/**
 * The report as JSON: programs read it, a person may print it, so C1 and bidi controls are \uXXXX; no
 * secret in it (redact.ts: a value it quotes may be the key given by mistake).
 */
function reportJson(rep: AnyResult, o: { oneLine?: boolean } = {}): string {
  const safe = redactDeep(rep);
  return `${inertJson(o.oneLine ? JSON.stringify(safe) : JSON.stringify(safe, null, 2))}\n`;
}

/**
 * The result on stdout: JSON or YAML (`--output`), or the text summary. A failed result has no text
 * form: the error line on stderr says it all.
 */
export async function emitResult(rep: AnyResult, format: OutputFormat, io: Io): Promise<void> {
  // Off a terminal one line, the last of stdout: `kubectl logs job/x | tail -1 | jq` reads it.
  if (format === 'json')
    io.stdout.write(reportJson(rep, { oneLine: (io.stdout as { isTTY?: boolean }).isTTY !== true }));
  else if (format === 'yaml') io.stdout.write((await import('./yaml-output.js')).inertYaml(redactDeep(rep)));
  else if ('released' in rep) {
    const width = terminalWidth(io.stdout);
    io.stdout.write(terminalText(`${renderText(rep, { width, wrap: false })}${offlineText(rep.offline)}`, width));
  }
}

/** The columns of a terminal, to wrap text at; undefined when the stream is not one (nothing is wrapped). */
export function terminalWidth(s: NodeJS.WritableStream): number | undefined {
  const t = s as { isTTY?: boolean; columns?: number };
  return t.isTTY === true && t.columns !== undefined && t.columns > 0 ? t.columns : undefined;
}

function offlineText(o: OfflineNote | undefined): string {
  if (!o) return '';
  const lines = ['', `Offline plan from ${escapeControl(o.dump)}: nothing was asked of Omni.`];
  for (const n of o.notes) lines.push(`  - ${escapeControl(n)}`);
  return `${lines.join('\n')}\n`;
}

/**
 * Text for a person: without a secret (redact.ts), then wrapped at the terminal's width when it goes
 * to one (in this order: wrapping must not split what redaction looks for).
 */
export function terminalText(text: string, width: number | undefined): string {
  const safe = redact(text);
  return width ? wrapText(safe, width) : safe;
}

/**
 * A command's handler around its work: the result goes to stdout in `--output`'s format whether the
 * command got to a report or stopped with an error (then the error's result), and the exit code is
 * the result's. The report file is written by the command itself (see `withOutputs`).
 */
export async function handleResult(
  command: 'run' | 'plan',
  target: ResultTarget,
  io: Io,
  work: (stages: StageTracker) => Promise<Result>,
  stages: StageTracker = new StageTracker(),
): Promise<void> {
  const format = target.output;
  let rep: Result;
  try {
    rep = await work(stages);
  } catch (err) {
    if (format !== 'text')
      await emitResult(resultOfError(err) ?? failedResult(command, target, err, stages.current), format, io);
    throw err;
  }
  await emitResult(rep, format, io);
  if (rep.error) throw new StubError(rep.error.code, rep.exitCode as ExitCodeValue, rep.error.message);
  if (rep.exitCode !== ExitCode.OK) throw new ResultExit(rep.exitCode as ExitCodeValue);
}

/**
 * Runs a command's work with `--report` (and `--audit-log`) open from before anything else, and the signals
 * trapped from the start: whatever ends the work (a report, an error, SIGINT or SIGTERM), the report file
 * gets its result (docs/operator-guide.md 'The result on every exit'); a file that cannot be opened is the
 * one case without (exit 2, on stdout with --output json).
 */
export async function withOutputs(
  command: 'run' | 'plan',
  target: ResultTarget,
  io: Io,
  work: (outputs: Outputs, sig: Signals, stages: StageTracker) => Promise<Result>,
  stages: StageTracker = new StageTracker(),
): Promise<Result> {
  const sig = trapSignals(io);
  const took = stopwatch();
  try {
    const outputs = openOutputs({ report: target.reportFile, auditLog: target.auditLog, inputs: target.inputs });
    try {
      // A signal that came while the CLI was loading: the result says so, and nothing is asked of Omni.
      if (sig.signal.aborted) throw sig.signal.reason;
      const rep = withError(await work(outputs, sig, stages));
      const staged = { ...rep, stage: stages.current, ...took() };
      outputs.writeReport(staged, io);
      return staged;
    } catch (err) {
      // An error that a signal caused is the interruption, whatever the call it broke said.
      const e: unknown = sig.code() && sig.signal.aborted ? sig.signal.reason : err;
      const facts = runFactsOf(err);
      if (facts && e !== err) withRunFacts(e, facts);
      const failed = { ...failedResult(command, target, e, stages.current), ...took() };
      if (typeof e === 'object' && e !== null) failedResults.set(e, failed);
      outputs.writeReport(failed, io);
      throw e;
    } finally {
      outputs.close();
    }
  } finally {
    sig.release();
  }
}

/** The result withOutputs wrote to `--report` for an error, so that stdout gets the same one. */
const failedResults = new WeakMap<object, FailedResult>();

function resultOfError(err: unknown): FailedResult | undefined {
  return typeof err === 'object' && err !== null ? failedResults.get(err) : undefined;
}

/** When a command's work started and ended (wall clock, ISO 8601 UTC) and how long it took (monotonic). */
function stopwatch(): () => { startedAt: string; endedAt: string; durationMs: number } {
  const startedAt = new Date();
  const t0 = performance.now();
  return () => ({
    startedAt: startedAt.toISOString(),
    endedAt: new Date().toISOString(),
    durationMs: Math.round(performance.now() - t0),
  });
}

/**
 * The handler of `run` and `plan`: where the result goes is read from what yargs parsed, the outputs
 * are opened, and only then the command line is parsed into the command's configuration (`parse`),
 * so that a value it refuses (a duration, a flag given twice, a dump that is not there) has its
 * result on stdout and in `--report` like any other exit; then the command's work.
 */
export async function commandLine<G extends Parameters<typeof resultTarget>[0], C>(
  command: 'run' | 'plan',
  given: G,
  env: NodeJS.ProcessEnv,
  cli: Pick<CliContext, 'stdout' | 'stderr'>,
  parse: (given: G, env: NodeJS.ProcessEnv) => C,
  work: (c: C, io: Io, outputs: Outputs, sig: Signals, stages: StageTracker) => Promise<Result>,
): Promise<void> {
  const io = processIo(env, cli);
  const target = resultTarget(given);
  await handleResult(command, target, io, (stages) =>
    withOutputs(command, target, io, (outputs, sig) => work(parse(given, env), io, outputs, sig, stages), stages),
  );
}

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

export interface Signals {
  signal: AbortSignal;
  code: () => 130 | 143 | undefined;
  release: () => void;
}

/** SIGINT/SIGTERM abort the run (also one that came while the CLI loaded); the exit code says which (130/143). */
export function trapSignals(io: Io): Signals {
  const ac = new AbortController();
  let code: 130 | 143 | undefined;
  const onInt = () => {
    code ??= ExitCode.SigInt;
    ac.abort(new StubError('STUB_INTERRUPTED', ExitCode.SigInt, 'interrupted (SIGINT)'));
  };
  const onTerm = () => {
    code ??= ExitCode.SigTerm;
    ac.abort(new StubError('STUB_INTERRUPTED', ExitCode.SigTerm, 'interrupted (SIGTERM)'));
  };
  io.signals?.on('SIGINT', onInt);
  io.signals?.on('SIGTERM', onTerm);
  const early = io.takeEarlySignal?.();
  if (early === 'SIGINT') onInt();
  else if (early === 'SIGTERM') onTerm();
  return {
    signal: ac.signal,
    code: () => code,
    release: () => {
      io.signals?.off('SIGINT', onInt);
      io.signals?.off('SIGTERM', onTerm);
    },
  };
}
