// PURE: a snapshot of Omni plus the operator's options -> what to do, in the order of design.md
// rule 5, with a reason for every step; what blocks what, with next steps; what stays behind.
// No I/O, no clock. Never plans anything on a running InfraMachine or MachineRequest (or on their
// outputs), never adds a finalizer, and removes only our finalizers, all of them in one Update.
// Positive evidence only (design rules 4 and 10): a leftover is what names a parent that a Get of
// its ID did not find, and every step says whether its target was read by its ID.

import type { Pointer, Resource } from '../omni-client/resource.js';
import { LABEL_MACHINE_REQUEST, LABEL_MACHINE_REQUEST_SET, PHASE_RUNNING, PHASE_TEARING_DOWN, T, describePointer, pointerOf, providerType } from '../omni-client/resource.js';
import { decodeSpec, MachineRequestStatusSpec as MachineRequestStatusSpecSchema } from '../omni-client/specs.js';
import type { MachineRequestStatusSpec } from '../omni-client/specs.js';
import { describeHolds, nextStepsOf, predictHolds, predictionOf } from './explain.js';
import type { HoldFacts, MachinePresence } from './explain.js';
import { foreignFinalizers, ourFinalizers } from './ownership.js';
import type { ResolvedProfile } from './profile.js';
import { parentsOf } from './snapshot.js';
import type { Snapshot } from './snapshot.js';

/** The marker that every error text and description the stub writes starts with (design rule 7). */
export const STUB_MARKER = 'stub-provider';

export interface PlanOptions {
  providerId: string;
  /** `--machine` values; empty = whole-provider mode. */
  machines: string[];
  /** Whole-provider mode only: destroy what is left and the statuses once nothing of the ID remains. */
  deregister: boolean;
  /** Put a wipe step first in each machine's chain (a wipe strategy other than `none`). */
  wipe: boolean;
}

export interface WipeStep {
  op: 'wipe';
  machineId: string;
  /** The machine's BMC data, read before anything of the machine is destroyed (design rule 8). */
  bmcConfiguration?: Resource;
  bmcConfig?: Resource;
}

/** Remove our finalizers (one Update), tear down if Omni must act first, wait for it, destroy as owner. */
export interface DisposeStep {
  op: 'dispose';
  target: Resource;
  removeFinalizers: string[];
  teardown: boolean;
  /** Finalizers that are not ours and must clear before the Destroy (Omni's own). */
  waitFor: string[];
  why: string;
  /** The target was read by a Get of its ID, not only listed: a NotFound for it means done (rule 4). */
  foundById: boolean;
  /** What decides whether Omni keeps holding it once ours are gone (set when `waitFor` is not empty). */
  holds?: HoldFacts;
}

/** One Update removing all our finalizers from a resource we may not otherwise change. */
export interface ReleaseStep {
  op: 'release';
  target: Resource;
  finalizers: string[];
  why: string;
  /** As for DisposeStep. */
  foundById: boolean;
  /** Set when finalizers of others stay on it: what decides whether they hold it after the release. */
  holds?: HoldFacts;
}

export type Step = WipeStep | DisposeStep | ReleaseStep;

export type ItemKind = 'InfraMachine' | 'MachineRequest' | 'BMCConfig' | 'leftover' | 'deregistration';

export interface PlanItem {
  kind: ItemKind;
  id: string;
  reason: string;
  /** Run in order; a step that fails or keeps waiting stops the rest of the item. */
  steps: Step[];
}

export interface Refusal {
  kind: 'MachineRequest' | 'InfraMachine';
  id: string;
  reason: string;
  /** The request to answer with a FAILED status; absent when nothing is to be written. */
  request?: Resource;
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
  /** What the operator runs last (printed, never run by the stub). */
  lastStep: string;
  warning?: string;
  item?: PlanItem;
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

/** Omni 1.4.0 added the cleanup that also tears down user-owned MachineRequestSets (lifecycle 5.1, 5.3). */
const DELETE_EFFECT = 'deleting the provider also tears down every user-owned MachineRequestSet, of every provider, not only this one: check `omnictl get machinerequestsets` first.';
export const DELETE_WARNING = `On Omni 1.4 and later, ${DELETE_EFFECT}`;
/** When Omni's version could not be read: the operator knows it, we do not. */
export const DELETE_WARNING_VERSION_UNKNOWN = `If this Omni is 1.4 or later (its version could not be read), ${DELETE_EFFECT}`;

/** The warning that goes with `omnictl infraprovider delete` for this Omni version; none before 1.4. */
export function deleteWarning(omniVersion: string | undefined): string | undefined {
  if (omniVersion === undefined || !/^v?\d+\.\d+/.test(omniVersion.trim())) return DELETE_WARNING_VERSION_UNKNOWN;
  return atLeast(omniVersion, 1, 4) ? DELETE_WARNING : undefined;
}

export function buildPlan(s: Snapshot, o: PlanOptions): Plan {
  return new Planner(s, o).build();
}

class Planner {
  private readonly id: string;
  private readonly whole: boolean;
  private readonly filter: Set<string>;
  private readonly matched = new Set<string>();
  private readonly items: PlanItem[] = [];
  private readonly refusals: Refusal[] = [];
  private readonly running: Note[] = [];
  private readonly blocked: Note[] = [];
  private readonly waits: Note[] = [];
  private readonly lettingGo: Note[] = [];
  private readonly unseen: Note[] = [];
  private readonly leftBehind: Note[] = [];
  private readonly imById: Map<string, Resource>;
  private readonly mrById: Map<string, Resource>;
  private readonly imsById: Map<string, Resource>;
  private readonly mrsById: Map<string, Resource>;
  private readonly bmcById: Map<string, Resource>;
  private machineIds: Set<string> | undefined;
  private readonly machinesUnreadable: boolean;
  private readonly nsById = new Map<string, Resource[]>();
  private readonly cprByRequest = new Map<string, Resource[]>();

  constructor(private readonly s: Snapshot, private readonly o: PlanOptions) {
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
  }

  build(): Plan {
    for (const im of this.s.infraMachines) this.planInfraMachine(im);
    for (const mr of this.s.machineRequests) this.planMachineRequest(mr);
    for (const bmc of this.s.bmcConfigs) this.planBmcConfig(bmc);
    const deregistration = this.planDeregistration();
    if (this.whole && deregistration.status !== 'ready') this.planLeftovers();
    const announce = this.whole && (this.items.length > 0 || this.refusals.some((r) => !r.done && r.request !== undefined));
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

  private selected(...ids: (string | undefined)[]): boolean {
    if (this.whole) return true;
    const hit = ids.filter((x): x is string => x !== undefined && this.filter.has(x));
    for (const h of hit) this.matched.add(h);
    return hit.length > 0;
  }

  private dispose(r: Resource, why: string, uuid?: string): DisposeStep {
    const mine = ourFinalizers(r.metadata, this.id);
    const foreign = foreignFinalizers(r.metadata, this.id);
    const holds = foreign.length > 0 ? this.holdFacts(r, foreign, uuid) : undefined;
    if (holds) this.predict(r, holds, '');
    return { op: 'dispose', target: r, removeFinalizers: mine, teardown: foreign.length > 0 && r.metadata.phase === PHASE_RUNNING, waitFor: foreign, why, foundById: this.foundById(r), ...(holds ? { holds } : {}) };
  }

  private release(r: Resource, finalizers: string[], why: string, uuid?: string): ReleaseStep {
    // Nothing but ours on it (every machine of a normal run): no list of others is made.
    const others = r.metadata.finalizers.length === finalizers.length ? [] : r.metadata.finalizers.filter((f) => !finalizers.includes(f));
    const holds = others.length > 0 ? this.holdFacts(r, others, uuid) : undefined;
    if (holds) this.predict(r, holds, 'once our finalizers are removed: ');
    return { op: 'release', target: r, finalizers, why, foundById: this.foundById(r), ...(holds ? { holds } : {}) };
  }

  /** What the snapshot shows about the finalizers of others that stay on `r`. */
  private holdFacts(r: Resource, remaining: string[], uuid: string | undefined): HoldFacts {
    const facts: HoldFacts = { providerId: this.id, remaining, ...(uuid ? { uuid } : {}) };
    if (r.metadata.type !== T.MachineRequestStatus) return facts;
    const statusMachine = statusSpecOf(r)?.id;
    if (statusMachine === undefined) return facts;
    this.machineIds ??= new Set(this.s.machines.map((m) => m.metadata.id));
    const machine: MachinePresence = this.machinesUnreadable ? 'unreadable' : this.machineIds.has(statusMachine) ? 'present' : 'absent';
    return { ...facts, statusMachine, ...(statusMachine !== '' ? { machine } : {}) };
  }

  /** A note under what Omni will do with the finalizers of others on `r`. */
  private predict(r: Resource, facts: HoldFacts, prefix: string): void {
    const holds = predictHolds(facts);
    const note = { kind: kindOf(r), id: r.metadata.id, reason: `${prefix}${describeHolds(holds)}`, nextStep: nextStepsOf(holds) };
    const p = predictionOf(holds);
    (p === 'waits' ? this.waits : p === 'lets-go' ? this.lettingGo : this.unseen).push(note);
  }

  /** A deletion under way that nothing of ours holds any more: blocked, unless Omni lets go by itself. */
  private heldByOthers(kind: string, r: Resource, foreign: string[], uuid: string | undefined): void {
    const facts = this.holdFacts(r, foreign, uuid);
    const holds = predictHolds(facts);
    const note: Note = { kind, id: r.metadata.id, reason: `being deleted, nothing of ours left on it; ${describeHolds(holds)}`, nextStep: nextStepsOf(holds), heldByOthers: { target: pointerOf(r), facts } };
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
        this.running.push({ kind: 'InfraMachine', id: uuid, reason: 'in use: nobody asked to delete it, so it keeps its finalizers', nextStep: `if it should go: take it out of its cluster, then omnictl delete link ${uuid}, and run again` });
      } else if (this.whole) {
        this.refusals.push({ kind: 'InfraMachine', id: uuid, reason: 'registered after the provider left: it gets no finalizers and stays pending', done: true });
      } else {
        this.running.push({ kind: 'InfraMachine', id: uuid, reason: 'running and never adopted (no finalizers of ours)', nextStep: `delete it with omnictl delete link ${uuid} if it should go` });
      }
      return;
    }
    const steps: Step[] = [];
    const outputs = this.machineOutputs(uuid);
    const bmcConfiguration = outputs.find((r) => r.metadata.type === providerType('BMCConfiguration', this.id));
    const bmcConfig = this.bmcById.get(uuid);
    // The BMCConfiguration is destroyed last of the machine's namespace resources, and only after the
    // wipe step (a failed required wipe stops the chain first). None of them left while our finalizers
    // still hold the InfraMachine: an earlier run got past the wipe and cleaned up, and a wipe without
    // the BMC data can no longer happen; planning it again would block --require-wipe for good.
    const cleanedEarlier = !bmcConfiguration && !bmcConfig && outputs.length === 0;
    if (this.o.wipe && mine.length > 0 && cleanedEarlier) {
      this.leftBehind.push({ kind: 'InfraMachine', id: uuid, reason: 'wipe not repeated: the machine\'s BMC data was already cleaned up by an earlier run (after its wipe)', nextStep: 'check the earlier run\'s report or the hardware if you need to know the wipe\'s result' });
    } else if (this.o.wipe && mine.length > 0) {
      steps.push({ op: 'wipe', machineId: uuid, ...(bmcConfiguration ? { bmcConfiguration } : {}), ...(bmcConfig ? { bmcConfig } : {}) });
    }
    if (bmcConfig && bmcConfig.metadata.phase === PHASE_TEARING_DOWN) {
      const bm = ourFinalizers(bmcConfig.metadata, this.id);
      if (bm.length > 0) steps.push(this.release(bmcConfig, bm, 'legacy bare-metal (v0.4 and earlier) finalizer on a BMCConfig being deleted'));
    }
    for (const r of outputs) steps.push(this.dispose(r, 'per-machine state of the provider', uuid));
    const ims = this.imsById.get(uuid);
    if (ims) steps.push(this.dispose(ims, 'the provider\'s InfraMachineStatus of a machine being deleted', uuid));
    if (mine.length > 0) steps.push(this.release(im, mine, 'the InfraMachine is being deleted; Omni destroys it once our finalizers are gone', uuid));
    if (steps.length > 0 && steps.some((st) => st.op !== 'wipe')) {
      this.items.push({ kind: 'InfraMachine', id: uuid, reason: 'InfraMachine being deleted', steps });
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
          this.refusals.push({ kind: 'MachineRequest', id: rid, reason: 'new request while the provider is decommissioned: answered with a FAILED status', request: mr, done: false });
        } else {
          this.running.push({ kind: 'MachineRequest', id: rid, reason: 'not provisioned and no status; per-machine mode writes nothing for it', nextStep: set ? `scale down MachineRequestSet ${set}` : `tear the request down (omnictl delete machinerequest ${rid})` });
        }
      } else if (isStubRefusal(status)) {
        this.refusals.push({ kind: 'MachineRequest', id: rid, reason: 'refused by an earlier run (FAILED status written by stub-provider)', done: true });
      } else {
        this.running.push({ kind: 'MachineRequest', id: rid, reason: 'in use: nobody asked to delete it', nextStep: set ? `scale down MachineRequestSet ${set} or delete the machine${machineUuid ? ` ${machineUuid}` : ''}, and run again` : `tear the request down (omnictl delete machinerequest ${rid}) and run again` });
      }
      return;
    }
    const steps: Step[] = [];
    for (const cpr of this.cprByRequest.get(rid) ?? []) steps.push(this.dispose(cpr, 'config patch request of a request being deleted', machineUuid));
    if (status) steps.push(this.dispose(status, 'status of a request being deleted; Omni\'s cleanup runs on its teardown', machineUuid));
    const stateTypes = new Set(this.s.profile.stateTypes);
    const states = (this.nsById.get(rid) ?? []).filter((r) => stateTypes.has(r.metadata.type));
    for (const st of states) steps.push(this.dispose(st, 'the provider\'s per-request state', machineUuid));
    if (mine.length > 0) steps.push(this.release(mr, mine, 'the request is being deleted; Omni destroys it once the finalizers are gone', machineUuid));
    if (steps.length > 0) {
      this.items.push({ kind: 'MachineRequest', id: rid, reason: 'MachineRequest being deleted', steps });
      if (mine.length > 0) {
        this.leftBehind.push({ kind: 'MachineRequest', id: rid, reason: `whatever the provider created outside Omni for this request (a VM, an instance${machineUuid ? `, machine ${machineUuid}` : ''}) is not deprovisioned`, nextStep: 'delete it in the infrastructure by hand' });
        if (states.length === 0 && !this.s.profile.stateTypesGiven) {
          this.leftBehind.push({ kind: 'MachineRequest', id: rid, reason: `no per-request state found under ${this.s.profile.stateTypes.join(', ') || 'any known type'}; a provider that keeps it under another type leaves it in infra-provider:${this.id}`, nextStep: 'pass --state-type <Name> with the provider\'s state type and run again' });
        }
      }
      return;
    }
    const foreign = foreignFinalizers(mr.metadata, this.id);
    if (foreign.length > 0) this.heldByOthers('MachineRequest', mr, foreign, machineUuid);
  }

  /** A BMCConfig being deleted whose InfraMachine is not (legacy bare-metal finalizers, lifecycle 2.3). */
  private planBmcConfig(bmc: Resource): void {
    const uuid = bmc.metadata.id;
    const im = this.imById.get(uuid);
    if (im && im.metadata.phase === PHASE_TEARING_DOWN) return; // part of the machine's chain
    if (bmc.metadata.phase !== PHASE_TEARING_DOWN || !this.selected(uuid)) return;
    const mine = ourFinalizers(bmc.metadata, this.id);
    if (mine.length === 0) return;
    this.items.push({ kind: 'BMCConfig', id: uuid, reason: 'BMCConfig being deleted, held by a legacy bare-metal finalizer', steps: [this.release(bmc, mine, 'it blocks Omni\'s InfraMachineBMCConfig -> Machine -> Link chain')] });
  }

  /**
   * Resources of ours whose InfraMachine or MachineRequest is gone (lifecycle 8.8 and step 4): gone
   * means a Get of its ID answered NotFound in this pass (`goneById`), never that a List left it
   * out. A parent that Get found is planned above like any other.
   */
  private planLeftovers(): void {
    for (const ims of this.s.infraMachineStatuses) {
      if (this.parentsGone(ims)) this.leftover(ims, 'InfraMachineStatus whose InfraMachine is gone (a Get of its ID answered NotFound)');
    }
    for (const mrs of this.s.machineRequestStatuses) {
      if (this.parentsGone(mrs)) this.leftover(mrs, 'MachineRequestStatus whose MachineRequest is gone (a Get of its ID answered NotFound)');
    }
    for (const cpr of this.s.configPatchRequests) {
      if (this.parentsGone(cpr)) this.leftover(cpr, `ConfigPatchRequest of request ${cpr.metadata.labels[LABEL_MACHINE_REQUEST] ?? ''}, which is gone (a Get of its ID answered NotFound)`);
    }
    for (const type of this.s.profile.namespaceTypes) {
      for (const r of this.s.namespace[type] ?? []) {
        if (this.parentsGone(r)) this.leftover(r, 'provider state whose machine or request is gone (a Get of its ID answered NotFound)');
      }
    }
  }

  private leftover(r: Resource, reason: string): void {
    this.items.push({ kind: 'leftover', id: r.metadata.id, reason, steps: [this.dispose(r, reason)] });
  }

  private planDeregistration(): Deregistration {
    const lastStep = `omnictl infraprovider delete ${this.id}`;
    const warning = deleteWarning(this.s.omniVersion);
    const base = { lastStep, ...(warning ? { warning } : {}) };
    if (!this.whole) return { status: 'per-machine', reasons: ['per-machine mode: the provider stays registered for when it comes back'], ...base };
    const reasons: string[] = [];
    // What this plan releases and nobody else holds, Omni destroys right after: it does not block.
    const releasing = new Set(this.items.filter(releasesCompletely).map((i) => `${i.kind}/${i.id}`));
    const count = (kind: string, rs: Resource[]) => {
      const n = rs.filter((r) => releasing.has(`${kind}/${r.metadata.id}`)).length;
      return { releasing: n, other: rs.length - n };
    };
    const ims = count('InfraMachine', this.s.infraMachines);
    const mrs = count('MachineRequest', this.s.machineRequests);
    if (ims.other > 0) reasons.push(`${ims.other} InfraMachine(s) of ${this.id} still exist`);
    if (mrs.other > 0) reasons.push(`${mrs.other} MachineRequest(s) of ${this.id} still exist`);
    for (const u of this.s.unreadable) reasons.push(`cannot read ${u.type} to check that no machine is left: ${u.error}`);
    // Positive evidence (design rule 10): a List that left out what a Get then found is not complete,
    // and what is left in our namespace may be destroyed only once each parent it names is gone.
    for (const r of this.s.missedByList) {
      reasons.push(`${kindOf(r)} ${r.metadata.id} was not in its List, but a Get of its ID found it: the Lists of this pass are not complete`);
    }
    reasons.push(...this.unconfirmedParents());
    for (const m of this.s.machines) {
      const note = this.machineNote(m);
      reasons.push(`Machine ${m.metadata.id}: ${note.reason}`);
      this.blocked.push(note);
    }
    if (!this.o.deregister) return { status: 'disabled', reasons: ['--no-deregister', ...reasons], ...base };
    if (reasons.length > 0) return { status: 'not-ready', reasons, ...base };
    if (ims.releasing + mrs.releasing > 0) {
      const what = [ims.releasing ? `${ims.releasing} InfraMachine(s)` : '', mrs.releasing ? `${mrs.releasing} MachineRequest(s)` : ''].filter(Boolean).join(' and ');
      return { status: 'after-releases', reasons: [`follows once the releases above are done: Omni then destroys the ${what} of ${this.id}, and nothing else of the provider is in use`], ...base };
    }
    const steps: Step[] = [];
    const why = 'deregistration: nothing of the provider is left in use';
    for (const r of [...this.s.infraMachineStatuses, ...this.s.machineRequestStatuses, ...this.s.configPatchRequests]) steps.push(this.dispose(r, why));
    for (const type of this.s.profile.namespaceTypes) for (const r of this.s.namespace[type] ?? []) steps.push(this.dispose(r, `${why}: emptying infra-provider:${this.id}`));
    if (this.s.healthStatus) steps.push(this.dispose(this.s.healthStatus, `${why}: the heartbeat`));
    if (this.s.providerStatus) steps.push(this.dispose(this.s.providerStatus, `${why}: the ProviderStatus, last`));
    if (steps.length === 0) return { status: 'done', reasons: ['nothing of the provider is left in Omni'], ...base };
    return { status: 'ready', reasons: [], ...base, item: { kind: 'deregistration', id: this.id, reason: why, steps } };
  }

  /** Parents named by what deregistration would destroy, neither listed nor confirmed gone by a Get. */
  private unconfirmedParents(): string[] {
    const out = new Map<string, string>();
    const perItem = [...this.s.infraMachineStatuses, ...this.s.machineRequestStatuses, ...this.s.configPatchRequests, ...this.s.profile.namespaceTypes.flatMap((t) => this.s.namespace[t] ?? [])];
    for (const r of perItem) {
      for (const p of parentsOf(r, this.s.profile)) {
        if ((p.type === T.InfraMachine ? this.imById : this.mrById).has(p.id)) continue;
        const key = describePointer(p);
        if (!this.s.goneById.has(key) && !out.has(key)) {
          out.set(key, `${kindOf(p)} ${p.id}, named by ${describePointer(r.metadata)}, was not confirmed gone by a Get of its ID`);
        }
      }
    }
    return [...out.values()];
  }

  private machineNote(m: Resource): Note {
    const uuid = m.metadata.id;
    const im = this.imById.get(uuid);
    const rid = m.metadata.labels[LABEL_MACHINE_REQUEST];
    const mr = rid !== undefined ? this.mrById.get(rid) : undefined;
    if (im && im.metadata.phase === PHASE_RUNNING) {
      return { kind: 'Machine', id: uuid, reason: 'its InfraMachine is still running (the machine is in use)', nextStep: `take it out of its cluster, then omnictl delete link ${uuid}` };
    }
    if (mr && mr.metadata.phase === PHASE_RUNNING) {
      const set = mr.metadata.labels[LABEL_MACHINE_REQUEST_SET];
      return { kind: 'Machine', id: uuid, reason: `its MachineRequest ${mr.metadata.id} is still running`, nextStep: set ? `scale down MachineRequestSet ${set}` : `omnictl delete machinerequest ${mr.metadata.id}` };
    }
    return { kind: 'Machine', id: uuid, reason: `still present (phase ${m.metadata.phase}); Omni removes it once its Link is gone`, nextStep: `omnictl delete link ${uuid} (on Omni before 1.4, take it out of its cluster first)` };
  }
}

/** A status the stub wrote to refuse a request: its error starts with our marker. */
export function isStubRefusal(status: Resource): boolean {
  return statusSpecOf(status)?.error.startsWith(STUB_MARKER) ?? false;
}

/** The decoded MachineRequestStatus spec, or undefined when the bytes do not decode. */
export function statusSpecOf(status: Resource): MachineRequestStatusSpec | undefined {
  try {
    return decodeSpec(MachineRequestStatusSpecSchema, status.spec.protoSpec).value;
  } catch {
    return undefined;
  }
}

/** The machine UUID a MachineRequestStatus names (field 1), when set. */
export function statusMachineId(status: Resource): string | undefined {
  return statusSpecOf(status)?.id || undefined;
}

/** `v1.4.0`, `1.3.4-beta.1` -> compares major.minor. */
export function atLeast(version: string, major: number, minor: number): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(version.trim());
  if (!m) return true;
  const [ma, mi] = [Number(m[1]), Number(m[2])];
  return ma > major || (ma === major && mi >= minor);
}

/**
 * An InfraMachine or MachineRequest item whose last step leaves it to Omni to destroy at once: no
 * finalizer of anyone else stays on it, or only Omni's that let go by themselves (`lettingGo`).
 */
export function releasesCompletely(item: PlanItem): boolean {
  if (item.kind !== 'InfraMachine' && item.kind !== 'MachineRequest') return false;
  const last = item.steps.at(-1);
  return last?.op === 'release' && (!last.holds || predictionOf(predictHolds(last.holds)) === 'lets-go');
}

function byId(rs: Resource[]): Map<string, Resource> {
  return new Map(rs.map((r) => [r.metadata.id, r]));
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const xs = m.get(k);
  if (xs) xs.push(v);
  else m.set(k, [v]);
}

function kindOf(r: Resource | { type: string }): string {
  const type = 'metadata' in r ? r.metadata.type : r.type;
  return type.split('.')[0] ?? type;
}

/**
 * The writes a plan makes before it has to wait for anyone: everything up to and including the
 * teardown of the first step that waits for Omni. Zero means a run would change nothing now.
 */
export function immediateWrites(plan: Plan): number {
  let n = 0;
  const items = [...plan.items, ...(plan.deregistration.item ? [plan.deregistration.item] : [])];
  for (const item of items) {
    for (const st of item.steps) {
      if (st.op === 'wipe') continue;
      if (st.op === 'release') { n += 1; continue; }
      n += st.removeFinalizers.length > 0 ? 1 : 0;
      if (st.waitFor.length > 0) { n += st.teardown ? 1 : 0; break; }
      n += 1;
    }
  }
  return n + plan.refusals.filter((r) => !r.done).length;
}
