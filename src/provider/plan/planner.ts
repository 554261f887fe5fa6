// PURE: the planner behind plan.ts. A snapshot of Omni plus the operator's options -> each item's
// operations, in the order of docs/design.md rule 5, with a reason for every one; what blocks what, with
// next steps; what stays behind. No I/O, no clock. Never plans anything on a running InfraMachine or
// MachineRequest (or on their outputs), never adds a finalizer, and removes only our finalizers,
// all of them in one Update. Positive evidence only (design rules 4 and 10): a leftover is what names
// a parent that a Get of its ID did not find, and every operation says whether its target was read
// by its ID.
//
// This file holds the order of a pass (machines, requests, legacy BMCConfigs, the deregistration,
// leftovers) and one item planned again; the plan being drawn up and the operations items are made
// of are in draft.ts, each kind of item in its own file.

import type { Pointer } from '../../omni-api/resource.js';
import { PlanDraft } from './draft.js';
import { planBmcConfig, planInfraMachine } from './infra-machine.js';
import { planLeftovers, replanLeftover } from './leftovers.js';
import { planMachineRequest } from './machine-request.js';
import type { Note, Plan, PlanItem, PlanOptions, Snapshot } from './plan.js';
import { planDeregistration } from './deregistration.js';

export function buildPlan(s: Snapshot, o: PlanOptions): Plan {
  const d = new PlanDraft(s, o);
  for (const im of s.infraMachines) planInfraMachine(d, im);
  for (const mr of s.machineRequests) planMachineRequest(d, mr);
  for (const bmc of s.bmcConfigs) planBmcConfig(d, bmc);
  const deregistration = planDeregistration(d);
  if (d.whole && deregistration.status !== 'ready') planLeftovers(d);
  const announce = d.whole && (d.items.length > 0 || d.refusals.some((r) => !r.done && r.request !== undefined));
  return {
    providerId: d.id,
    mode: d.whole ? 'whole' : 'machines',
    machines: [...o.machines],
    profile: s.profile,
    ...(s.omniVersion ? { omniVersion: s.omniVersion } : {}),
    items: d.items,
    refusals: d.refusals,
    running: d.running,
    blocked: d.blocked,
    waits: d.waits,
    lettingGo: d.lettingGo,
    unseen: d.unseen,
    leftBehind: d.leftBehind,
    notFound: o.machines.filter((m) => !d.matched.has(m)),
    deregistration,
    announce,
  };
}

/** What planning one item again gave: its operations now, or why nothing of it is left to do. */
export interface Replanned {
  item?: PlanItem;
  /** Nothing to do for it any more, and why (in use, held by others only, refused): from the notes. */
  note?: Note;
  /** Held by others only, and Omni lets go by itself: nothing of ours is left on it. */
  lettingGo?: Note;
}

/**
 * The same planner, for one item, from a snapshot of what that item reads now (the executor's, after
 * a conflict or an answer it did not plan for). A re-plan can never do more than a plan.
 */
export function replanItem(
  s: Snapshot,
  o: PlanOptions,
  item: Pick<PlanItem, 'kind' | 'id' | 'reason'>,
  target?: Pointer,
): Replanned {
  const d = new PlanDraft(s, o);
  replan(d, item, target);
  const planned = d.items.find((i) => i.kind === item.kind && i.id === item.id);
  if (planned) return { item: planned };
  const same = (n: Note) => n.id === item.id;
  const note = d.running.find(same) ?? d.blocked.find(same) ?? d.lettingGo.find(same);
  const lettingGo = d.lettingGo.find(same);
  return { ...(note ? { note } : {}), ...(lettingGo ? { lettingGo } : {}) };
}

/**
 * One item planned again, as `buildPlan` plans it: its result is in the draft's `items` and notes. A
 * leftover (or a clean-up of the deregistration) is one resource, disposed of again as it is now.
 */
function replan(d: PlanDraft, item: Pick<PlanItem, 'kind' | 'id' | 'reason'>, target: Pointer | undefined): void {
  switch (item.kind) {
    case 'InfraMachine': {
      const r = d.imById.get(item.id);
      if (r) planInfraMachine(d, r);
      return;
    }
    case 'MachineRequest': {
      const r = d.mrById.get(item.id);
      if (r) planMachineRequest(d, r);
      return;
    }
    case 'BMCConfig': {
      const r = d.bmcById.get(item.id);
      if (r) planBmcConfig(d, r);
      return;
    }
    case 'leftover':
      replanLeftover(d, item.reason, target);
      return;
    case 'deregistration': {
      // Its last operations: the heartbeat and the ProviderStatus, as they are now.
      const ops = [
        ...(d.s.healthStatus ? d.dispose(d.s.healthStatus, item.reason) : []),
        ...(d.s.providerStatus ? d.dispose(d.s.providerStatus, item.reason) : []),
      ];
      if (ops.length > 0) d.items.push({ kind: 'deregistration', id: item.id, reason: item.reason, ops });
      return;
    }
  }
}
