// The report of `run` (report.ts has its shape): what the run found and did, from its outcomes and
// its last plan. Its result and exit code are decided here (done, nothing to do, incomplete,
// interrupted, declined), and so is what Blocked lists: the run's own blocked items, what it released
// while others still held it (with what the settle saw after the last write), and the last plan's
// blockers that no outcome reported. Apart from the plan's report: it reads the run, not only a plan.

import { ExitCode } from '../../exit-codes.js';
import type { ExitCodeValue } from '../../exit-codes.js';
import { describeDuration } from '../plan/explain.js';
import type { Plan } from '../plan/plan.js';
import type { ItemOutcome } from '../run/outcomes.js';
import type { ReconcileResult } from '../run/contract.js';
import type { Report, ReportEntry, ReportInputs, ReportResult, Throttling } from './report.js';
import { deregistrationOf, noteEntry, reportHeader } from './report.js';

/** The run's outcomes, sorted as the report lists them. */
interface Sorted {
  /** Released machines, requests and BMCConfigs (leftovers and the deregistration are counted apart). */
  released: ItemOutcome[];
  /** Leftovers destroyed. */
  cleaned: number;
  /** Released while finalizers of others still held them. */
  held: ItemOutcome[];
  blocked: ItemOutcome[];
  failed: ItemOutcome[];
  failedRefusals: ReconcileResult['refusals'];
}

/** The report of `run`. `interruptCode` is 130 or 143 when a signal stopped it. */
export function runReport(
  r: ReconcileResult,
  c: ReportInputs & {
    writes: Record<string, number>;
    throttling?: Throttling | undefined;
    interruptCode?: ExitCodeValue;
  },
): Report {
  const plan = r.lastPlan;
  const s = sortOutcomes(r);
  const [result, exitCode] = resultOf(r, s, c.interruptCode);
  return {
    // The header's profile is what the first pass found: later passes no longer see what it released.
    ...reportHeader(r.firstPlan, c, 'run'),
    runId: r.runId,
    cleaned: s.cleaned,
    released: s.released.map(releasedEntry),
    refused: [
      ...r.refusals.map((x) => ({
        kind: x.kind,
        id: x.id,
        reason: x.error ? `${x.reason}: ${x.error}` : x.reason,
        result: x.result,
      })),
    ],
    blocked: blockedEntries(s, plan),
    running: plan.running.map(noteEntry),
    leftBehind: dedupe([...r.firstPlan.leftBehind, ...plan.leftBehind].map(noteEntry)),
    failed: [
      ...s.failed.map((o) => ({ kind: o.kind, id: o.id, reason: o.reason ?? '', nextStep: o.nextStep ?? '' })),
      ...s.failedRefusals.map((x) => ({ kind: x.kind, id: x.id, reason: x.error ?? '', nextStep: 'run again' })),
    ],
    remaining: r.remaining.map((x) => ({ ...x })),
    interruptedItems: byStatus(r, 'interrupted'),
    notStarted: byStatus(r, 'not-started'),
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

function sortOutcomes(r: ReconcileResult): Sorted {
  const released = r.outcomes.filter(
    (o) => o.status === 'released' && o.kind !== 'leftover' && o.kind !== 'deregistration',
  );
  return {
    released,
    cleaned: r.outcomes.filter((o) => o.status === 'released' && o.kind === 'leftover').length,
    held: released.filter((o) => o.heldBy && o.heldBy.length > 0),
    blocked: r.outcomes.filter((o) => o.status === 'blocked'),
    failed: r.outcomes.filter((o) => o.status === 'failed'),
    failedRefusals: r.refusals.filter((x) => x.result === 'failed'),
  };
}

/** The run's result and its exit code. */
function resultOf(r: ReconcileResult, s: Sorted, interruptCode: ExitCodeValue | undefined): [ReportResult, number] {
  // A timeout is incomplete when it left something: work not done, or (--wait) machines still in use. Everything
  // released and deregistered within the grace after --timeout is done (deadline.ts).
  const timedOutWith = r.timedOut && (r.remaining.length > 0 || r.lastPlan.running.length > 0);
  const incomplete =
    timedOutWith || s.failed.length > 0 || s.failedRefusals.length > 0 || s.blocked.some((b) => b.counts);
  const anything =
    s.released.length > 0 ||
    s.cleaned > 0 ||
    r.refusals.some((x) => x.result === 'refused') ||
    r.deregistered ||
    r.announced;
  if (r.interrupted) return ['interrupted', interruptCode ?? ExitCode.SigInt];
  if (r.takenOver) return ['incomplete', ExitCode.Incomplete];
  // Declined: nothing was written, and the changes the plan showed are still pending (plan's 10).
  if (r.declined) return ['declined', ExitCode.ChangesPending];
  if (incomplete) return ['incomplete', ExitCode.Incomplete];
  return [anything ? 'done' : 'nothing-to-do', ExitCode.OK];
}

function releasedEntry(o: ItemOutcome): Report['released'][number] {
  return {
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
  };
}

/** Blocked: the run's blocked items, what it released while others held it, the last plan's other blockers. */
function blockedEntries(s: Sorted, plan: Plan): Report['blocked'] {
  // Blockers of the last plan that the run did not already report (Omni's own, Machines in use).
  // What the run released and watched afterwards has the settle's word, which came later.
  const seen = new Set(
    [...s.blocked, ...s.released.filter((o) => o.heldBy || o.settle)].map((b) => `${b.kind}/${b.id}`),
  );
  return [
    ...s.blocked.map((o) => ({
      kind: o.kind,
      id: o.id,
      reason: blockedReason(o),
      nextStep: o.nextStep ?? '',
      counts: o.counts,
    })),
    ...s.held.map((o) => ({
      kind: o.kind,
      id: o.id,
      reason: blockedReason(o),
      nextStep: o.nextStep ?? '',
      counts: false,
    })),
    ...plan.blocked.filter((n) => !seen.has(`${n.kind}/${n.id}`)).map((n) => ({ ...noteEntry(n), counts: false })),
  ];
}

function byStatus(r: ReconcileResult, status: 'interrupted' | 'not-started'): ReportEntry[] {
  return r.outcomes
    .filter((o) => o.status === status)
    .map((o) => ({ kind: o.kind, id: o.id, reason: o.reason ?? '', nextStep: o.nextStep ?? '' }));
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
