// What a run knows of Omni's resources while it works: what its reads showed, then what its own
// calls answered (a Get, an Update, a Destroy) and what its watches saw. The executor reads the
// resource it writes from here, waits for Omni through it, and plans an item again from it.

import type { Pointer, Resource } from '../omni-client/resource.js';
import { LABEL_MACHINE_REQUEST, NS_DEFAULT, NS_INFRA_PROVIDER, T } from '../omni-client/resource.js';
import type { PlanItem } from './plan.js';
import { statusMachineId } from './plan-facts.js';
import type { Snapshot } from './snapshot.js';
import type { FinalizerWaiter, WaitOutcome, WaitUntil } from './waiter.js';

export interface Reads {
  /** The resource as last known: read, written by this run, or seen by a watch; undefined when not known. */
  current(p: Pointer): Resource | undefined;
  /** A Get of it found it, or a write of this run left it so: read by its ID. */
  observe(r: Resource): void;
  /** A Get of this run found it (its answer not kept): read by its ID. */
  readById(p: Pointer): void;
  /** Positive evidence that it is gone (a DESTROYED event, our Destroy, a NotFound for what was read by its ID). */
  gone(p: Pointer): void;
  isGone(p: Pointer): boolean;
  /** Something read it by exactly its ID (a Get, a write, a watch event): a NotFound for it means done (rule 4). */
  namedById(p: Pointer): boolean;
  /**
   * Resolves once it has no finalizers at a version at least `minVersion`, or is gone; `gone`
   * waits also end on its absence (they only pace a pass or a sentence of the report).
   */
  wait(p: Pointer, until: WaitUntil, timeoutMs: number, minVersion?: string): Promise<WaitOutcome>;
  /** Its finalizers as a watch of this run saw them last, 'gone', or undefined when none saw it. */
  finalizersOf(p: Pointer): readonly string[] | 'gone' | undefined;
}

/** A source of resources by pointer and of ConfigPatchRequests by request, as `itemSnapshot` reads them. */
export interface ItemSource {
  get(p: Pointer): Resource | undefined;
  configPatchRequestsOf(requestId: string): Resource[];
  namedById(p: Pointer): boolean;
}

/**
 * What one item reads, now (the same shape as a pass's snapshot, for the same planner): its
 * machine or request and what belongs to it, the Machine its status names, the provider's statuses;
 * the evidence of the pass (`goneById`) carried over.
 */
export function itemSnapshot(pass: Snapshot, src: ItemSource, item: Pick<PlanItem, 'kind' | 'id'>, target?: Pointer): Snapshot {
  const id = item.id;
  const one = (namespace: string, type: string, rid = id): Resource[] => {
    const r = src.get({ namespace, type, id: rid });
    return r ? [r] : [];
  };
  const ns = Object.fromEntries(pass.profile.namespaceTypes.map((t) => [t, [] as Resource[]]));
  const out: Snapshot = {
    ...pass,
    infraMachines: [], infraMachineStatuses: [], bmcConfigs: [], machineRequests: [], machineRequestStatuses: [], configPatchRequests: [], machines: [],
    namespace: ns, missedByList: [], foundById: new Set(),
  };
  const nsOf = pass.profile.namespaceTypes.length > 0 ? namespaceOf(pass) : undefined;
  const fill = (types: string[]) => {
    if (!nsOf) return;
    for (const t of types) ns[t] = one(nsOf, t);
  };
  if (item.kind === 'InfraMachine' || item.kind === 'BMCConfig') {
    out.infraMachines = one(NS_INFRA_PROVIDER, T.InfraMachine);
    out.bmcConfigs = one(NS_INFRA_PROVIDER, T.BMCConfig);
    if (item.kind === 'InfraMachine') {
      out.infraMachineStatuses = one(NS_INFRA_PROVIDER, T.InfraMachineStatus);
      fill(pass.profile.machineTypes);
    }
  } else if (item.kind === 'MachineRequest') {
    out.machineRequests = one(NS_INFRA_PROVIDER, T.MachineRequest);
    out.machineRequestStatuses = one(NS_INFRA_PROVIDER, T.MachineRequestStatus);
    out.configPatchRequests = src.configPatchRequestsOf(id).filter((r) => r.metadata.labels[LABEL_MACHINE_REQUEST] === id);
    fill(pass.profile.stateTypes);
    const machine = out.machineRequestStatuses[0] ? statusMachineId(out.machineRequestStatuses[0]) : undefined;
    if (machine) out.machines = one(NS_DEFAULT, T.Machine, machine);
  } else if (item.kind === 'leftover' && target) {
    const r = src.get(target);
    if (r) {
      const list = listFor(out, r);
      if (list) list.push(r);
    }
  }
  if (item.kind === 'deregistration') {
    const hs = pass.healthStatus ? src.get(pass.healthStatus.metadata) : undefined;
    const ps = pass.providerStatus ? src.get(pass.providerStatus.metadata) : undefined;
    if (hs) out.healthStatus = hs; else delete out.healthStatus;
    if (ps) out.providerStatus = ps; else delete out.providerStatus;
  }
  const found = new Set<Resource>();
  for (const r of [...out.infraMachines, ...out.infraMachineStatuses, ...out.bmcConfigs, ...out.machineRequests, ...out.machineRequestStatuses, ...out.configPatchRequests, ...Object.values(ns).flat(), ...(out.healthStatus ? [out.healthStatus] : []), ...(out.providerStatus ? [out.providerStatus] : [])]) {
    if (src.namedById(r.metadata)) found.add(r);
  }
  out.foundById = found;
  return out;
}

function namespaceOf(pass: Snapshot): string {
  return `infra-provider:${pass.providerId}`;
}

/** The list of `s` a resource of that type goes in. */
function listFor(s: Snapshot, r: Resource): Resource[] | undefined {
  switch (r.metadata.type) {
    case T.InfraMachineStatus: return s.infraMachineStatuses;
    case T.MachineRequestStatus: return s.machineRequestStatuses;
    case T.ConfigPatchRequest: return s.configPatchRequests;
    default: return s.namespace[r.metadata.type];
  }
}

/**
 * Reads over a pass's snapshot: the resources as listed or read there, then what this run's calls
 * answered; waits and what they saw through the shared kind watches of `FinalizerWaiter`.
 */
export class PassReads implements Reads, ItemSource {
  private readonly byKey = new Map<string, Resource>();
  private readonly cprs = new Map<string, Resource[]>();
  private readonly overlay = new Map<string, Resource | null>();
  private readonly byId = new Set<string>();

  constructor(private readonly waiter: FinalizerWaiter) {}

  /** A new pass: its snapshot is what is known now (what earlier passes learned by ID is kept). */
  reset(s: Snapshot): void {
    this.byKey.clear();
    this.cprs.clear();
    this.overlay.clear();
    const all = [...s.infraMachines, ...s.infraMachineStatuses, ...s.bmcConfigs, ...s.machineRequests, ...s.machineRequestStatuses, ...s.configPatchRequests, ...s.machines, ...Object.values(s.namespace).flat(), ...(s.healthStatus ? [s.healthStatus] : []), ...(s.providerStatus ? [s.providerStatus] : [])];
    for (const r of all) {
      this.byKey.set(keyOf(r.metadata), r);
      if (s.foundById.has(r)) this.byId.add(keyOf(r.metadata));
    }
    for (const r of s.configPatchRequests) {
      const req = r.metadata.labels[LABEL_MACHINE_REQUEST];
      if (req === undefined) continue;
      const xs = this.cprs.get(req);
      if (xs) xs.push(r);
      else this.cprs.set(req, [r]);
    }
  }

  get(p: Pointer): Resource | undefined {
    return this.current(p);
  }

  configPatchRequestsOf(requestId: string): Resource[] {
    return (this.cprs.get(requestId) ?? []).flatMap((r) => {
      const now = this.current(r.metadata);
      return now ? [now] : [];
    });
  }

  current(p: Pointer): Resource | undefined {
    const k = keyOf(p);
    const o = this.overlay.get(k);
    if (o !== undefined) return o ?? undefined;
    return this.byKey.get(k);
  }

  observe(r: Resource): void {
    const k = keyOf(r.metadata);
    this.overlay.set(k, r);
    this.byId.add(k);
  }

  readById(p: Pointer): void {
    this.byId.add(keyOf(p));
  }

  gone(p: Pointer): void {
    this.overlay.set(keyOf(p), null);
  }

  isGone(p: Pointer): boolean {
    return this.overlay.get(keyOf(p)) === null || this.waiter.finalizersOf(p) === 'gone';
  }

  namedById(p: Pointer): boolean {
    return this.byId.has(keyOf(p)) || this.waiter.sawById(p);
  }

  wait(p: Pointer, until: WaitUntil, timeoutMs: number, minVersion?: string): Promise<WaitOutcome> {
    return this.waiter.wait(p, until, timeoutMs, minVersion);
  }

  finalizersOf(p: Pointer): readonly string[] | 'gone' | undefined {
    return this.waiter.finalizersOf(p);
  }
}

function keyOf(p: Pointer): string {
  return `${p.namespace}\u0000${p.type}\u0000${p.id}`;
}
