// How each item and refusal of a run ended, kept up to date for the progress line (O(1) per item),
// and the per-item log lines.

import type { Logger } from 'pino';
import type { WipeResult } from '../../wipe/index.js';
import { targetOf } from '../plan/operations.js';
import type { PlanItem, Refusal } from '../plan/plan.js';

/** Machine-level items of this run so far, by how they ended; `remaining` = planned, not ended yet. */
export interface ReconcileProgress {
  released: number;
  /** New MachineRequests refused (a FAILED status written) by this run. */
  refused: number;
  blocked: number;
  /** Items and refusals that failed (what an interruption left undone is not counted: it stays remaining). */
  failed: number;
  /** Machines in use that the latest plan leaves alone: with --wait, what the run waits for. */
  running: number;
  /** Items under way that wait for Omni to clear its own finalizers. */
  waiting: number;
  remaining: number;
  /** Machine-level items planned so far (released, blocked, failed and remaining); grows with --wait. */
  total: number;
  /** With --wait: how long until --timeout, when this was reported. */
  timeLeftMs?: number;
}

/** One item as it ended, for a person's display. */
export interface ItemEnded {
  kind: string;
  id: string;
  status: ItemStatus | 'refused';
  reason?: string;
}

/**
 * `interrupted`: under way when the run was interrupted; `not-started`: planned, and never started
 * because the run was interrupted first (neither is a failure: run again).
 */
export type ItemStatus = 'released' | 'blocked' | 'failed' | 'interrupted' | 'not-started';

export interface ItemOutcome {
  kind: PlanItem['kind'];
  id: string;
  status: ItemStatus;
  reason?: string;
  nextStep?: string;
  wipe?: WipeResult;
  /**
   * Released, but these finalizers of others still hold it (reason and nextStep explain them): when
   * it was released, or after the settle time if `settle` says so.
   */
  heldBy?: string[];
  /** What watching it after the last write showed (only for what others still held when released). */
  settle?: ItemSettle;
  /** Whether a non-released outcome means the stub's own work is unfinished (exit 5). */
  counts: boolean;
}

export interface ItemSettle {
  /** How long it was watched (0: --settle 0, not watched). */
  ms: number;
  /** gone: destroyed within that time; held: still there after it; not-watched; watch-failed (`error`). */
  outcome: 'gone' | 'held' | 'not-watched' | 'watch-failed';
  error?: string;
}

export interface RefusalOutcome {
  kind: Refusal['kind'];
  id: string;
  reason: string;
  /**
   * refused: by this run; already-refused: by an earlier run (our marker on its status); no-finalizers: an InfraMachine
   * left without ours; status-by-other: a status someone else wrote appeared before ours (left alone); failed.
   */
  result: 'refused' | 'already-refused' | 'no-finalizers' | 'status-by-other' | 'failed';
  error?: string;
}

const MACHINE_LEVEL = new Set<PlanItem['kind']>(['InfraMachine', 'MachineRequest', 'BMCConfig']);

/** The progress counter of an outcome; what an interruption left undone stays remaining. */
function tallyOf(status: ItemStatus): 'released' | 'blocked' | 'failed' | undefined {
  return status === 'interrupted' || status === 'not-started' ? undefined : status;
}

/**
 * An item's identity across passes. A machine-level item is its kind and ID, however many of its
 * operations a later pass still plans (keyed by its last operation's resource, a machine that
 * failed in two passes was reported failed twice and counted twice); a leftover is the resource it
 * destroys.
 */
export function keyOf(item: PlanItem): string {
  if (MACHINE_LEVEL.has(item.kind)) return `${item.kind}/${item.id}`;
  const targets = new Set(item.ops.filter((o) => o.op !== 'get').map(targetOf));
  const [one] = targets;
  return `${item.kind}/${targets.size === 1 && one !== undefined ? one : item.id}`;
}

export interface OutcomesDeps {
  log: Logger;
  progress?: (p: ReconcileProgress, ended?: ItemEnded) => void;
  itemLogLevel?: 'debug';
  /** With --wait: how long until --timeout. */
  timeLeftMs?: () => number;
}

export class Outcomes {
  readonly items = new Map<string, ItemOutcome>();
  readonly refusals = new Map<string, RefusalOutcome>();
  /** Machine-level items planned so far and counts of their outcomes, kept up to date for progress. */
  private readonly tracked = new Set<string>();
  private readonly tally = { released: 0, blocked: 0, failed: 0 };
  /** Refusals written and refusals that failed, machines in use (latest plan), items waiting for Omni. */
  private readonly others = { refused: 0, refusalsFailed: 0, running: 0, waiting: 0 };

  constructor(private readonly d: OutcomesDeps) {}

  /**
   * Stores an item's outcome and keeps the progress counts in step. A machine-level item or the
   * deregistration is shown when it ends, and again only when it ends otherwise (with --wait a
   * blocked item is tried again on every pass).
   */
  record(key: string, outcome: ItemOutcome): void {
    const prev = this.items.get(key);
    const tracked = this.tracked.has(key);
    if (tracked) {
      const before = prev && tallyOf(prev.status);
      const after = tallyOf(outcome.status);
      if (before) this.tally[before]--;
      if (after) this.tally[after]++;
    }
    this.items.set(key, outcome);
    // What was never started is listed by the summary, not line by line (thousands at a Ctrl-C).
    const shown =
      (tracked || outcome.kind === 'deregistration') &&
      prev?.status !== outcome.status &&
      outcome.status !== 'not-started';
    this.report(
      shown
        ? {
            kind: outcome.kind,
            id: outcome.id,
            status: outcome.status,
            ...(outcome.reason ? { reason: outcome.reason } : {}),
          }
        : undefined,
    );
  }

  refusal(key: string, r: RefusalOutcome, ended?: ItemEnded): void {
    // What this run refused stays so: a later pass that finds its status reports it as ours.
    if (this.refusals.get(key)?.result === 'refused') return;
    this.refusals.set(key, r);
    if (r.result === 'refused') this.others.refused++;
    if (r.result === 'failed') this.others.refusalsFailed++;
    if (ended) this.report(ended);
  }

  track(items: PlanItem[], running: number): void {
    if (!this.d.progress) return;
    for (const item of items) if (MACHINE_LEVEL.has(item.kind)) this.tracked.add(keyOf(item));
    this.others.running = running;
    this.report();
  }

  /** Counts an item waiting for Omni while `fn` runs (the progress line's "waiting"). */
  async waiting<T>(fn: () => Promise<T>): Promise<T> {
    this.others.waiting++;
    this.report();
    try {
      return await fn();
    } finally {
      this.others.waiting--;
      this.report();
    }
  }

  report(ended?: ItemEnded): void {
    const progress = this.d.progress;
    if (!progress) return;
    const { released, blocked, failed } = this.tally;
    const { refused, refusalsFailed, running, waiting } = this.others;
    const left = this.d.timeLeftMs?.();
    progress(
      {
        released,
        refused,
        blocked,
        failed: failed + refusalsFailed,
        running,
        waiting,
        remaining: this.tracked.size - released - blocked - failed,
        total: this.tracked.size,
        ...(left !== undefined ? { timeLeftMs: left } : {}),
      },
      ended,
    );
  }

  /** A per-item log line, at its own level or at `itemLogLevel` (debug where a display shows the items). */
  itemLog(level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void {
    this.d.log[this.d.itemLogLevel ?? level](fields, msg);
  }
}
