// What `run` and `plan` hand back on every exit: a report, or the result of a command that stopped before it had
// one (FailedResult), with the error behind a non-zero exit code and the facts a failed run can still tell; and
// the JSON form both take on stdout and in --report. Apart as the model that the handler (run-io.ts) and the
// output files (output-files.ts) both write.

import { describeError, ExitCode, StubError } from '../exit-codes.js';
import type { ExitCodeValue } from '../exit-codes.js';
import type { Report, Throttling } from '../provider/report/report.js';
import type { Stage } from '../provider/run/stage.js';
import { inertJson } from '../omni-api/untrusted.js';
import { redactDeep } from '../redact.js';
import { VERSION } from '../version.js';
import type { ResultTarget } from './provider-options.js';

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

export function runFactsOf(err: unknown): RunFacts | undefined {
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
export function reportJson(rep: AnyResult, o: { oneLine?: boolean } = {}): string {
  const safe = redactDeep(rep);
  return `${inertJson(o.oneLine ? JSON.stringify(safe) : JSON.stringify(safe, null, 2))}\n`;
}
