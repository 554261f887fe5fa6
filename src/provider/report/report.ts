// src/provider/report: what a run or a plan tells the operator: the report (this file: its model,
// JSON and text) and the NDJSON audit log of every write (audit.ts).
//
// The summary of a run or a plan: released, refused, blocked (with reasons and next steps), still
// running, left behind, deregistration. The same object is printed as JSON (`--output json`) and
// written by `--report`; `renderText` is the human form. Nothing secret is ever put in it.

import { ExitCode } from '../../exit-codes.js';
import type { ExitCodeValue } from '../../exit-codes.js';
import { escapeControlIn } from '../../omni-api/untrusted.js';
import type { Operation } from '../plan/operations.js';
import { targetOf } from '../plan/operations.js';
import type { Note, Plan, PlanItem } from '../plan/plan.js';
import { immediateWrites } from '../plan/plan.js';
import type { PreflightResult } from '../run/preflight.js';
import type { ItemOutcome } from '../run/outcomes.js';
import type { ReconcileResult } from '../run/reconcile.js';
import { describeDuration } from '../plan/explain.js';
import { wrapText } from './wrap.js';

export interface ReportEntry {
  kind: string;
  id: string;
  reason?: string;
  nextStep?: string;
}

/** One planned operation (operations.ts), as `run` will perform it. */
export interface PlannedStep {
  op: Operation['op'];
  /** `namespace/type/id`, or a wipe's machine ID. */
  resource: string;
  /** remove-finalizers: the finalizers removed; wait: the ones expected to clear. */
  finalizers?: string[];
  /** remove-finalizers: at this version, in this phase only. */
  version?: string;
  phase?: string;
  /** teardown, destroy, create: as this owner. */
  owner?: string;
  /** get: what the Get of this pass answered (the item rests on it). */
  answered?: string;
  why?: string;
}

export type ReportResult = 'done' | 'nothing-to-do' | 'incomplete' | 'interrupted' | 'declined' | 'planned';

export interface Report {
  tool: 'stub-provider';
  version: string;
  command: 'run' | 'plan';
  providerId: string;
  mode: 'whole' | 'machines';
  machines: string[];
  omniVersion?: string;
  profile: { static: boolean; provisioning: boolean; reason: string; namespaceTypes: string[] };
  /** run: this run's ID, as its heartbeat, its wipe claims and its audit log lines name it. */
  runId?: string;
  /**
   * `heartbeatOurs`: written by stub-provider (any run); `concurrentRun`: another run's live
   * heartbeat, waited for until it went stale (`waitedMs`) or overridden (`forced`; design rule 7).
   */
  preflight?: {
    heartbeatAgeMs?: number;
    heartbeatOurs?: boolean;
    forced: boolean;
    concurrentRun?: { runId: string; ageMs: number; waitedMs?: number; forced?: boolean };
  };
  /** Leftovers destroyed (statuses and provider state whose machine or request was already gone). */
  cleaned: number;
  released: (ReportEntry & { wipe?: { strategy: string; outcome: string; reason?: string } })[];
  /** plan: `steps`, the Create a run makes for each request it would refuse. */
  refused: (ReportEntry & { result: string; steps?: PlannedStep[] })[];
  blocked: (ReportEntry & { counts: boolean })[];
  running: ReportEntry[];
  leftBehind: ReportEntry[];
  failed: ReportEntry[];
  /** run, with --wait: what was not done before --timeout passed (not started, or stopped before its next write). */
  remaining: ReportEntry[];
  /** run: items under way when the run was interrupted (run again), and items it never started. */
  interruptedItems: ReportEntry[];
  notStarted: ReportEntry[];
  notFound: string[];
  /** plan: finalizers of others that will keep holding what a run releases or destroys (what holds them was read). */
  waits: ReportEntry[];
  /** plan: Omni's finalizers that will let go by themselves (what their controllers wait for is absent). */
  lettingGo: ReportEntry[];
  /** plan: Omni's finalizers whose hold the provider's account cannot see, and what decides it. */
  unseen: ReportEntry[];
  /**
   * run: how long it watched, after its last write, what others still held when it was released or
   * what it left to Omni (`--settle`; ms 0: not watched), how many, how many went, how many stayed.
   */
  settle?: { ms: number; items: number; gone: number; held: number };
  /**
   * `lastStep`: what an admin runs now, given only once the provider was deregistered (deregistrationOf).
   * `lastStepAfterRun` (plan): the same command, for after a run that deregisters.
   */
  deregistration: { status: string; reasons: string[]; lastStep?: string; lastStepAfterRun?: string; warning?: string };
  planned?: {
    writes: number;
    announce: boolean;
    items: { kind: string; id: string; reason: string; steps: PlannedStep[] }[];
  };
  writes: Record<string, number>;
  /**
   * run: how much Omni (or a proxy) throttled the writes, when it did (omni-client/write/pressure.ts):
   * back-pressure answers, the wall time writes were held back, the fewest writes in flight, writes
   * sent again after a re-read showed they had not taken effect, and writes of unknown outcome that
   * a re-read showed had (not sent again). Absent when nothing was throttled or lost.
   */
  throttling?: Throttling;
  timedOut: boolean;
  interrupted: boolean;
  result: ReportResult;
  exitCode: number;
  /** When the command's work started and ended (ISO 8601, UTC), and how long it took; set by the CLI (run-io.ts). */
  startedAt?: string;
  endedAt?: string;
  durationMs?: number;
}

export interface Throttling {
  signals: number;
  /** Writes Omni refused as larger than its write burst (sent once, the run stopped: exit 6). */
  tooLarge: number;
  lostAnswers: number;
  waitedMs: number;
  minWritesInFlight: number;
  maxWritesInFlight: number;
  retriedWrites: number;
  foundApplied: number;
  gaveUp: number;
  firstSignalAt?: string;
  lastSignalAt?: string;
}

/** What the client counted (ThrottlingStats), as the report has it: only when something happened. */
export function throttlingOf(
  t:
    | (Omit<Throttling, 'firstSignalAt' | 'lastSignalAt'> & { firstSignalAt?: number; lastSignalAt?: number })
    | undefined,
): Throttling | undefined {
  if (!t || (t.signals === 0 && t.lostAnswers === 0 && t.tooLarge === 0)) return undefined;
  const at = (ms: number | undefined) => (ms !== undefined ? new Date(ms).toISOString() : undefined);
  const first = at(t.firstSignalAt);
  const last = at(t.lastSignalAt);
  return {
    signals: t.signals,
    tooLarge: t.tooLarge,
    lostAnswers: t.lostAnswers,
    waitedMs: t.waitedMs,
    minWritesInFlight: t.minWritesInFlight,
    maxWritesInFlight: t.maxWritesInFlight,
    retriedWrites: t.retriedWrites,
    foundApplied: t.foundApplied,
    gaveUp: t.gaveUp,
    ...(first ? { firstSignalAt: first } : {}),
    ...(last ? { lastSignalAt: last } : {}),
  };
}

/** "throttled: 12 signals, waited 3.4 s" (the text summary and the progress line). */
export function describeThrottling(t: Pick<Throttling, 'signals' | 'waitedMs'>): string {
  return `throttled: ${t.signals} signal${t.signals === 1 ? '' : 's'}, waited ${(t.waitedMs / 1000).toFixed(1)} s`;
}

interface Common {
  version: string;
  preflight?: PreflightResult;
}

const entry = (n: Note): ReportEntry => ({ kind: n.kind, id: n.id, reason: n.reason, nextStep: n.nextStep });

function base(plan: Plan, c: Common, command: 'run' | 'plan') {
  return {
    tool: 'stub-provider' as const,
    version: c.version,
    command,
    providerId: plan.providerId,
    mode: plan.mode,
    machines: plan.machines,
    ...((plan.omniVersion ?? c.preflight?.omniVersion)
      ? { omniVersion: plan.omniVersion ?? c.preflight?.omniVersion }
      : {}),
    profile: {
      static: plan.profile.static,
      provisioning: plan.profile.provisioning,
      reason: plan.profile.reason,
      namespaceTypes: plan.profile.namespaceTypes,
    },
    ...(c.preflight
      ? {
          preflight: {
            ...(c.preflight.heartbeat && Number.isFinite(c.preflight.heartbeat.ageMs)
              ? { heartbeatAgeMs: Math.round(c.preflight.heartbeat.ageMs), heartbeatOurs: c.preflight.heartbeat.ours }
              : {}),
            forced: c.preflight.forced,
            ...(c.preflight.concurrentRun ? { concurrentRun: c.preflight.concurrentRun } : {}),
          },
        }
      : {}),
  };
}

export function describeOp(o: Operation): PlannedStep {
  const resource = targetOf(o);
  switch (o.op) {
    case 'wipe':
      return { op: 'wipe', resource };
    case 'remove-finalizers':
      return { op: o.op, resource, finalizers: [...o.finalizers], version: o.version, phase: o.phase, why: o.why };
    case 'teardown':
    case 'destroy':
    case 'create':
      return { op: o.op, resource, owner: o.owner, why: o.why };
    case 'wait':
      return { op: o.op, resource, finalizers: [...o.finalizers], why: o.why };
    case 'get':
      return { op: o.op, resource, answered: 'NotFound', why: o.why };
    case 'check-live-provider':
      return { op: o.op, resource, why: o.why };
  }
}

/**
 * Every operation of an item in the order a run performs them (a deregistration: its check, its clean-ups, the rest).
 */
export function opsInOrder(i: PlanItem): Operation[] {
  if (i.kind !== 'deregistration' || !('cleanup' in i)) return i.ops;
  const d = i as NonNullable<Plan['deregistration']['item']>;
  return [d.check, ...d.cleanup.flatMap((c) => c.ops), ...d.ops];
}

/**
 * The last step (`omnictl infraprovider delete <id>`) only once the deregistration happened: in this
 * run, and the run finished, or in an earlier one (a plan that finds nothing of the provider left:
 * `done`). Never after a declined, incomplete or interrupted run: deleting the registration deletes
 * the provider's service account and keys with it, so the stub could not log in again to finish, and
 * on Omni before 1.4 nothing else releases the machines. A plan whose run would deregister gives the
 * command as `lastStepAfterRun`, for after that run.
 */
function deregistrationOf(plan: Plan, deregistered: boolean, result: ReportResult) {
  const d = plan.deregistration;
  const finished = result === 'done' || result === 'nothing-to-do';
  const now = finished ? deregistered || d.status === 'done' : result === 'planned' && d.status === 'done';
  const afterRun = result === 'planned' && (d.status === 'ready' || d.status === 'after-releases');
  const warning = d.warning ? { warning: d.warning } : {};
  return {
    status: deregistered ? 'deregistered' : d.status,
    reasons: deregistered ? [] : d.reasons,
    ...(now ? { lastStep: d.lastStep, ...warning } : afterRun ? { lastStepAfterRun: d.lastStep, ...warning } : {}),
  };
}

/** The report of `plan`: what a run would do now. Exit code 0. */
export function planReport(plan: Plan, c: Common): Report {
  const items = [...plan.items, ...(plan.deregistration.item ? [plan.deregistration.item] : [])];
  return {
    ...base(plan, c, 'plan'),
    cleaned: 0,
    released: [],
    refused: plan.refusals.map((r) => ({
      kind: r.kind,
      id: r.id,
      reason: r.reason,
      result: r.done ? (r.kind === 'InfraMachine' ? 'no-finalizers' : 'already-refused') : 'would-refuse',
      ...(!r.done && r.op ? { steps: [describeOp(r.op)] } : {}),
    })),
    blocked: plan.blocked.map((n) => ({ ...entry(n), counts: false })),
    running: plan.running.map(entry),
    leftBehind: plan.leftBehind.map(entry),
    failed: [],
    remaining: [],
    interruptedItems: [],
    notStarted: [],
    notFound: plan.notFound,
    waits: plan.waits.map(entry),
    lettingGo: plan.lettingGo.map(entry),
    unseen: plan.unseen.map(entry),
    deregistration: deregistrationOf(plan, false, 'planned'),
    planned: {
      writes: immediateWrites(plan),
      announce: plan.announce,
      items: items.map((i) => ({ kind: i.kind, id: i.id, reason: i.reason, steps: opsInOrder(i).map(describeOp) })),
    },
    writes: {},
    timedOut: false,
    interrupted: false,
    result: 'planned',
    exitCode: ExitCode.OK,
  };
}

/** The report of `run`. `interruptCode` is 130 or 143 when a signal stopped it. */
export function runReport(
  r: ReconcileResult,
  c: Common & { writes: Record<string, number>; throttling?: Throttling | undefined; interruptCode?: ExitCodeValue },
): Report {
  const plan = r.lastPlan;
  const released = r.outcomes.filter(
    (o) => o.status === 'released' && o.kind !== 'leftover' && o.kind !== 'deregistration',
  );
  const cleaned = r.outcomes.filter((o) => o.status === 'released' && o.kind === 'leftover').length;
  const held = released.filter((o) => o.heldBy && o.heldBy.length > 0);
  const blocked = r.outcomes.filter((o) => o.status === 'blocked');
  const failed = r.outcomes.filter((o) => o.status === 'failed');
  const byStatus = (status: 'interrupted' | 'not-started') =>
    r.outcomes
      .filter((o) => o.status === status)
      .map((o) => ({ kind: o.kind, id: o.id, reason: o.reason ?? '', nextStep: o.nextStep ?? '' }));
  const failedRefusals = r.refusals.filter((x) => x.result === 'failed');
  // A timeout is incomplete when it left something: work not done, or (--wait) machines still in use. Everything
  // released and deregistered within the grace after --timeout is done (deadline.ts).
  const timedOutWith = r.timedOut && (r.remaining.length > 0 || plan.running.length > 0);
  const incomplete = timedOutWith || failed.length > 0 || failedRefusals.length > 0 || blocked.some((b) => b.counts);
  const anything =
    released.length > 0 ||
    cleaned > 0 ||
    r.refusals.some((x) => x.result === 'refused') ||
    r.deregistered ||
    r.announced;
  let result: ReportResult;
  let exitCode: number;
  if (r.interrupted) [result, exitCode] = ['interrupted', c.interruptCode ?? ExitCode.SigInt];
  else if (r.takenOver) [result, exitCode] = ['incomplete', ExitCode.Incomplete];
  // Declined: nothing was written, and the changes the plan showed are still pending (plan's 10).
  else if (r.declined) [result, exitCode] = ['declined', ExitCode.ChangesPending];
  else if (incomplete) [result, exitCode] = ['incomplete', ExitCode.Incomplete];
  else [result, exitCode] = [anything ? 'done' : 'nothing-to-do', ExitCode.OK];
  // Blockers of the last plan that the run did not already report (Omni's own, Machines in use).
  // What the run released and watched afterwards has the settle's word, which came later.
  const seen = new Set([...blocked, ...released.filter((o) => o.heldBy || o.settle)].map((b) => `${b.kind}/${b.id}`));
  return {
    // The header's profile is what the first pass found: later passes no longer see what it released.
    ...base(r.firstPlan, c, 'run'),
    runId: r.runId,
    cleaned,
    released: released.map((o) => ({
      kind: o.kind,
      id: o.id,
      ...(o.wipe
        ? {
            wipe: {
              strategy: o.wipe.strategy,
              outcome: o.wipe.outcome,
              ...(o.wipe.reason ? { reason: o.wipe.reason } : {}),
            },
          }
        : {}),
    })),
    refused: [
      ...r.refusals.map((x) => ({
        kind: x.kind,
        id: x.id,
        reason: x.error ? `${x.reason}: ${x.error}` : x.reason,
        result: x.result,
      })),
    ],
    blocked: [
      ...blocked.map((o) => ({
        kind: o.kind,
        id: o.id,
        reason: blockedReason(o),
        nextStep: o.nextStep ?? '',
        counts: o.counts,
      })),
      ...held.map((o) => ({
        kind: o.kind,
        id: o.id,
        reason: blockedReason(o),
        nextStep: o.nextStep ?? '',
        counts: false,
      })),
      ...plan.blocked.filter((n) => !seen.has(`${n.kind}/${n.id}`)).map((n) => ({ ...entry(n), counts: false })),
    ],
    running: plan.running.map(entry),
    leftBehind: dedupe([...r.firstPlan.leftBehind, ...plan.leftBehind].map(entry)),
    failed: [
      ...failed.map((o) => ({ kind: o.kind, id: o.id, reason: o.reason ?? '', nextStep: o.nextStep ?? '' })),
      ...failedRefusals.map((x) => ({ kind: x.kind, id: x.id, reason: x.error ?? '', nextStep: 'run again' })),
    ],
    remaining: r.remaining.map((x) => ({ ...x })),
    interruptedItems: byStatus('interrupted'),
    notStarted: byStatus('not-started'),
    notFound: r.firstPlan.notFound,
    waits: [],
    lettingGo: [],
    unseen: [],
    settle: r.settle,
    deregistration: deregistrationOf(plan, r.deregistered, result),
    writes: c.writes,
    ...(c.throttling ? { throttling: c.throttling } : {}),
    timedOut: r.timedOut,
    interrupted: r.interrupted,
    result,
    exitCode,
  };
}

/**
 * Why an item is in Blocked. For what the run released while others still held it, which came last:
 * the release, then what the settle saw after it (or that it did not watch).
 */
function blockedReason(o: ItemOutcome): string {
  const why = o.reason ?? '';
  const s = o.settle;
  const after = !s
    ? `still held by ${why}`
    : s.outcome === 'held'
      ? `still held after ${describeDuration(s.ms)} by ${why}`
      : s.outcome === 'not-watched'
        ? `still held when last read by ${why} (--settle 0: not watched after the last write)`
        : s.outcome === 'watch-failed'
          ? `still held when last read by ${why} (watching it after the last write failed: ` +
            `${s.error ?? 'unknown error'})`
          : why;
  if (o.status === 'released') return `released by stub-provider; ${after}`;
  return o.heldBy ? `being deleted, nothing of ours left on it; ${after}` : why;
}

function dedupe(xs: ReportEntry[]): ReportEntry[] {
  const seen = new Set<string>();
  return xs.filter((x) => {
    const k = `${x.kind}/${x.id}/${x.reason}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

const LIST_LIMIT = 20;

/**
 * The human summary. Every string of the report is escaped first (design rule 13): IDs, finalizers,
 * reasons and Omni's messages come from the server, and a control character in one of them could
 * clear the screen or forge a line of this summary. `width`: the terminal's columns, to wrap at
 * (between words); absent off a terminal, where nothing is wrapped. `wrap: false`: laid out for that
 * width (the step chains) but left for the caller to wrap (after redaction, run-io.ts terminalText).
 */
export function renderText(report: Report, o: { width?: number; wrap?: boolean } = {}): string {
  const rep = escapeControlIn(report);
  const out: string[] = [];
  const head = rep.command === 'plan' ? 'Plan (nothing was changed)' : `Result: ${rep.result}`;
  out.push(
    `stub-provider ${rep.version} — provider ${rep.providerId} ` +
      `(${rep.mode === 'whole' ? 'whole provider' : `machines: ${rep.machines.join(', ')}`}), ` +
      `${rep.omniVersion ? `Omni ${rep.omniVersion}` : 'Omni version unknown (SysVersion not readable)'}`,
  );
  out.push(`${head}; profile ${rep.profile.reason}`);
  const section = (title: string, xs: ReportEntry[], fmt: (x: ReportEntry) => string) => {
    if (xs.length === 0) return;
    out.push('', `${title} (${xs.length}):`);
    for (const x of xs.slice(0, LIST_LIMIT)) out.push(`  - ${fmt(x)}`);
    if (xs.length > LIST_LIMIT) out.push(`  … and ${xs.length - LIST_LIMIT} more (see --output json or --report)`);
  };
  const withNext = (x: ReportEntry) =>
    `${x.kind} ${x.id}: ${x.reason ?? ''}${x.nextStep ? `\n      next: ${x.nextStep}` : ''}`;
  if (rep.planned) {
    out.push(
      '',
      `Would write ${rep.planned.writes} change(s) ` +
        `now${rep.planned.announce ? ', announce stub mode and send heartbeats' : ''}.`,
    );
    section(
      'Would release or clean',
      rep.planned.items.map((i) => ({ kind: i.kind, id: i.id, reason: chain(i, o.width) })),
      (x) => `${x.kind} ${x.id}: ${x.reason}`,
    );
    section('Will wait for Omni', rep.waits, withNext);
    section('Omni lets go by itself', rep.lettingGo, withNext);
    section("Cannot be seen with the provider's account (Omni decides)", rep.unseen, withNext);
  }
  section('Released', rep.released, (x) => `${x.kind} ${x.id}`);
  if (rep.cleaned > 0)
    out.push('', `Cleaned up ${rep.cleaned} leftover resource(s) whose machine or request was already gone.`);
  section('Refused', rep.refused, (x) => `${x.kind} ${x.id}: ${x.reason}`);
  const st = rep.settle;
  if (st && st.items > 0)
    out.push(
      '',
      st.ms > 0
        ? `Watched for up to ${describeDuration(st.ms)} after the last write (--settle) the ${st.items} item(s) ` +
            `others still held: ${st.gone} gone, ${st.held} still held.`
        : `Not watched after the last write (--settle 0): ${st.items} item(s) others still held are reported as last ` +
            `read.`,
    );
  const th = rep.throttling;
  if (th) {
    out.push(
      '',
      `Omni ${describeThrottling(th)} (writes in flight down to ${th.minWritesInFlight} of ${th.maxWritesInFlight}); ` +
        (`${th.retriedWrites} write(s) sent again after a re-read, ${th.foundApplied} found applied on re-read and ` +
          `not sent again`) +
        `${th.lostAnswers ? `, ${th.lostAnswers} answer(s) lost` : ''}${
          th.gaveUp ? `; ${th.gaveUp} write(s) given ` + `up (STUB_THROTTLED)` : ''
        }.`,
    );
  }
  section('Blocked', rep.blocked, withNext);
  section('Failed', rep.failed, withNext);
  section('Not done before --timeout', rep.remaining, withNext);
  section('Interrupted (under way when the signal came; run again)', rep.interruptedItems, (x) => `${x.kind} ${x.id}`);
  section('Not started (the signal came first; run again)', rep.notStarted, (x) => `${x.kind} ${x.id}`);
  section('Still running (untouched)', rep.running, withNext);
  section('Left behind', rep.leftBehind, withNext);
  if (rep.notFound.length) out.push('', `Not found (nothing to do): ${rep.notFound.join(', ')}`);
  const d = rep.deregistration;
  const more = d.reasons.length > 5 ? `; … ${d.reasons.length - 5} more` : '';
  const reasons = d.reasons.length ? ` — ${d.reasons.slice(0, 5).join('; ')}${more}` : '';
  out.push('', `Deregistration: ${d.status}${reasons}`);
  if (d.lastStep) out.push(`Last step, for an admin: ${d.lastStep}`);
  else if (d.lastStepAfterRun)
    out.push(`Last step, for an admin, once a run has deregistered the provider (not before): ${d.lastStepAfterRun}`);
  if (d.warning && (d.lastStep || d.lastStepAfterRun)) out.push(`Warning: ${d.warning}`);
  if (rep.timedOut) out.push('', 'Timed out before everything was released (--timeout).');
  if (rep.interrupted) out.push('', 'Interrupted: calls in flight were cancelled; run again to finish.');
  if (rep.durationMs !== undefined) out.push('', `Took ${describeDuration(rep.durationMs)}.`);
  out.push(...whatNext(rep));
  // On a terminal, wrapped at its width between words; elsewhere one item per line (o.width absent).
  const text = `${out.join('\n')}\n`;
  return o.width && o.wrap !== false ? wrapText(text, o.width) : text;
}

/**
 * What to do after a run that did not end with the last step (deregistrationOf says when it does):
 * the next command, and why the registration must stay until a run has deregistered the provider.
 */
function whatNext(rep: Report): string[] {
  if (rep.command !== 'run' || rep.deregistration.lastStep) return [];
  const out: string[] = [];
  const st = rep.deregistration.status;
  if (rep.result === 'declined')
    out.push('', 'Next: nothing was changed; run again and answer y, or see `stub-provider plan`.');
  else if (rep.result === 'incomplete')
    out.push(
      '',
      'Next: not everything was released (the reasons are above); run again: it carries on where this run stopped.',
    );
  else if (rep.result !== 'interrupted' && (st === 'ready' || st === 'after-releases'))
    out.push('', 'Next: run again to deregister (Omni had not yet destroyed what this run released).');
  if (rep.mode === 'whole' && st !== 'disabled' && st !== 'done') {
    out.push(
      `Keep the registration until a run reports "Deregistration: deregistered": \`omnictl infraprovider delete ` +
        `${rep.providerId}\` deletes the provider's service account and keys, so the stub could not log in again ` +
        'to finish (and before Omni 1.4 nothing else releases its machines).',
    );
  }
  return out;
}

const CHAIN_INDENT = '      ';

/**
 * A planned item's reason and its steps in order; a step on a resource of the item's own ID names
 * only the type. On a terminal (`width`), a chain that does not fit on the item's row goes below it,
 * indented, broken between steps; elsewhere it stays on the item's line.
 */
function chain(i: NonNullable<Report['planned']>['items'][number], width: number | undefined): string {
  const steps = i.steps.map((s) => {
    const name = s.resource ? shortName(s.resource, i.id) : '';
    const detail =
      s.op === 'wait' ? ` (for ${s.finalizers?.join(', ') ?? ''})` : s.op === 'get' ? ` (${s.answered ?? ''})` : '';
    return `${s.op}${name ? ` ${name}` : ''}${detail}`;
  });
  const one = `${i.reason}: ${steps.join(' → ')}`;
  if (width === undefined || `  - ${i.kind} ${i.id}: ${one}`.length <= width) return one;
  const lines: string[] = [];
  for (const [n, st] of steps.entries()) {
    const piece = n === 0 ? st : `→ ${st}`;
    const last = lines.at(-1);
    if (last !== undefined && CHAIN_INDENT.length + last.length + 1 + piece.length <= width)
      lines[lines.length - 1] = `${last} ${piece}`;
    else lines.push(piece);
  }
  return `${i.reason}:${lines.map((l) => `\n${CHAIN_INDENT}${l}`).join('')}`;
}

/**
 * `namespace/Type.group/id` -> `Type/id` (`Type` when the ID is the item's own), for the terminal;
 * a wipe's resource is a machine ID (none shown when it is the item's own).
 */
function shortName(resource: string, itemId: string): string {
  if (!resource.includes('/')) return resource === itemId ? '' : resource;
  const [, type = '', ...rest] = resource.split('/');
  const id = rest.join('/');
  const short = type.split('.')[0] ?? type;
  return id === itemId ? short : `${short}/${id}`;
}
