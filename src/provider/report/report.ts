// src/provider/report: what a run or a plan tells the operator. The report's model is here and in
// plan-report.ts and run-report.ts (what a plan would do and what a run found and did, built from the
// plan and the run's outcomes); text.ts renders it for a person; audit.ts is the NDJSON audit log of
// every write.
//
// The summary of a run or a plan: released, refused, blocked (with reasons and next steps), still
// running, left behind, deregistration. The same object is printed as JSON (`--output json`) and
// written by `--report`; `renderText` (text.ts) is the human form. Nothing secret is ever put in it.
// This file holds its shape and what both reports share (the header, the deregistration, the throttling).

import type { Operation } from '../plan/operations.js';
import type { Note, Plan } from '../plan/plan.js';
import type { PreflightResult } from '../run/preflight.js';

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

/** What both reports are given besides the plan: the stub's version and the checks before the work. */
export interface ReportInputs {
  version: string;
  preflight?: PreflightResult;
}

/** A note of the plan (blocked, running, left behind ...) as a report entry. */
export const noteEntry = (n: Note): ReportEntry => ({ kind: n.kind, id: n.id, reason: n.reason, nextStep: n.nextStep });

/** The header both reports start with: the tool, the provider and its mode, Omni's version, the profile, the checks. */
export function reportHeader(plan: Plan, c: ReportInputs, command: 'run' | 'plan') {
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

/**
 * The last step (`omnictl infraprovider delete <id>`) only once the deregistration happened: in this
 * run, and the run finished, or in an earlier one (a plan that finds nothing of the provider left:
 * `done`). Never after a declined, incomplete or interrupted run: deleting the registration deletes
 * the provider's service account and keys with it, so the stub could not log in again to finish, and
 * on Omni before 1.4 nothing else releases the machines. A plan whose run would deregister gives the
 * command as `lastStepAfterRun`, for after that run.
 */
export function deregistrationOf(plan: Plan, deregistered: boolean, result: ReportResult) {
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
