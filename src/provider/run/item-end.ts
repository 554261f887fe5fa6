// How an item's operations end (executor.ts performs them): what one operation's answer means for
// the item (the next operation, a re-plan, or the item's end), how the item ended (ItemEnd: released,
// or blocked and why), what still holds a resource after the run let go of it (from what the run's
// caches saw last), and the two errors that end an item otherwise: not started, and a NotFound that
// nothing read by its ID (design rule 4). Apart from the executor: the item's run (item-run.ts) and
// the settle (settle.ts) read these too, and none of it makes a call.

import { ExitCode, StubError } from '../../exit-codes.js';
import type { Pointer } from '../../omni-api/resource.js';
import { describePointer } from '../../omni-api/resource.js';
import type { WipeResult } from '../../wipe/index.js';
import { describeDuration, describeHolds, nextStepsOf, predictHolds, stillHolding } from '../plan/explain.js';
import type { Hold, HoldFacts } from '../plan/explain.js';
import type { Operation, WaitOp } from '../plan/operations.js';
import { isOurFinalizer } from '../ownership.js';
import type { Reads } from '../read/reads.js';

/** How an item ended. */
export interface ItemEnd {
  status: 'released' | 'blocked';
  reason?: string;
  nextStep?: string;
  /** Whether a blocked end means the stub's own work is unfinished (exit 5). */
  counts: boolean;
  wipe?: WipeResult;
  /** Released while these finalizers of others stayed on it, with what decides them. */
  heldAtRelease?: { target: Pointer; facts: HoldFacts };
  /** Released, and nothing but Omni's self-releasing finalizers stays on it: Omni destroys it now. */
  releasedParent?: Pointer;
}

/** What one operation's answer means for the item: go on, plan it again from this resource, or end. */
export type OpResult = { next: true } | { replan: Pointer } | { end: ItemEnd };
export const NEXT: OpResult = { next: true };

/** The planner's note when a re-plan left nothing of the item to do. */
export interface ReplanNote {
  reason: string;
  nextStep: string;
  heldByOthers?: { target: Pointer; facts: HoldFacts };
}

/**
 * Nothing of the item left to do after a re-plan: why, from the planner's note. No note: the item's machine or
 * request (`parent`) is gone or has nothing of ours and nobody's hold on it, so it is a released parent like any
 * other (the next pass waits for Omni to destroy it, then may deregister).
 */
export function endAfterReplan(note: ReplanNote | undefined, lettingGo: unknown, parent?: Pointer): ItemEnd {
  if (!note) return { status: 'released', counts: true, ...(parent ? { releasedParent: parent } : {}) };
  if (note.heldByOthers) {
    // Nothing of ours left on it (someone removed it meanwhile): released, held by others.
    const holds = predictHolds(note.heldByOthers.facts);
    return {
      status: 'released',
      counts: true,
      reason: describeHolds(holds),
      nextStep: nextStepsOf(holds),
      heldAtRelease: note.heldByOthers,
      ...(lettingGo ? { releasedParent: note.heldByOthers.target } : {}),
    };
  }
  return {
    status: 'blocked',
    reason: `changed while being released: ${note.reason}; left alone`,
    nextStep: note.nextStep,
    counts: false,
  };
}

/** A released item whose last step left finalizers of others on it: who holds it, and what decides them. */
export function heldAtEnd(last: Operation | undefined): Partial<ItemEnd> {
  if (last?.op !== 'remove-finalizers' || !last.holds) return {};
  const holds = predictHolds(last.holds);
  return {
    reason: describeHolds(holds),
    nextStep: nextStepsOf(holds),
    heldAtRelease: { target: last.target, facts: last.holds },
  };
}

/** A wait for Omni that ran out: blocked, by what holds the resource now. */
export function stillHeldEnd(reads: Reads, providerId: string, op: WaitOp, ms: number): OpResult {
  const holds = holdsNow(reads, providerId, op.target, op.holds);
  return {
    end: {
      status: 'blocked',
      reason: `${describePointer(op.target)} still held after ${describeDuration(ms)} by ${describeHolds(holds)}`,
      nextStep: nextStepsOf(holds),
      counts: true,
    },
  };
}

/**
 * After a wait: the holds of what a watch of this run saw on the resource last (or, unseen, of
 * `facts`), ours left out; what was to let go by itself and did not is said so.
 */
export function holdsNow(reads: Reads, providerId: string, p: Pointer, facts: HoldFacts): Hold[] {
  const now = reads.finalizersOf(p);
  const remaining = Array.isArray(now) ? now.filter((f) => !isOurFinalizer(f, providerId)) : facts.remaining;
  return stillHolding(predictHolds({ ...facts, remaining }));
}

/** The item was not started: the run was interrupted, or another run took over, before its first step. */
export class NotStartedError extends Error {
  constructor() {
    super('not started');
    this.name = 'NotStartedError';
  }
}

/**
 * A write or read answered NotFound for a resource nothing had read by exactly that ID (it came from
 * a List only): not taken for done (design rule 4). The item fails; the run exits 5.
 */
export class NotFoundUnconfirmedError extends StubError {
  readonly nextStep: string;
  constructor(p: Pointer, call: string) {
    super(
      'STUB_NOT_FOUND_UNCONFIRMED',
      ExitCode.Incomplete,
      `${describePointer(p)}: ${call} answered NotFound, but nothing read this resource by its ID before (it came ` +
        `from a List only), so it is not taken for done`,
    );
    this.name = 'NotFoundUnconfirmedError';
    this.nextStep =
      'run again (the next run lists it afresh); if it keeps failing, check what answers in front of Omni (a proxy ' +
      'or gateway rewriting answers)';
  }
}
