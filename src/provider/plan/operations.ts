// What a run does, as data: every planned item is a list of these operations, each fully specified
// (which resource, at which version, in which phase, as which owner, which finalizers). `plan.ts`
// decides them; `executor.ts` performs exactly them, one call (or one wait) each, and on a conflict
// asks the same planner again for the item. `plan` prints them (report/plan-report.ts), so what it shows is
// what `run` does.

import type { Phase, Pointer, Resource } from '../../omni-api/resource.js';
import type { HoldFacts } from './explain.js';

/**
 * One Update removing exactly `finalizers` (all of ours on it) from `target` as read at `version`,
 * only while it is in `phase` (design rule 3; a retry after a version conflict re-reads it and
 * removes the same finalizers, in the same phase only).
 */
export interface RemoveFinalizersOp {
  op: 'remove-finalizers';
  target: Pointer;
  version: string;
  phase: Phase;
  finalizers: readonly string[];
  /** Others' finalizers stay on it: what decides whether they keep holding it (the release of a machine or request). */
  holds?: HoldFacts;
  /** The target was read by its ID (a Get, a watch event), not only listed: a NotFound for it is done (rule 4). */
  foundById: boolean;
  why: string;
}

/** Get + Update of the phase to tearingDown (owner as read, expected phase running): Omni's controllers then act. */
export interface TeardownOp {
  op: 'teardown';
  target: Pointer;
  owner: string;
  foundById: boolean;
  why: string;
}

/**
 * Wait, through the watch of its kind, until `target` holds no finalizer at a version after the last
 * one this run knew of it, or is gone (a DESTROYED event or a Get answering NotFound; design rule 10).
 * `finalizers`: the ones expected to clear (others'; ours were removed before).
 */
export interface WaitOp {
  op: 'wait';
  target: Pointer;
  finalizers: readonly string[];
  holds: HoldFacts;
  foundById: boolean;
  why: string;
}

/** Destroy as the owner read (nothing holds it any more). */
export interface DestroyOp {
  op: 'destroy';
  target: Pointer;
  owner: string;
  foundById: boolean;
  why: string;
}

/** The best-effort wipe of a machine, with the BMC data read before anything of it is destroyed (design rule 8). */
export interface WipeOp {
  op: 'wipe';
  machineId: string;
  /**
   * Where the wipe is claimed (run/wipe-claim.ts): a resource of the machine the stub owns and
   * destroys later in the item, its InfraMachineStatus or else one in `infra-provider:<id>`.
   */
  claim?: Pointer;
  bmcConfiguration?: Resource;
  bmcConfig?: Resource;
}

/**
 * A Get of `target` answered NotFound while planning (the snapshot of this pass, design rule 10), and
 * the item rests on that absence. Performed before the plan exists: the executor has nothing left to do.
 */
export interface ConfirmedGoneOp {
  op: 'get';
  target: Pointer;
  answered: 'not-found';
  why: string;
}

/** One Get of the heartbeat right before deregistering: no live provider came back (design rule 7). */
export interface CheckLiveProviderOp {
  op: 'check-live-provider';
  target: Pointer;
  why: string;
}

/** A FAILED MachineRequestStatus for a new request (design rule 6), as `owner`, the request's labels copied. */
export interface CreateRefusalOp {
  op: 'create';
  target: Pointer;
  owner: string;
  why: string;
}

export type Operation =
  | RemoveFinalizersOp
  | TeardownOp
  | WaitOp
  | DestroyOp
  | WipeOp
  | ConfirmedGoneOp
  | CheckLiveProviderOp
  | CreateRefusalOp;

/** What an operation acts on: `namespace/type/id`, or the machine ID of a wipe. */
export function targetOf(op: Operation): string {
  if (op.op === 'wipe') return op.machineId;
  const p = op.target;
  return `${p.namespace}/${p.type}/${p.id}`;
}
