// `stub-provider [run]` (the default command): release what is being deleted, refuse new machines,
// deregister. See docs/design.md; the work is in src/provider.

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ExitCode, UsageError } from '../exit-codes.js';
import { addSecret } from '../redact.js';
import { VERSION } from '../version.js';
import { createWipeStrategy, wipeCliOptions, wipeOptionsFrom } from '../wipe/index.js';
import type { WipeOptions } from '../wipe/index.js';
import { Audit } from '../provider/report/audit.js';
import { preflight } from '../provider/run/preflight.js';
import { reconcile } from '../provider/run/reconcile.js';
import { planReport } from '../provider/report/plan-report.js';
import { throttlingOf } from '../provider/report/report.js';
import type { Report } from '../provider/report/report.js';
import { runReport } from '../provider/report/run-report.js';
import { renderText } from '../provider/report/text.js';
import type { PreflightResult } from '../provider/run/preflight.js';
import type { ReconcileOptions, ReconcileResult } from '../provider/run/contract.js';
import type { Plan } from '../provider/plan/plan.js';
import type { OmniClient } from '../omni-client/client.js';
import { parseDuration, parseDurationOrZero } from './durations.js';
import { defineCommand, once } from './options.js';
import type { Given, OptionTable } from './options.js';
import { checkMachinesMatched, connect, connectionConfig, connectionOptions, loggerFor } from './provider-options.js';
import type { ConnectionConfig, Io } from './provider-options.js';
import { progressFor, showStages } from './progress.js';
import type { ProgressLine } from './progress.js';
import type { Outputs } from './output-files.js';
import type { Signals } from './process-io.js';
import { withRunFacts } from './result.js';
import type { Result } from './result.js';
import { commandLine, terminalText, terminalWidth, withOutputs } from './run-io.js';
import type { StageTracker } from '../provider/run/stage.js';

export const runOptions = {
  ...connectionOptions,
  wait: {
    type: 'boolean',
    default: false,
    describe: 'Keep watching and releasing until everything is released (and the provider deregistered) or --timeout',
    group: 'Run:',
  },
  timeout: {
    type: 'string',
    default: '10m',
    describe:
      'With --wait: the run ends after this long (e.g. 90s, 10m, 1h30m; at most 596h): no write starts after it, ' +
      'the report lists what is left, exit 5 (everything released by then: deregistered within 10 s, exit 0); ' +
      '0: no limit, until everything is gone',
    group: 'Run:',
  },
  'step-timeout': {
    type: 'string',
    default: '60s',
    describe:
      'Without --wait: how long to wait for Omni to clear its own finalizers after a teardown (e.g. 60s, 2m30s)',
    group: 'Run:',
  },
  settle: {
    type: 'string',
    default: '5s',
    describe:
      "After the last write: how long to watch what finalizers of others still held when it was released, for Omni's " +
      'own controllers to let go (0: do not watch); Blocked lists what is still held then',
    group: 'Run:',
  },
  deregister: {
    type: 'boolean',
    default: true,
    describe:
      "Once nothing of the ID is left, clean up and deregister (--no-deregister to keep the provider's statuses)",
    group: 'Run:',
  },
  yes: {
    type: 'boolean',
    default: false,
    alias: 'y',
    describe: 'Make the changes without asking (required when stdin is not a terminal)',
    group: 'Run:',
  },
  force: {
    type: 'boolean',
    default: false,
    describe:
      'Run although a live provider with this ID sent a heartbeat in the last 60 s, or take over from another ' +
      'stub-provider run (without waiting for its heartbeat to go stale)',
    group: 'Run:',
  },
  'audit-log': {
    type: 'string',
    describe:
      'Append two NDJSON lines per write to Omni: its intent before it is sent (resource, finalizers and version ' +
      'before, what it asks for) and its outcome (ok, failed, unknown)',
    group: 'Output:',
  },
  ...wipeCliOptions,
} as const satisfies OptionTable;

/** What `run` runs with: the command line parsed once (parseRun), every value checked. */
export interface RunConfig extends ConnectionConfig {
  wait: boolean;
  /** `--timeout`: how long --wait may keep going; Infinity for no limit (0). */
  timeoutMs: number;
  /** `--step-timeout`: how long to wait for Omni's own finalizers after a teardown. */
  stepTimeoutMs: number;
  /** `--settle`: how long to watch what others still held after the last write; 0: not at all. */
  settleMs: number;
  deregister: boolean;
  yes: boolean;
  force: boolean;
  wipe: WipeOptions;
}

/** `run`'s command line as yargs parsed it, checked: a UsageError names the first value that cannot be used. */
export function parseRun(given: Given<typeof runOptions>, env: NodeJS.ProcessEnv): RunConfig {
  const a = once(runOptions, given);
  return {
    ...connectionConfig(a, env),
    wait: a.wait,
    // No limit (0) only with --wait: a stand-in left running until everything is gone.
    timeoutMs: parseDuration(a.timeout, '--timeout', { zeroMeansNone: true }),
    stepTimeoutMs: parseDuration(a['step-timeout'], '--step-timeout'),
    settleMs: parseDurationOrZero(a.settle, '--settle'),
    deregister: a.deregister,
    yes: a.yes,
    force: a.force,
    wipe: wipeOptionsFrom(a, parseDuration),
  };
}

/**
 * `run`: the outputs opened and the signals trapped first, then everything else (withOutputs). The
 * result is the report, or an error with its result in `--report`.
 */
export function executeRun(c: RunConfig, io: Io): Promise<Result> {
  return withOutputs('run', c.target, io, (outputs, sig, stages) => run(c, io, outputs, sig, stages));
}

async function run(c: RunConfig, io: Io, outputs: Outputs, sig: Signals, stages: StageTracker): Promise<Result> {
  const { progress, log } = runLogging(c, io);
  // What it is doing, from the first second: on the progress line, or one log line per phase.
  const unsubscribe = showStages(stages, progress, log);
  stages.enter('preflight');
  // One ID for the run: its heartbeat, its wipe claims, its audit log lines and its report name it.
  const runId = randomUUID();
  // Every write is a debug line, on a terminal or not: `--audit-log` records each one, and a Job's log
  // at the default level stays one line per machine (26 000 lines for 2 700 machines otherwise).
  const audit = new Audit(outputs.auditSink, Date.now, log, runId, { writeLogLevel: 'debug' });
  // A write throttled by Omni is retried for --step-timeout at most (what --timeout allows with --wait).
  const client = await connect(c, io, log, audit.observer, {
    maxWaitMs: c.wait && Number.isFinite(c.timeoutMs) ? c.timeoutMs : c.stepTimeoutMs,
  }).catch((err: unknown) => {
    unsubscribe();
    progress?.done();
    throw err;
  });
  if (progress) progress.throttling = () => client.throttling();
  let failed: { err: unknown } | undefined;
  let pre: PreflightResult | undefined;
  let result: ReconcileResult | undefined;
  try {
    const now = () => Date.now() + client.serverClockOffsetMs();
    pre = await runPreflight(c, client, log, now, sig.signal);
    const strategy = createWipeStrategy(c.wipe, { logger: log });
    result = await reconcile(
      {
        state: client.state,
        logger: log,
        version: VERSION,
        now,
        wipe: { strategy, options: c.wipe },
        stage: stages.enter,
        onSecret: addSecret,
        runId,
        ...(progress ? { progress: (p, ended) => progress.update(p, ended), itemLogLevel: 'debug' as const } : {}),
      },
      reconcileOptions(c, sig.signal, confirmation(c, io, progress, pre)),
    );
  } catch (err) {
    failed = { err };
  } finally {
    unsubscribe();
    progress?.done();
    // Closing the client cancels what is still in flight; the audit log then gives each write
    // still unanswered its outcome (unknown) before the report counts them.
    await client.close();
    audit.close(endingOf(sig.code(), failed !== undefined));
  }
  // A run that stopped with an error still says what it wrote and how it was throttled (its result).
  // (Both are set when nothing failed.)
  const facts = { writes: audit.counts, throttling: throttlingOf(client.throttling()) };
  if (failed || !pre || !result) throw withRunFacts(failed?.err, facts);
  const interruptCode = sig.code();
  if (!result.interrupted) checkMachinesMatched(c, result.firstPlan.notFound, log, { strict: false });
  return withTakeOver(
    result,
    runReport(result, { version: VERSION, preflight: pre, ...facts, ...(interruptCode ? { interruptCode } : {}) }),
  );
}

/**
 * The run's progress line and logger. On a terminal, log lines go through the progress line so that it stays
 * below them, and the per-write and per-item lines are debug: the progress line shows one short line per machine.
 */
function runLogging(c: RunConfig, io: Io): { progress: ProgressLine | undefined; log: Logger } {
  const progress = progressFor(c, io);
  const log = progress
    ? loggerFor({ ...c, logFormat: 'pretty' }, { ...io, stderr: progress.logStream })
    : loggerFor(c, io);
  return { progress, log };
}

/** The preflight checks (design rule 7), and what they found said in the log. */
async function runPreflight(
  c: RunConfig,
  client: OmniClient,
  log: Logger,
  now: () => number,
  signal: AbortSignal,
): Promise<PreflightResult> {
  const pre = await preflight({
    state: client.state,
    providerId: c.id,
    keyProviderId: client.providerId,
    keyName: client.identity.name,
    force: c.force,
    now,
    signal,
    // Whole-provider runs write a heartbeat, and wait for another run's (design rule 7).
    ...(c.machines.length === 0 ? { waitForOtherRun: { log } } : {}),
  });
  if (pre.concurrentRun?.forced)
    log.warn(
      { providerId: c.id, otherRun: pre.concurrentRun.runId },
      'another stub-provider run sent a heartbeat in the last 60 s; taking over from it (--force)',
    );
  else if (pre.concurrentRun)
    log.info(
      { providerId: c.id, otherRun: pre.concurrentRun.runId, waitedMs: pre.concurrentRun.waitedMs },
      "the other run's heartbeat went stale: going on",
    );
  if (pre.forced) log.warn({ providerId: c.id }, 'a live provider with this ID was detected; running anyway (--force)');
  log.info(
    {
      providerId: c.id,
      endpoint: client.endpoint,
      omniVersion: pre.omniVersion,
      mode: c.machines.length ? 'machines' : 'whole',
    },
    'preflight passed',
  );
  return pre;
}

/** What the run's configuration asks of reconcile. */
function reconcileOptions(
  c: RunConfig,
  signal: AbortSignal,
  confirm: (plan: Plan) => Promise<boolean>,
): ReconcileOptions {
  return {
    providerId: c.id,
    machines: c.machines,
    profile: c.profile,
    stateTypes: c.stateTypes,
    deregister: c.deregister,
    wait: c.wait,
    timeoutMs: c.timeoutMs,
    omniWaitMs: c.stepTimeoutMs,
    settleMs: c.settleMs,
    concurrency: c.concurrency,
    signal,
    force: c.force,
    confirm,
  };
}

/** The question before the first write: --yes answers it; otherwise the plan is shown and a person on stdin asked. */
function confirmation(
  c: RunConfig,
  io: Io,
  progress: ProgressLine | undefined,
  pre: PreflightResult,
): (plan: Plan) => Promise<boolean> {
  return async (plan) => {
    if (c.yes) return true;
    if (!io.stdinIsTTY || !io.ask)
      throw new UsageError(
        'this run would change Omni: pass --yes (stdin is not a terminal, so there is nobody to ask); ' +
          '`stub-provider plan` shows what would change',
      );
    progress?.pause();
    const width = terminalWidth(io.stderr);
    io.stderr.write(
      terminalText(renderText(planReport(plan, { version: VERSION, preflight: pre }), { width, wrap: false }), width),
    );
    return io.ask(`Make these changes${c.wait ? ' and keep watching' : ''}? [y/N] `);
  };
}

/** The audit log's last line: how the run ended. */
function endingOf(code: number | undefined, failed: boolean): string {
  if (code) return `interrupted (${code === ExitCode.SigInt ? 'SIGINT' : 'SIGTERM'})`;
  return failed ? 'the run failed' : 'the run ended';
}

/** A run taken over by another (design rule 7) carries that error in its report. */
function withTakeOver(result: ReconcileResult, rep: Report): Result {
  const over = result.takenOver;
  return over && !result.interrupted ? { ...rep, error: { code: over.code, message: over.message } } : rep;
}

export const runCommand = defineCommand({
  command: ['run', '$0'],
  describe:
    'Release what the gone provider blocks: finish deletions under way, refuse new machines, deregister (default ' +
    'command)',
  options: runOptions,
  examples: [
    [
      'OMNI_ENDPOINT=https://omni.example.com OMNI_SERVICE_ACCOUNT_KEY=... $0 --id bare-metal --yes',
      'Release every machine of bare-metal that is being deleted, clean up, and deregister',
    ],
    [
      '$0 --id bare-metal --machine 0b1c7f9e-... --yes',
      'Release one machine; the provider stays registered for when it comes back',
    ],
    [
      '$0 --id kubevirt --profile provisioning --state-type Machine --wait --timeout 30m --yes',
      'Stand in for a provisioning provider until every request is released',
    ],
    [
      '$0 --id bare-metal --wipe ipmi-power-off --yes --output json --report report.json --audit-log audit.ndjson',
      'Power machines off through their BMC first; keep a JSON report and an audit log',
    ],
    ['$0 plan --id bare-metal', 'Show what a run would change, without changing anything'],
  ],
  epilogue:
    'Exit codes: 0 done or nothing to do; 2 usage; 3 preflight refused (not registered, live provider, another ' +
    "run); 4 authentication; 5 incomplete (retry); 6 a write larger than Omni's write burst (an Omni admin must " +
    'raise it; do not retry); 10 declined at the prompt (nothing was written; the changes the plan showed are ' +
    'still pending, as plan exits 10); 130/143 interrupted. ' +
    "With --output json or yaml, and in --report, every exit has its result, with the error's code and message. " +
    'Every flag can also be set as STUB_PROVIDER_<FLAG> (e.g. STUB_PROVIDER_ID, STUB_PROVIDER_NO_DEREGISTER=true).',
  parse: parseRun,
  handler: (given, env, cli) => commandLine('run', given, env, cli, parseRun, run),
});
