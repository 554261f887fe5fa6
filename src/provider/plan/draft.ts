// PURE: the plan being drawn up, apart from the order in which planner.ts plans the items, so that
// each kind of item (infra-machine.ts, machine-request.ts, leftovers.ts, deregistration.ts) is planned
// in a file of its own over one shared state. It holds the snapshot indexed by ID, what the items
// and notes are so far, which `--machine` values matched, and the operations every item is made of:
// one resource disposed of (ours off, teardown, wait, destroy) or released (ours off), the Gets that
// confirmed an absence (design rule 10), and the notes on what others' finalizers will do once ours
// are gone (explain.ts).

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_MACHINE_REQUEST, PHASE_RUNNING, T, describePointer, pointerOf } from '../../omni-api/resource.js';
import { describeHolds, nextStepsOf, predictHolds, predictionOf } from './explain.js';
import type { HoldFacts, MachinePresence } from './explain.js';
import type { Operation, RemoveFinalizersOp } from './operations.js';
import { foreignFinalizers, ourFinalizers } from '../ownership.js';
import type { Note, PlanItem, PlanOptions, Refusal, Snapshot } from './plan.js';
import { childKinds, kindOf, statusSpecOf } from './facts.js';

export class PlanDraft {
  readonly id: string;
  readonly whole: boolean;
  private readonly filter: Set<string>;
  /** The `--machine` values something was selected by. */
  readonly matched = new Set<string>();
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
  readonly imsById: Map<string, Resource>;
  readonly mrsById: Map<string, Resource>;
  readonly bmcById: Map<string, Resource>;
  private machineIds: Set<string> | undefined;
  private readonly machinesUnreadable: boolean;
  /** Resources in `infra-provider:<id>`, by their ID (a machine's UUID or a request's ID). */
  readonly nsById = new Map<string, Resource[]>();
  readonly cprByRequest = new Map<string, Resource[]>();
  /** Resources of request-linked types in our namespace, by the request their label names (profile.ts). */
  readonly linkedByRequest = new Map<string, Resource[]>();

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

  /** Whether an item of these IDs is planned: always in whole-provider mode, else when `--machine` names one. */
  selected(...ids: (string | undefined)[]): boolean {
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
  release(r: Resource, finalizers: readonly string[], why: string, uuid?: string): RemoveFinalizersOp {
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

  /** The children of a machine or request that a Get of their ID found gone: its release does not wait for them. */
  childrenGone(parentType: typeof T.InfraMachine | typeof T.MachineRequest, id: string): Operation[] {
    if (this.s.goneById.size === 0) return [];
    return this.confirmedGone(
      childKinds(parentType, this.s.profile, this.id).map((k) => ({ ...k, id })),
      'read by its ID because no List held it: gone, so the release does not wait for it',
    );
  }

  /** A deletion under way that nothing of ours holds any more: blocked, unless Omni lets go by itself. */
  heldByOthers(kind: string, r: Resource, foreign: string[], uuid: string | undefined): void {
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

  /** Every per-item resource of ours: statuses, ConfigPatchRequests, our namespace. */
  perItem(): Resource[] {
    return [
      ...this.s.infraMachineStatuses,
      ...this.s.machineRequestStatuses,
      ...this.s.configPatchRequests,
      ...this.s.profile.namespaceTypes.flatMap((t) => this.s.namespace[t] ?? []),
    ];
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

  private foundById(r: Resource): boolean {
    return this.s.foundById.has(r);
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
