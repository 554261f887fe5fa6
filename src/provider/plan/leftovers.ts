// PURE: the items of leftovers: resources of ours whose InfraMachine or MachineRequest is gone, which
// Omni never cleans (docs/omni-lifecycle.md 8). Gone means a Get of its ID answered NotFound in this
// pass (`goneById`), never that a List left it out (docs/design.md rule 10); a parent that Get found
// is planned like any other machine or request. Apart from planner.ts because a leftover rests on
// evidence of an absence, where every other item rests on what was read.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_MACHINE_REQUEST, T, describePointer } from '../../omni-api/resource.js';
import type { PlanDraft } from './draft.js';
import type { PlanItem } from './plan.js';
import { parentsOf } from './facts.js';

/** Every per-item resource whose parents were all confirmed gone, as an item each (whole-provider mode). */
export function planLeftovers(d: PlanDraft): void {
  for (const r of d.perItem()) {
    if (parentsGone(d, r)) d.items.push(leftoverItem(d, r, leftoverReason(r)));
  }
}

/**
 * A leftover planned again (the executor's, after a conflict): the one resource, disposed of again as
 * it is now; what allowed it (its parents confirmed gone, or the deregistration ready) was decided by
 * the pass's plan.
 */
export function replanLeftover(d: PlanDraft, reason: string, target: Pointer | undefined): void {
  const r = target
    ? d
        .perItem()
        .find(
          (x) =>
            x.metadata.type === target.type && x.metadata.namespace === target.namespace && x.metadata.id === target.id,
        )
    : undefined;
  if (r) d.items.push({ kind: 'leftover', id: r.metadata.id, reason, ops: d.dispose(r, reason) });
}

/** Every parent of a per-item resource confirmed gone by a Get of its ID in this snapshot. */
function parentsGone(d: PlanDraft, r: Resource): boolean {
  if (d.s.goneById.size === 0) return false;
  const ps = parentsOf(r, d.s.profile);
  return ps.length > 0 && ps.every((p) => d.s.goneById.has(describePointer(p)));
}

function leftoverItem(d: PlanDraft, r: Resource, reason: string): PlanItem {
  return {
    kind: 'leftover',
    id: r.metadata.id,
    reason,
    ops: [...d.confirmedGone(parentsOf(r, d.s.profile), 'its machine or request: gone'), ...d.dispose(r, reason)],
  };
}

function leftoverReason(r: Resource): string {
  switch (r.metadata.type) {
    case T.InfraMachineStatus:
      return 'InfraMachineStatus whose InfraMachine is gone (a Get of its ID answered NotFound)';
    case T.MachineRequestStatus:
      return 'MachineRequestStatus whose MachineRequest is gone (a Get of its ID answered NotFound)';
    case T.ConfigPatchRequest:
      return (
        `ConfigPatchRequest of request ${r.metadata.labels[LABEL_MACHINE_REQUEST] ?? ''}, which is gone (a Get ` +
        `of its ID answered NotFound)`
      );
    default:
      return 'provider state whose machine or request is gone (a Get of its ID answered NotFound)';
  }
}
