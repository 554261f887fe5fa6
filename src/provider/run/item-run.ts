// The items' runs (ItemRunner): each item in its rank's turn (when it first started in the run), and
// how its run ends up in the run's outcomes: released (and, when someone else's finalizer still holds
// it, watched after the last write), blocked, failed, interrupted or not started. A write larger than
// Omni's burst stops the run (exit 6); a write that would have started after --timeout leaves no
// outcome: the plan made after the deadline reports the item as not done (deadline.ts).

import type { Pointer } from '../../omni-api/resource.js';
import { hasCode, type WriteTooLargeError } from '../../omni-client/errors.js';
import type { HoldFacts } from '../plan/explain.js';
import type { PlanItem } from '../plan/plan.js';
import type { Executor } from './executor.js';
import { NotFoundUnconfirmedError, NotStartedError } from './item-end.js';
import type { ItemEnd } from './item-end.js';
import type { Halt } from './halt.js';
import { keyOf } from './outcomes.js';
import type { ItemOutcome, Outcomes } from './outcomes.js';
import type { StubMode } from './stub-mode.js';

/** What the item runner works with: the run's outcomes, its halt, and whether another run took over. */
export interface ItemRunnerDeps {
  outcomes: Outcomes;
  /** The run's signal (aborted: an item that fails was interrupted) and its stop (a write no run can get past). */
  halt: Pick<Halt, 'signal' | 'stop'>;
  /** Another run took over (design rule 7): nothing more is started. */
  stubMode: Pick<StubMode, 'takenOver'>;
}

/** Omni refused a write as larger than its write burst: no run can get past it until an Omni admin acts. */
export function isTooLarge(err: unknown): err is WriteTooLargeError {
  return hasCode(err, 'STUB_WRITE_TOO_LARGE');
}

/**
 * Runs the run's items and keeps what their ends mean for the rest of the run: which ended blocked,
 * which were released while others still held them, and each item's rank.
 */
export class ItemRunner {
  /** Items that ended blocked (without --wait, not tried again in a later pass). */
  readonly blockedKeys = new Set<string>();
  /** Items released while finalizers of others stayed on them: what to watch after the last write. */
  readonly heldAtRelease = new Map<string, { target: Pointer; facts: HoldFacts }>();
  /** Each item's rank, by key: 1, 2, 3 ... in the order the items first started in the run (limiter.ts). */
  private readonly ranks = new Map<string, number>();

  constructor(private readonly d: ItemRunnerDeps) {}

  /**
   * An item's rank: when it first started in the run, kept through re-plans and passes. Its calls take their turn by
   * it (the call limiter, the write window), so items under way finish before new ones start: under a write budget
   * machines are released at a steady rate from the start, and an interrupted run has released some.
   */
  rankOf(item: PlanItem): number {
    const key = keyOf(item);
    let rank = this.ranks.get(key);
    if (rank === undefined) this.ranks.set(key, (rank = this.ranks.size + 1));
    return rank;
  }

  /** Runs one item in its rank's turn and records how it ended; undefined when it did not end released or blocked. */
  run(executor: Executor, item: PlanItem): Promise<ItemEnd | undefined> {
    return this.runRanked(executor.ranked(this.rankOf(item)), item);
  }

  /** Runs one item (as `run`); whether it ended released. */
  async released(executor: Executor, item: PlanItem): Promise<boolean> {
    const end = await this.run(executor, item);
    return end?.status === 'released';
  }

  /** An item the run never started: the interruption (or another run's takeover) came first. */
  notStarted(item: PlanItem): void {
    const takenOver = this.d.stubMode.takenOver;
    this.d.outcomes.record(keyOf(item), {
      kind: item.kind,
      id: item.id,
      status: 'not-started',
      reason: takenOver
        ? `not started: another run (${takenOver.otherRun}) took over`
        : 'not started: the run was interrupted first',
      nextStep: takenOver ? 'the run that took over releases it' : 'run again',
      counts: true,
    });
  }

  /** Runs one item and records how it ended. */
  private async runRanked(executor: Executor, item: PlanItem): Promise<ItemEnd | undefined> {
    const key = keyOf(item);
    // Interrupted or taken over: nothing more is started; the items in flight finish (or are cancelled).
    if (this.d.halt.signal.aborted || this.d.stubMode.takenOver) {
      this.notStarted(item);
      return undefined;
    }
    const outcome: ItemOutcome = { kind: item.kind, id: item.id, status: 'released', counts: true };
    try {
      const end = await executor.run(item);
      if (end.wipe) outcome.wipe = end.wipe;
      if (end.status === 'blocked') {
        Object.assign(outcome, { status: 'blocked', reason: end.reason, nextStep: end.nextStep, counts: end.counts });
        this.blockedKeys.add(key);
        this.d.outcomes.record(key, outcome);
        this.d.outcomes.itemLog(
          'warn',
          { kind: item.kind, id: item.id, reason: end.reason, nextStep: end.nextStep },
          'blocked',
        );
        return end;
      }
      this.blockedKeys.delete(key);
      if (end.heldAtRelease) {
        // Released by us, but someone else's finalizer still holds it: say who and why, and watch it
        // after the last write (settle).
        Object.assign(outcome, {
          heldBy: [...end.heldAtRelease.facts.remaining],
          reason: end.reason,
          nextStep: end.nextStep,
        });
        this.heldAtRelease.set(key, end.heldAtRelease);
      }
      this.d.outcomes.record(key, outcome);
      this.d.outcomes.itemLog(
        'info',
        { kind: item.kind, id: item.id },
        item.kind === 'leftover' ? 'cleaned up' : 'released',
      );
      return end;
    } catch (err) {
      // Stopped before its first step (its wipe): the run may start nothing more.
      if (err instanceof NotStartedError) {
        this.notStarted(item);
        return undefined;
      }
      if (isTooLarge(err)) this.d.halt.stop(err);
      // Its next write would have started after --timeout: not an outcome; the plan made then reports it as left.
      if (hasCode(err, 'STUB_DEADLINE')) return undefined;
      const aborted = this.d.halt.signal.aborted;
      const nextStep =
        err instanceof NotFoundUnconfirmedError
          ? err.nextStep
          : "run again; if it keeps failing, check the error and Omni's logs";
      Object.assign(outcome, {
        status: aborted ? 'interrupted' : 'failed',
        reason: aborted ? 'under way when the run was interrupted' : (err as Error).message,
        nextStep: aborted ? 'run again: it carries on where this run stopped' : nextStep,
      });
      this.d.outcomes.record(key, outcome);
      if (!aborted)
        this.d.outcomes.itemLog('error', { kind: item.kind, id: item.id, err: (err as Error).message }, 'failed');
      return undefined;
    }
  }
}
