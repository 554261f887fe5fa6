// The handler of `run` and `plan` around their work: the outputs opened and the signals trapped first, then the
// command line parsed, then the work; whatever ends it (a report, an error, a signal), its result goes to
// --report and to stdout in --output's format, and a non-zero result becomes the error that cli.ts maps to the
// exit code. The result itself is result.ts; the files output-files.ts; the process process-io.ts.

import { ExitCode, ResultExit, StubError } from '../exit-codes.js';
import type { ExitCodeValue } from '../exit-codes.js';
import { StageTracker } from '../provider/run/stage.js';
import { renderText } from '../provider/report/text.js';
import { wrapText } from '../provider/report/wrap.js';
import { escapeControl } from '../omni-api/untrusted.js';
import { redact, redactDeep } from '../redact.js';
import type { CliContext } from './options.js';
import type { Io, OutputFormat, ResultTarget } from './provider-options.js';
import { resultTarget } from './provider-options.js';
import { openOutputs } from './output-files.js';
import type { Outputs } from './output-files.js';
import { processIo, trapSignals } from './process-io.js';
import type { Signals } from './process-io.js';
import { failedResult, reportJson, runFactsOf, withError, withRunFacts } from './result.js';
import type { AnyResult, FailedResult, OfflineNote, Result } from './result.js';

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
