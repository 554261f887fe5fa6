// What a run knows of Omni's resources while it works: what its reads showed, then what its own
// calls answered (a Get, an Update, a Destroy) and what its watches saw. The executor reads the
// resource it writes from here, waits for Omni through it, and plans an item again from it.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_MACHINE_REQUEST, NS_DEFAULT, NS_INFRA_PROVIDER, T } from '../../omni-api/resource.js';
import type { PlanItem } from '../plan/plan.js';
import { statusMachineId } from '../plan/facts.js';
import type { Snapshot } from '../plan/plan.js';
import { withoutResources } from '../plan/plan.js';

export type WaitOutcome = 'released' | 'gone' | 'timeout' | 'aborted';
export type WaitUntil = 'no-finalizers' | 'gone';

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
export function itemSnapshot(
  pass: Snapshot,
  src: ItemSource,
  item: Pick<PlanItem, 'kind' | 'id'>,
  target?: Pointer,
): Snapshot {
  const id = item.id;
  const one = (namespace: string, type: string, rid = id): Resource[] => {
    const r = src.get({ namespace, type, id: rid });
    return r ? [r] : [];
  };
  const ns = Object.fromEntries(pass.profile.namespaceTypes.map((t) => [t, [] as Resource[]]));
  const out: Snapshot = { ...withoutResources(pass), namespace: ns };
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
    out.configPatchRequests = src
      .configPatchRequestsOf(id)
      .filter((r) => r.metadata.labels[LABEL_MACHINE_REQUEST] === id);
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
    if (hs) out.healthStatus = hs;
    else delete out.healthStatus;
    if (ps) out.providerStatus = ps;
    else delete out.providerStatus;
  }
  const found = new Set<Resource>();
  for (const r of [
    ...out.infraMachines,
    ...out.infraMachineStatuses,
    ...out.bmcConfigs,
    ...out.machineRequests,
    ...out.machineRequestStatuses,
    ...out.configPatchRequests,
    ...Object.values(ns).flat(),
    ...(out.healthStatus ? [out.healthStatus] : []),
    ...(out.providerStatus ? [out.providerStatus] : []),
  ]) {
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
    case T.InfraMachineStatus:
      return s.infraMachineStatuses;
    case T.MachineRequestStatus:
      return s.machineRequestStatuses;
    case T.ConfigPatchRequest:
      return s.configPatchRequests;
    default:
      return s.namespace[r.metadata.type];
  }
}
