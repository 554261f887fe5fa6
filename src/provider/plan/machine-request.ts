// PURE: the item of one MachineRequest (dynamic providers). A running request is only noted (in use,
// refused now with a FAILED status in whole-provider mode, or refused by an earlier run: docs/design.md
// rule 6); a request being deleted gets its chain in the order of rule 5: its ConfigPatchRequests, its
// MachineRequestStatus, the provider's per-request state, and the release of the request itself, with
// what the provider made outside Omni named as left behind. Apart from planner.ts because it is what
// the stub knows of dynamic providers' requests, and nothing of static machines.

import type { Resource } from '../../omni-api/resource.js';
import { LABEL_MACHINE_REQUEST_SET, NS_INFRA_PROVIDER, PHASE_RUNNING, T } from '../../omni-api/resource.js';
import type { PlanDraft } from './draft.js';
import type { Operation } from './operations.js';
import { foreignFinalizers, ourFinalizers } from '../ownership.js';
import { isStubRefusal, statusMachineId } from './facts.js';
import { PROVISION_CONTROLLER } from '../profile.js';

/** What of one MachineRequest the snapshot holds, read once for its item. */
interface RequestParts {
  mr: Resource;
  rid: string;
  /** Its MachineRequestStatus, if any. */
  status?: Resource;
  /** The machine its status names, if any. */
  machineUuid?: string;
  /** Our finalizers on the request. */
  mine: readonly string[];
}

export function planMachineRequest(d: PlanDraft, mr: Resource): void {
  const rid = mr.metadata.id;
  const status = d.mrsById.get(rid);
  const machineUuid = status ? statusMachineId(status) : undefined;
  if (!d.selected(rid, machineUuid)) return;
  const mine = ourFinalizers(mr.metadata, d.id);
  const parts: RequestParts = {
    mr,
    rid,
    ...(status ? { status } : {}),
    ...(machineUuid !== undefined ? { machineUuid } : {}),
    mine,
  };
  if (mr.metadata.phase === PHASE_RUNNING) {
    requestInUse(d, parts);
    return;
  }
  const { ops, states } = requestChain(d, parts);
  if (ops.length > 0) {
    d.items.push({
      kind: 'MachineRequest',
      id: rid,
      reason: 'MachineRequest being deleted',
      ops: [...d.childrenGone(T.MachineRequest, rid), ...ops],
    });
    if (mine.length > 0) leftOutsideOmni(d, parts, states.length);
    return;
  }
  const foreign = foreignFinalizers(mr.metadata, d.id);
  if (foreign.length > 0) d.heldByOthers('MachineRequest', mr, foreign, machineUuid);
}

/** A running request: without a status, refused (whole-provider mode) or noted; with ours, refused; else in use. */
function requestInUse(d: PlanDraft, r: RequestParts): void {
  const { mr, rid, status, machineUuid } = r;
  const set = mr.metadata.labels[LABEL_MACHINE_REQUEST_SET];
  if (!status && d.whole) {
    d.refusals.push({
      kind: 'MachineRequest',
      id: rid,
      reason: 'new request while the provider is decommissioned: answered with a FAILED status',
      request: mr,
      op: {
        op: 'create',
        target: { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: rid },
        owner: `${d.id}.${PROVISION_CONTROLLER}`,
        why: "a FAILED status, the request's labels copied (design rule 6)",
      },
      done: false,
    });
  } else if (!status) {
    d.running.push({
      kind: 'MachineRequest',
      id: rid,
      reason: 'not provisioned and no status; per-machine mode writes nothing for it',
      nextStep: set
        ? `scale down MachineRequestSet ${set}`
        : `tear the request down (omnictl delete machinerequest ${rid})`,
    });
  } else if (isStubRefusal(status)) {
    d.refusals.push({
      kind: 'MachineRequest',
      id: rid,
      reason: 'refused by an earlier run (FAILED status written by stub-provider)',
      done: true,
    });
  } else {
    d.running.push({
      kind: 'MachineRequest',
      id: rid,
      reason: 'in use: nobody asked to delete it',
      nextStep: set
        ? `scale down MachineRequestSet ${set} or delete the machine${machineUuid ? ` ${machineUuid}` : ''}, and ` +
          `run again`
        : `tear the request down (omnictl delete machinerequest ${rid}) and run again`,
    });
  }
}

/** A request being deleted, in order: its ConfigPatchRequests, its status, the provider's state, its release. */
function requestChain(d: PlanDraft, r: RequestParts): { ops: Operation[]; states: Resource[] } {
  const { mr, rid, status, machineUuid } = r;
  const ops: Operation[] = [];
  for (const cpr of d.cprByRequest.get(rid) ?? [])
    ops.push(...d.dispose(cpr, 'config patch request of a request being deleted', machineUuid));
  if (status)
    ops.push(
      ...d.dispose(status, "status of a request being deleted; Omni's cleanup runs on its teardown", machineUuid),
    );
  const stateTypes = new Set(d.s.profile.stateTypes);
  const states = (d.nsById.get(rid) ?? []).filter((x) => stateTypes.has(x.metadata.type));
  for (const st of states) ops.push(...d.dispose(st, "the provider's per-request state", machineUuid));
  for (const lr of d.linkedByRequest.get(rid) ?? [])
    ops.push(...d.dispose(lr, "the provider's per-request state, naming the request by its label", machineUuid));
  if (r.mine.length > 0)
    ops.push(
      d.release(mr, r.mine, 'the request is being deleted; Omni destroys it once the finalizers are gone', machineUuid),
    );
  return { ops, states };
}

/** What the provider made for a released request outside Omni, and per-request state it may keep unseen. */
function leftOutsideOmni(d: PlanDraft, r: RequestParts, statesFound: number): void {
  const { rid, machineUuid } = r;
  d.leftBehind.push({
    kind: 'MachineRequest',
    id: rid,
    reason:
      `whatever the provider created outside Omni for this request (a VM, an ` +
      `instance${machineUuid ? `, machine ${machineUuid}` : ''}) is not deprovisioned`,
    nextStep: 'delete it in the infrastructure by hand',
  });
  if (statesFound === 0 && !d.s.profile.stateTypesGiven) {
    d.leftBehind.push({
      kind: 'MachineRequest',
      id: rid,
      reason:
        `no per-request state found under ${d.s.profile.stateTypes.join(', ') || 'any known type'}; a ` +
        `provider that keeps it under another type leaves it in infra-provider:${d.id}`,
      nextStep: "pass --state-type <Name> with the provider's state type and run again",
    });
  }
}
