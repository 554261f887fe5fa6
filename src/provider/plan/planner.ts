// PURE: the planner behind plan.ts. A snapshot of Omni plus the operator's options -> each item's
// operations, in the order of docs/design.md rule 5, with a reason for every one; what blocks what, with
// next steps; what stays behind. No I/O, no clock. Never plans anything on a running InfraMachine or
// MachineRequest (or on their outputs), never adds a finalizer, and removes only our finalizers,
// all of them in one Update. Positive evidence only (design rules 4 and 10): a leftover is what names
// a parent that a Get of its ID did not find, and every operation says whether its target was read
// by its ID.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import {
  LABEL_MACHINE_REQUEST,
  LABEL_MACHINE_REQUEST_SET,
  NS_INFRA_PROVIDER,
  PHASE_RUNNING,
  PHASE_TEARING_DOWN,
  T,
  describePointer,
  pointerOf,
  providerType,
} from '../../omni-api/resource.js';
import { describeHolds, nextStepsOf, predictHolds, predictionOf } from './explain.js';
import type { HoldFacts, MachinePresence } from './explain.js';
import type { Operation, RemoveFinalizersOp } from './operations.js';
import { foreignFinalizers, ourFinalizers } from '../ownership.js';
import type { Note, Plan, PlanItem, PlanOptions, Refusal, Snapshot } from './plan.js';
import { planDeregistration } from './deregistration.js';
import { childKinds, isStubRefusal, kindOf, parentsOf, statusMachineId, statusSpecOf } from './facts.js';
import { PROVISION_CONTROLLER } from '../profile.js';

export class Planner {
  readonly id: string;
  readonly whole: boolean;
  private readonly filter: Set<string>;
  private readonly matched = new Set<string>();
  readonly items: PlanItem[] = [];
  readonly refusals: Refusal[] = [];
  readonly running: Note[] = [];
  readonly blocked: Note[] = [];
  readonly waits: Note[] = [];
  readonly lettingGo: Note[] = [];
  readonly unseen: Note[] = [];
  readonly leftBehind: Note[] = [];
  readonly imById: Map<string, Resource>;
  readonly mrById: Map<string, Resource>;
  private readonly imsById: Map<string, Resource>;
  private readonly mrsById: Map<string, Resource>;
  private readonly bmcById: Map<string, Resource>;
  private machineIds: Set<string> | undefined;
  private readonly machinesUnreadable: boolean;
  private readonly nsById = new Map<string, Resource[]>();
  private readonly cprByRequest = new Map<string, Resource[]>();
  /** Resources of request-linked types in our namespace, by the request their label names (profile.ts). */
  private readonly linkedByRequest = new Map<string, Resource[]>();

  constructor(
    readonly s: Snapshot,
    readonly o: PlanOptions,
  ) {
    this.id = o.providerId;
    this.whole = o.machines.length === 0;
    this.filter = new Set(o.machines);
    this.imById = byId(s.infraMachines);
    this.mrById = byId(s.machineRequests);
    this.imsById = byId(s.infraMachineStatuses);
    this.mrsById = byId(s.machineRequestStatuses);
    this.bmcById = byId(s.bmcConfigs);
    this.machinesUnreadable = s.unreadable.some((u) => u.type === T.Machine);
    for (const type of s.profile.namespaceTypes) {
      for (const r of s.namespace[type] ?? []) push(this.nsById, r.metadata.id, r);
    }
    for (const r of s.configPatchRequests) {
      const req = r.metadata.labels[LABEL_MACHINE_REQUEST];
      if (req !== undefined) push(this.cprByRequest, req, r);
    }
    for (const type of s.profile.requestLinkedTypes) {
      for (const r of s.namespace[type] ?? []) {
        const req = r.metadata.labels[LABEL_MACHINE_REQUEST];
        if (req !== undefined) push(this.linkedByRequest, req, r);
      }
    }
  }

  build(): Plan {
    for (const im of this.s.infraMachines) this.planInfraMachine(im);
    for (const mr of this.s.machineRequests) this.planMachineRequest(mr);
    for (const bmc of this.s.bmcConfigs) this.planBmcConfig(bmc);
    const deregistration = planDeregistration(this);
    if (this.whole && deregistration.status !== 'ready') this.planLeftovers();
    const announce =
      this.whole && (this.items.length > 0 || this.refusals.some((r) => !r.done && r.request !== undefined));
    return {
      providerId: this.id,
      mode: this.whole ? 'whole' : 'machines',
      machines: [...this.o.machines],
      profile: this.s.profile,
      ...(this.s.omniVersion ? { omniVersion: this.s.omniVersion } : {}),
      items: this.items,
      refusals: this.refusals,
      running: this.running,
      blocked: this.blocked,
      waits: this.waits,
      lettingGo: this.lettingGo,
      unseen: this.unseen,
      leftBehind: this.leftBehind,
      notFound: this.o.machines.filter((m) => !this.matched.has(m)),
      deregistration,
      announce,
    };
  }

  /**
   * One item planned again, as `build` plans it, from a snapshot of what that item reads (the
   * executor's, after a conflict): its result is in `items` and the notes. A leftover (or a
   * clean-up of the deregistration) is one resource, disposed of again as it is now: what allowed
   * it (its parents confirmed gone, or the deregistration ready) was decided by the pass's plan.
   */
  replan(item: Pick<PlanItem, 'kind' | 'id' | 'reason'>, target: Pointer | undefined): void {
    switch (item.kind) {
      case 'InfraMachine': {
        const r = this.imById.get(item.id);
        if (r) this.planInfraMachine(r);
        return;
      }
      case 'MachineRequest': {
        const r = this.mrById.get(item.id);
        if (r) this.planMachineRequest(r);
        return;
      }
      case 'BMCConfig': {
        const r = this.bmcById.get(item.id);
        if (r) this.planBmcConfig(r);
        return;
      }
      case 'leftover': {
        const r = target
          ? this.perItem().find(
              (x) =>
                x.metadata.type === target.type &&
                x.metadata.namespace === target.namespace &&
                x.metadata.id === target.id,
            )
          : undefined;
        if (r)
          this.items.push({
            kind: 'leftover',
            id: r.metadata.id,
            reason: item.reason,
            ops: this.dispose(r, item.reason),
          });
        return;
      }
      case 'deregistration': {
        // Its last operations: the heartbeat and the ProviderStatus, as they are now.
        const ops = [
          ...(this.s.healthStatus ? this.dispose(this.s.healthStatus, item.reason) : []),
          ...(this.s.providerStatus ? this.dispose(this.s.providerStatus, item.reason) : []),
        ];
        if (ops.length > 0) this.items.push({ kind: 'deregistration', id: item.id, reason: item.reason, ops });
        return;
      }
    }
  }

  private selected(...ids: (string | undefined)[]): boolean {
    if (this.whole) return true;
    const hit = ids.filter((x): x is string => x !== undefined && this.filter.has(x));
    for (const h of hit) this.matched.add(h);
    return hit.length > 0;
  }

  /** Ours off (one Update), teardown if running and others hold it, wait for them, destroy as owner. */
  dispose(r: Resource, why: string, uuid?: string): Operation[] {
    const md = r.metadata;
    const mine = ourFinalizers(md, this.id);
    const foreign = foreignFinalizers(md, this.id);
    const target = pointerOf(r);
    const foundById = this.foundById(r);
    const ops: Operation[] = [];
    if (mine.length > 0)
      ops.push({
        op: 'remove-finalizers',
        target,
        version: md.version,
        phase: md.phase,
        finalizers: mine,
        foundById,
        why,
      });
    if (foreign.length > 0) {
      const holds = this.holdFacts(r, foreign, uuid);
      this.predict(r, holds, '');
      if (md.phase === PHASE_RUNNING) ops.push({ op: 'teardown', target, owner: md.owner, foundById, why });
      ops.push({ op: 'wait', target, finalizers: foreign, holds, foundById, why });
    }
    ops.push({ op: 'destroy', target, owner: md.owner, foundById, why });
    return ops;
  }

  /** One Update removing all our finalizers from a machine, a request or a BMCConfig being deleted. */
  private release(r: Resource, finalizers: string[], why: string, uuid?: string): RemoveFinalizersOp {
    const md = r.metadata;
    // Nothing but ours on it (every machine of a normal run): no list of others is made.
    const others =
      md.finalizers.length === finalizers.length ? [] : md.finalizers.filter((f) => !finalizers.includes(f));
    const holds = others.length > 0 ? this.holdFacts(r, others, uuid) : undefined;
    if (holds) this.predict(r, holds, 'once our finalizers are removed: ');
    return {
      op: 'remove-finalizers',
      target: pointerOf(r),
      version: md.version,
      phase: md.phase,
      finalizers,
      ...(holds ? { holds } : {}),
      foundById: this.foundById(r),
      why,
    };
  }

  /** The Gets of this pass that answered NotFound for `ps`: the item rests on those absences. */
  confirmedGone(ps: Iterable<Pointer>, why: string): Operation[] {
    const out: Operation[] = [];
    if (this.s.goneById.size === 0) return out;
    for (const p of ps)
      if (this.s.goneById.has(describePointer(p)))
        out.push({ op: 'get', target: pointerOf(p), answered: 'not-found', why });
    return out;
  }

  private childrenGone(parentType: typeof T.InfraMachine | typeof T.MachineRequest, id: string): Operation[] {
    if (this.s.goneById.size === 0) return [];
    return this.confirmedGone(
      childKinds(parentType, this.s.profile, this.id).map((k) => ({ ...k, id })),
      'read by its ID because no List held it: gone, so the release does not wait for it',
    );
  }

  /** What the snapshot shows about the finalizers of others that stay on `r`. */
  private holdFacts(r: Resource, remaining: string[], uuid: string | undefined): HoldFacts {
    const facts: HoldFacts = { providerId: this.id, remaining, ...(uuid ? { uuid } : {}) };
    if (r.metadata.type !== T.MachineRequestStatus) return facts;
    const statusMachine = statusSpecOf(r)?.id;
    if (statusMachine === undefined) return facts;
    this.machineIds ??= new Set(this.s.machines.map((m) => m.metadata.id));
    const machine: MachinePresence = this.machinesUnreadable
      ? 'unreadable'
      : this.machineIds.has(statusMachine)
        ? 'present'
        : 'absent';
    return { ...facts, statusMachine, ...(statusMachine !== '' ? { machine } : {}) };
  }

  /** A note under what Omni will do with the finalizers of others on `r`. */
  private predict(r: Resource, facts: HoldFacts, prefix: string): void {
    const holds = predictHolds(facts);
    const note = {
      kind: kindOf(r),
      id: r.metadata.id,
      reason: `${prefix}${describeHolds(holds)}`,
      nextStep: nextStepsOf(holds),
    };
    const p = predictionOf(holds);
    (p === 'waits' ? this.waits : p === 'lets-go' ? this.lettingGo : this.unseen).push(note);
  }

  /** A deletion under way that nothing of ours holds any more: blocked, unless Omni lets go by itself. */
  private heldByOthers(kind: string, r: Resource, foreign: string[], uuid: string | undefined): void {
    const facts = this.holdFacts(r, foreign, uuid);
    const holds = predictHolds(facts);
    const note: Note = {
      kind,
      id: r.metadata.id,
      reason: `being deleted, nothing of ours left on it; ${describeHolds(holds)}`,
      nextStep: nextStepsOf(holds),
      heldByOthers: { target: pointerOf(r), facts },
    };
    (predictionOf(holds) === 'lets-go' ? this.lettingGo : this.blocked).push(note);
  }

  private foundById(r: Resource): boolean {
    return this.s.foundById.has(r);
  }

  /** Every parent of a per-item resource confirmed gone by a Get of its ID in this snapshot. */
  private parentsGone(r: Resource): boolean {
    if (this.s.goneById.size === 0) return false;
    const ps = parentsOf(r, this.s.profile);
    return ps.length > 0 && ps.every((p) => this.s.goneById.has(describePointer(p)));
  }

  private planInfraMachine(im: Resource): void {
    const uuid = im.metadata.id;
    if (!this.selected(uuid)) return;
    const mine = ourFinalizers(im.metadata, this.id);
    if (im.metadata.phase === PHASE_RUNNING) {
      if (mine.length > 0) {
        this.running.push({
          kind: 'InfraMachine',
          id: uuid,
          reason: 'in use: nobody asked to delete it, so it keeps its finalizers',
          nextStep: `if it should go: take it out of its cluster, then omnictl delete link ${uuid}, and run again`,
        });
      } else if (this.whole) {
        this.refusals.push({
          kind: 'InfraMachine',
          id: uuid,
          reason: 'registered after the provider left: it gets no finalizers and stays pending',
          done: true,
        });
      } else {
        this.running.push({
          kind: 'InfraMachine',
          id: uuid,
          reason: 'running and never adopted (no finalizers of ours)',
          nextStep: `delete it with omnictl delete link ${uuid} if it should go`,
        });
      }
      return;
    }
    const ops: Operation[] = [];
    const outputs = this.machineOutputs(uuid);
    const bmcConfiguration = outputs.find((r) => r.metadata.type === providerType('BMCConfiguration', this.id));
    const bmcConfig = this.bmcById.get(uuid);
    // The BMCConfiguration is destroyed last of the machine's namespace resources, and only after the
    // wipe (a failed required wipe stops the chain first). None of them left while our finalizers
    // still hold the InfraMachine: an earlier run got past the wipe and cleaned up, and a wipe without
    // the BMC data can no longer happen; planning it again would block --require-wipe for good.
    const cleanedEarlier = !bmcConfiguration && !bmcConfig && outputs.length === 0;
    if (this.o.wipe && mine.length > 0 && cleanedEarlier) {
      this.leftBehind.push({
        kind: 'InfraMachine',
        id: uuid,
        reason: "wipe not repeated: the machine's BMC data was already cleaned up by an earlier run (after its wipe)",
        nextStep: "check the earlier run's report or the hardware if you need to know the wipe's result",
      });
    } else if (this.o.wipe && mine.length > 0) {
      const claimOn = this.imsById.get(uuid) ?? outputs[0];
      ops.push({
        op: 'wipe',
        machineId: uuid,
        ...(claimOn ? { claim: pointerOf(claimOn) } : {}),
        ...(bmcConfiguration ? { bmcConfiguration } : {}),
        ...(bmcConfig ? { bmcConfig } : {}),
      });
    }
    if (bmcConfig && bmcConfig.metadata.phase === PHASE_TEARING_DOWN) {
      const bm = ourFinalizers(bmcConfig.metadata, this.id);
      if (bm.length > 0)
        ops.push(
          this.release(bmcConfig, bm, 'legacy bare-metal (v0.4 and earlier) finalizer on a BMCConfig being deleted'),
        );
    }
    for (const r of outputs) ops.push(...this.dispose(r, 'per-machine state of the provider', uuid));
    const ims = this.imsById.get(uuid);
    if (ims) ops.push(...this.dispose(ims, "the provider's InfraMachineStatus of a machine being deleted", uuid));
    if (mine.length > 0)
      ops.push(
        this.release(
          im,
          mine,
          'the InfraMachine is being deleted; Omni destroys it once our finalizers are gone',
          uuid,
        ),
      );
    if (ops.some((op) => op.op !== 'wipe')) {
      this.items.push({
        kind: 'InfraMachine',
        id: uuid,
        reason: 'InfraMachine being deleted',
        ops: [...this.childrenGone(T.InfraMachine, uuid), ...ops],
      });
      return;
    }
    const foreign = foreignFinalizers(im.metadata, this.id);
    if (foreign.length > 0) this.heldByOthers('InfraMachine', im, foreign, uuid);
  }

  /** The machine's resources in `infra-provider:<id>`, BMCConfiguration last: a wipe or a retry may still need it. */
  private machineOutputs(uuid: string): Resource[] {
    const types = new Set(this.s.profile.machineTypes);
    const rs = (this.nsById.get(uuid) ?? []).filter((r) => types.has(r.metadata.type));
    const bmcType = providerType('BMCConfiguration', this.id);
    return [...rs.filter((r) => r.metadata.type !== bmcType), ...rs.filter((r) => r.metadata.type === bmcType)];
  }

  private planMachineRequest(mr: Resource): void {
    const rid = mr.metadata.id;
    const status = this.mrsById.get(rid);
    const machineUuid = status ? statusMachineId(status) : undefined;
    if (!this.selected(rid, machineUuid)) return;
    const mine = ourFinalizers(mr.metadata, this.id);
    const set = mr.metadata.labels[LABEL_MACHINE_REQUEST_SET];
    if (mr.metadata.phase === PHASE_RUNNING) {
      if (!status) {
        if (this.whole) {
          const op = {
            op: 'create' as const,
            target: { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: rid },
            owner: `${this.id}.${PROVISION_CONTROLLER}`,
            why: "a FAILED status, the request's labels copied (design rule 6)",
          };
          this.refusals.push({
            kind: 'MachineRequest',
            id: rid,
            reason: 'new request while the provider is decommissioned: answered with a FAILED status',
            request: mr,
            op,
            done: false,
          });
        } else {
          this.running.push({
            kind: 'MachineRequest',
            id: rid,
            reason: 'not provisioned and no status; per-machine mode writes nothing for it',
            nextStep: set
              ? `scale down MachineRequestSet ${set}`
              : `tear the request down (omnictl delete machinerequest ${rid})`,
          });
        }
      } else if (isStubRefusal(status)) {
        this.refusals.push({
          kind: 'MachineRequest',
          id: rid,
          reason: 'refused by an earlier run (FAILED status written by stub-provider)',
          done: true,
        });
      } else {
        this.running.push({
          kind: 'MachineRequest',
          id: rid,
          reason: 'in use: nobody asked to delete it',
          nextStep: set
            ? `scale down MachineRequestSet ${set} or delete the machine${machineUuid ? ` ${machineUuid}` : ''}, and ` +
              `run again`
            : `tear the request down (omnictl delete machinerequest ${rid}) and run again`,
        });
      }
      return;
    }
    const ops: Operation[] = [];
    for (const cpr of this.cprByRequest.get(rid) ?? [])
      ops.push(...this.dispose(cpr, 'config patch request of a request being deleted', machineUuid));
    if (status)
      ops.push(
        ...this.dispose(status, "status of a request being deleted; Omni's cleanup runs on its teardown", machineUuid),
      );
    const stateTypes = new Set(this.s.profile.stateTypes);
    const states = (this.nsById.get(rid) ?? []).filter((r) => stateTypes.has(r.metadata.type));
    for (const st of states) ops.push(...this.dispose(st, "the provider's per-request state", machineUuid));
    for (const lr of this.linkedByRequest.get(rid) ?? [])
      ops.push(...this.dispose(lr, "the provider's per-request state, naming the request by its label", machineUuid));
    if (mine.length > 0)
      ops.push(
        this.release(
          mr,
          mine,
          'the request is being deleted; Omni destroys it once the finalizers are gone',
          machineUuid,
        ),
      );
    if (ops.length > 0) {
      this.items.push({
        kind: 'MachineRequest',
        id: rid,
        reason: 'MachineRequest being deleted',
        ops: [...this.childrenGone(T.MachineRequest, rid), ...ops],
      });
      if (mine.length > 0) {
        this.leftBehind.push({
          kind: 'MachineRequest',
          id: rid,
          reason:
            `whatever the provider created outside Omni for this request (a VM, an ` +
            `instance${machineUuid ? `, machine ${machineUuid}` : ''}) is not deprovisioned`,
          nextStep: 'delete it in the infrastructure by hand',
        });
        if (states.length === 0 && !this.s.profile.stateTypesGiven) {
          this.leftBehind.push({
            kind: 'MachineRequest',
            id: rid,
            reason:
              `no per-request state found under ${this.s.profile.stateTypes.join(', ') || 'any known type'}; a ` +
              `provider that keeps it under another type leaves it in infra-provider:${this.id}`,
            nextStep: "pass --state-type <Name> with the provider's state type and run again",
          });
        }
      }
      return;
    }
    const foreign = foreignFinalizers(mr.metadata, this.id);
    if (foreign.length > 0) this.heldByOthers('MachineRequest', mr, foreign, machineUuid);
  }

  /** A BMCConfig being deleted whose InfraMachine is not (legacy bare-metal finalizers, docs/omni-lifecycle.md 3.1). */
  private planBmcConfig(bmc: Resource): void {
    const uuid = bmc.metadata.id;
    const im = this.imById.get(uuid);
    if (im && im.metadata.phase === PHASE_TEARING_DOWN) return; // part of the machine's chain
    if (bmc.metadata.phase !== PHASE_TEARING_DOWN || !this.selected(uuid)) return;
    const mine = ourFinalizers(bmc.metadata, this.id);
    if (mine.length === 0) return;
    this.items.push({
      kind: 'BMCConfig',
      id: uuid,
      reason: 'BMCConfig being deleted, held by a legacy bare-metal finalizer',
      ops: [this.release(bmc, mine, "it blocks Omni's InfraMachineBMCConfig -> Machine -> Link chain")],
    });
  }

  /** Every per-item resource of ours: statuses, ConfigPatchRequests, our namespace. */
  perItem(): Resource[] {
    return [
      ...this.s.infraMachineStatuses,
      ...this.s.machineRequestStatuses,
      ...this.s.configPatchRequests,
      ...this.s.profile.namespaceTypes.flatMap((t) => this.s.namespace[t] ?? []),
    ];
  }

  /**
   * Resources of ours whose InfraMachine or MachineRequest is gone (Omni never cleans them:
   * docs/omni-lifecycle.md 8): gone means a Get of its ID answered NotFound in this pass
   * (`goneById`), never that a List left it out. A parent that Get found is planned above like any
   * other.
   */
  private planLeftovers(): void {
    for (const r of this.perItem()) {
      if (this.parentsGone(r)) this.items.push(this.leftoverItem(r, leftoverReason(r)));
    }
  }

  private leftoverItem(r: Resource, reason: string): PlanItem {
    return {
      kind: 'leftover',
      id: r.metadata.id,
      reason,
      ops: [
        ...this.confirmedGone(parentsOf(r, this.s.profile), 'its machine or request: gone'),
        ...this.dispose(r, reason),
      ],
    };
  }
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

function byId(rs: Resource[]): Map<string, Resource> {
  return new Map(rs.map((r) => [r.metadata.id, r]));
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const xs = m.get(k);
  if (xs) xs.push(v);
  else m.set(k, [v]);
}

export function buildPlan(s: Snapshot, o: PlanOptions): Plan {
  return new Planner(s, o).build();
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
  const p = new Planner(s, o);
  p.replan(item, target);
  const planned = p.items.find((i) => i.kind === item.kind && i.id === item.id);
  if (planned) return { item: planned };
  const same = (n: Note) => n.id === item.id;
  const note = p.running.find(same) ?? p.blocked.find(same) ?? p.lettingGo.find(same);
  const lettingGo = p.lettingGo.find(same);
  return { ...(note ? { note } : {}), ...(lettingGo ? { lettingGo } : {}) };
}
