// src/provider/plan: pure planning, no I/O and no clock: the plan as data (this file), the planner
// (planner.ts: the order of a pass; draft.ts: the plan being drawn up; one file per kind of item:
// infra-machine.ts, machine-request.ts, leftovers.ts, deregistration.ts), what it reads off resources
// (facts.ts), the operations an item is made of (operations.ts), and what Omni's finalizers wait for
// (explain.ts).
//
// The plan: what a run does, as data. A snapshot of Omni plus the operator's options -> items, each
// a list of fully specified operations (operations.ts) in the order of docs/design.md rule 5, with a
// reason for every one; refusals; what blocks what, with next steps; what stays behind; the
// deregistration. `planner.ts` decides (pure: no I/O, no clock); `executor.ts` performs exactly
// these operations, and after a conflict asks the same planner for that item again (`replanItem`).

import type { Pointer, Resource } from '../../omni-api/resource.js';
import type { HoldFacts } from './explain.js';
import type { CheckLiveProviderOp, CreateRefusalOp, Operation } from './operations.js';
import type { ResolvedProfile } from '../profile.js';

export interface PlanOptions {
  providerId: string;
  /** `--machine` values; empty = whole-provider mode. */
  machines: string[];
  /** Whole-provider mode only: destroy what is left and the statuses once nothing of the ID remains. */
  deregister: boolean;
  /** Put a wipe first in each machine's operations (a wipe strategy other than `none`). */
  wipe: boolean;
}

export type ItemKind = 'InfraMachine' | 'MachineRequest' | 'BMCConfig' | 'leftover' | 'deregistration';

export interface PlanItem {
  kind: ItemKind;
  id: string;
  reason: string;
  /**
   * What a run does for it, in order: the executor performs exactly these. One that fails or keeps
   * waiting stops the rest of the item. `get` operations were made while planning (the item rests
   * on their NotFound).
   */
  ops: Operation[];
}

/**
 * The deregistration: first `check` (one Get of the heartbeat, design rule 7); then at once, each
 * its own clean-up (counted as cleaned), what is left of the provider; then, once all of it is gone,
 * `ops` in order: the heartbeat (its beats stopped first), the ProviderStatus last.
 */
export interface DeregistrationItem extends PlanItem {
  kind: 'deregistration';
  check: CheckLiveProviderOp;
  cleanup: PlanItem[];
}

export interface Refusal {
  kind: 'MachineRequest' | 'InfraMachine';
  id: string;
  reason: string;
  /** The request to answer with a FAILED status; absent when nothing is to be written. */
  request?: Resource;
  /** The Create that answers it (with `request`). */
  op?: CreateRefusalOp;
  /** Already refused (by an earlier run) or, for an InfraMachine, nothing to write. */
  done: boolean;
}
export interface Note {
  kind: string;
  id: string;
  reason: string;
  nextStep: string;
  /** A deletion under way held only by others' finalizers: the resource, and what decides their hold. */
  heldByOthers?: { target: Pointer; facts: HoldFacts };
}

/** `after-releases`: only what this plan releases stands in the way; Omni destroys it, then deregistration follows. */
export type DeregistrationStatus = 'ready' | 'after-releases' | 'not-ready' | 'done' | 'disabled' | 'per-machine';

export interface Deregistration {
  status: DeregistrationStatus;
  reasons: string[];
  /**
   * The resource types of what stands in the way (what is left, could not be read, or was not confirmed gone),
   * each once: what code decides on, while `reasons` are for people.
   */
  blockedBy: string[];
  /** What the operator runs last (printed, never run by the stub). */
  lastStep: string;
  warning?: string;
  item?: DeregistrationItem;
}

export interface Plan {
  providerId: string;
  mode: 'whole' | 'machines';
  machines: string[];
  profile: ResolvedProfile;
  omniVersion?: string;
  items: PlanItem[];
  refusals: Refusal[];
  /** Machines in use that nobody asked to delete: reported, never touched. */
  running: Note[];
  /** Deletions under way that only others can finish (Omni's finalizers, another provider's). */
  blocked: Note[];
  /** Finalizers of others that will keep holding what we release or destroy: what holds them was read. */
  waits: Note[];
  /** Omni's finalizers that will let go by themselves: what their controllers wait for is absent. */
  lettingGo: Note[];
  /** Omni's finalizers whose hold the provider's account cannot see, with what decides it. */
  unseen: Note[];
  leftBehind: Note[];
  /** `--machine` values that match nothing. */
  notFound: string[];
  deregistration: Deregistration;
  /** Whole-provider mode with work to do: upsert the ProviderStatus and send heartbeats. */
  announce: boolean;
}

/** A type a pass could not read, and why. */
export interface Unreadable {
  namespace: string;
  type: string;
  error: string;
}

/**
 * A pass's input, as plain data: what the provider's reads (src/provider/read/snapshot.ts) found of
 * Omni. The planner sees nothing else.
 */
export interface Snapshot {
  providerId: string;
  /** Omni's backend version (SysVersion `current`), when readable. */
  omniVersion?: string;
  providerStatus?: Resource;
  healthStatus?: Resource;
  infraMachines: Resource[];
  infraMachineStatuses: Resource[];
  bmcConfigs: Resource[];
  machineRequests: Resource[];
  machineRequestStatuses: Resource[];
  configPatchRequests: Resource[];
  /** `Machines.omni.sidero.dev` carrying the ID (label or annotation); the others are dropped at once. */
  machines: Resource[];
  /** Resources in `infra-provider:<id>` by full type string (every type of the profile, even when empty). */
  namespace: Record<string, Resource[]>;
  profile: ResolvedProfile;
  /** Types that could not be read (for example Machines on an Omni that refuses them). */
  unreadable: Unreadable[];
  /**
   * Resources their List did not hold, by `describePointer`, for which a Get of that ID answered
   * NotFound: parents (`parentsOf`) named by what is listed, and the children (`childKinds`) of the
   * machines and requests being released. Only this makes what names a parent a leftover (rule 10).
   */
  goneById: ReadonlySet<string>;
  /**
   * Resources their List did not hold but a Get of their ID found: that List was not complete. Those
   * labelled with our ID (or in our namespace) are in their list of the snapshot too, planned like
   * any other.
   */
  missedByList: Resource[];
  /**
   * The resources of this snapshot (these objects) read by their ID (a Get, a live event, a write of this run), not
   * only listed.
   */
  foundById: ReadonlySet<Resource>;
}

/**
 * The writes a plan makes before it has to wait for anyone: every item's writes up to its first
 * wait (a teardown before it included), and the refusals. Zero means a run would change nothing now.
 */
export function immediateWrites(plan: Plan): number {
  let n = 0;
  const d = plan.deregistration.item;
  const items = [...plan.items, ...(d ? [...d.cleanup, d] : [])];
  for (const item of items) {
    for (const op of item.ops) {
      if (op.op === 'wait') break;
      if (op.op === 'remove-finalizers' || op.op === 'teardown' || op.op === 'destroy') n++;
    }
  }
  return n + plan.refusals.filter((r) => !r.done && r.op).length;
}

/**
 * The kinds whose changes the plan's items act on as they come (a run reads their watches' events as
 * they arrive; the caches close the other kinds' watches at their first unread event and watch and list
 * them again when asked): what an item waits for, and the resource its last step releases (waited for
 * as it goes, and watched by --settle). The latter's events are also the evidence a release whose
 * answer was lost ends on: the read-back's Get then answers NotFound (Omni destroyed it at once), and
 * only the watch's DESTROYED event names the ID (design rule 4; test/provider/lost-answers.test.ts).
 */
export function followedKinds(plan: Plan): Pick<Pointer, 'namespace' | 'type'>[] {
  const out = new Map<string, Pick<Pointer, 'namespace' | 'type'>>();
  const add = (p: Pointer): void => {
    out.set(`${p.namespace}\u0000${p.type}`, { namespace: p.namespace, type: p.type });
  };
  const d = plan.deregistration.item;
  for (const item of [...plan.items, ...(d ? [...d.cleanup, d] : [])]) {
    for (const op of item.ops) if (op.op === 'wait') add(op.target);
    const last = item.ops.at(-1);
    if (last?.op === 'remove-finalizers') add(last.target);
  }
  return [...out.values()];
}

/** Whether a plan would change anything (so a confirmation is due). */
export function hasWork(plan: Plan): boolean {
  return immediateWrites(plan) > 0 || plan.announce || plan.deregistration.status === 'ready' || plan.items.length > 0;
}

/**
 * What planning an item again needs of a pass's snapshot (its profile, its evidence), without its resources: a run
 * keeps those in its caches, which drop each as it goes.
 */
export function withoutResources(snap: Snapshot): Snapshot {
  return {
    ...snap,
    infraMachines: [],
    infraMachineStatuses: [],
    bmcConfigs: [],
    machineRequests: [],
    machineRequestStatuses: [],
    configPatchRequests: [],
    machines: [],
    namespace: {},
    missedByList: [],
    foundById: new Set(),
  };
}
