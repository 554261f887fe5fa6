// How one item's run ends up in the run's outcomes: released (and, when someone else's finalizer
// still holds it, watched after the last write), blocked, failed or interrupted. A write larger than
// Omni's burst stops the run (exit 6); a write that would have started after --timeout leaves no
// outcome: the plan made after the deadline reports the item as not done (deadline.ts).

import type { Pointer } from '../../omni-api/resource.js';
import { hasCode, type WriteTooLargeError } from '../../omni-client/errors.js';
import type { HoldFacts } from '../plan/explain.js';
import type { PlanItem } from '../plan/plan.js';
import { NotFoundUnconfirmedError, NotStartedError } from './executor.js';
import type { Executor, ItemEnd } from './executor.js';
import { keyOf } from './outcomes.js';
import type { ItemOutcome, Outcomes } from './outcomes.js';

export interface ItemRunContext {
  outcomes: Outcomes;
  /** Items that ended blocked (without --wait, not tried again in a later pass). */
  blockedKeys: Set<string>;
  /** Items released while finalizers of others stayed on them: what to watch after the last write. */
  heldAtRelease: Map<string, { target: Pointer; facts: HoldFacts }>;
  /** The run's signal: aborted, an item that fails was interrupted. */
  signal: AbortSignal;
  /** Another run took over (design rule 7): nothing more is started. */
  takenOver?: () => boolean;
  /** Stops the run at once (a write no run can get past). */
  stopRun: (err: Error) => void;
  /** Records an item the run never started: the interruption came first. */
  notStarted: (item: PlanItem) => void;
}

/** Omni refused a write as larger than its write burst: no run can get past it until an Omni admin acts. */
export function isTooLarge(err: unknown): err is WriteTooLargeError {
  return hasCode(err, 'STUB_WRITE_TOO_LARGE');
}

/** Runs one item and records how it ended; undefined when it did not end released or blocked. */
export async function runItem(c: ItemRunContext, executor: Executor, item: PlanItem): Promise<ItemEnd | undefined> {
  const key = keyOf(item);
  // Interrupted or taken over: nothing more is started; the items in flight finish (or are cancelled).
  if (c.signal.aborted || c.takenOver?.()) {
    c.notStarted(item);
    return undefined;
  }
  const outcome: ItemOutcome = { kind: item.kind, id: item.id, status: 'released', counts: true };
  try {
    const end = await executor.run(item);
    if (end.wipe) outcome.wipe = end.wipe;
    if (end.status === 'blocked') {
      Object.assign(outcome, { status: 'blocked', reason: end.reason, nextStep: end.nextStep, counts: end.counts });
      c.blockedKeys.add(key);
      c.outcomes.record(key, outcome);
      c.outcomes.itemLog(
        'warn',
        { kind: item.kind, id: item.id, reason: end.reason, nextStep: end.nextStep },
        'blocked',
      );
      return end;
    }
    c.blockedKeys.delete(key);
    if (end.heldAtRelease) {
      // Released by us, but someone else's finalizer still holds it: say who and why, and watch it
      // after the last write (settle).
      Object.assign(outcome, {
        heldBy: [...end.heldAtRelease.facts.remaining],
        reason: end.reason,
        nextStep: end.nextStep,
      });
      c.heldAtRelease.set(key, end.heldAtRelease);
    }
    c.outcomes.record(key, outcome);
    c.outcomes.itemLog('info', { kind: item.kind, id: item.id }, item.kind === 'leftover' ? 'cleaned up' : 'released');
    return end;
  } catch (err) {
    // Stopped before its first step (its wipe): the run may start nothing more.
    if (err instanceof NotStartedError) {
      c.notStarted(item);
      return undefined;
    }
    if (isTooLarge(err)) c.stopRun(err);
    // Its next write would have started after --timeout: not an outcome; the plan made then reports it as left.
    if (hasCode(err, 'STUB_DEADLINE')) return undefined;
    const aborted = c.signal.aborted;
    const nextStep =
      err instanceof NotFoundUnconfirmedError
        ? err.nextStep
        : "run again; if it keeps failing, check the error and Omni's logs";
    Object.assign(outcome, {
      status: aborted ? 'interrupted' : 'failed',
      reason: aborted ? 'under way when the run was interrupted' : (err as Error).message,
      nextStep: aborted ? 'run again: it carries on where this run stopped' : nextStep,
    });
    c.outcomes.record(key, outcome);
    if (!aborted) c.outcomes.itemLog('error', { kind: item.kind, id: item.id, err: (err as Error).message }, 'failed');
    return undefined;
  }
}
