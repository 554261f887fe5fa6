// The evidence by ID of one snapshot (docs/design.md rules 4 and 10), gathered over what its Lists
// held: which of the listed resources were read by their ID (a live event, a Get or a write of this
// run), which a List left out and a Get found, and one Get for each resource that a destructive step
// would take as absent and no List held: the parent a per-item resource names (only a NotFound makes
// it a leftover), and the children a release must come after (rule 5). None of those Gets in a run
// where every List holds what it should. Apart from snapshot.ts, which reads the Lists, because this
// is what a step may rest on, where the Lists are only what there is.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { PHASE_TEARING_DOWN, T, describePointer } from '../../omni-api/resource.js';
import type { CallOptions, State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import type { ProviderCache } from './cache.js';
import { isOurResource, ourFinalizers } from '../ownership.js';
import type { ResolvedProfile } from '../profile.js';
import type { Snapshot } from '../plan/plan.js';
import { childKinds, parentsOf, type NamespacedType } from '../plan/facts.js';

/** What a snapshot's Lists held; what a Get finds of ours that they left out joins them. */
type Listed = Pick<
  Snapshot,
  | 'infraMachines'
  | 'infraMachineStatuses'
  | 'bmcConfigs'
  | 'machineRequests'
  | 'machineRequestStatuses'
  | 'configPatchRequests'
  | 'namespace'
>;

export interface EvidenceInput {
  state: State;
  cache: ProviderCache;
  providerId: string;
  call: CallOptions;
  profile: ResolvedProfile;
  listed: Listed;
  /** Whether the parents missing from their List are read by ID (SnapshotOptions.checkParents); the children are. */
  checkParents: boolean;
  /** What the snapshot read by its ID already (the provider-wide Gets). */
  readById: Resource[];
}

/** The snapshot's evidence (the Snapshot of plan/plan.ts says what each holds). */
export interface Evidence {
  foundById: Set<Resource>;
  goneById: Set<string>;
  missedByList: Resource[];
}

/** One snapshot's evidence as it is gathered. */
interface Reading extends EvidenceInput, Evidence {
  /**
   * IDs by namespace and type: the IDs are the pooled strings of the lists; no key or pointer is
   * made for what a List holds (at 10 000 machines that is every one of 130 000 checks).
   */
  ids: Map<string, Map<string, Set<string>>>;
}

export async function readEvidence(input: EvidenceInput): Promise<Evidence> {
  const r: Reading = {
    ...input,
    ids: new Map(),
    foundById: new Set(input.readById),
    goneById: new Set(),
    missedByList: [],
  };
  indexListed(r);
  // The parents named by what is listed (whole-provider mode: leftovers and deregistration rest on
  // them), and the children whose destruction a release waits for (rule 5): a release must not
  // follow from a List that left one of them out.
  const found = await readMissing(r, [
    ...(r.checkParents ? missingParents(r) : []),
    ...missingChildren(r, r.listed.infraMachines),
    ...missingChildren(r, r.listed.machineRequests),
  ]);
  // Then the children of the parents a Get found.
  await readMissing(r, missingChildren(r, found));
  return { foundById: r.foundById, goneById: r.goneById, missedByList: r.missedByList };
}

/** Every listed ID indexed; what was read by its ID, or left out by its List in an earlier pass, noted. */
function indexListed(r: Reading): void {
  for (const rs of [r.listed.infraMachines, r.listed.machineRequests, perItem(r)]) {
    for (const x of rs) {
      idsOf(r, x.metadata).add(x.metadata.id);
      // Named by a live event, a Get or a write of this run: read by its ID (rule 4).
      if (r.cache.namedById(x.metadata)) r.foundById.add(x);
      // Left out by its List and found by a Get in an earlier pass: that List is still not complete.
      if (r.cache.wasMissed(x.metadata)) r.missedByList.push(x);
    }
  }
  for (const x of r.listed.bmcConfigs) if (r.cache.namedById(x.metadata)) r.foundById.add(x);
}

function idsOf(r: Reading, p: NamespacedType): Set<string> {
  let types = r.ids.get(p.namespace);
  if (!types) r.ids.set(p.namespace, (types = new Map()));
  let ids = types.get(p.type);
  if (!ids) types.set(p.type, (ids = new Set()));
  return ids;
}

function* perItem(r: Reading): Generator<Resource> {
  yield* r.listed.infraMachineStatuses;
  yield* r.listed.machineRequestStatuses;
  yield* r.listed.configPatchRequests;
  for (const t of r.profile.namespaceTypes) yield* r.listed.namespace[t] ?? [];
}

/** The list of the snapshot a resource of `p`'s kind joins. */
function listOf(r: Reading, p: Pointer): Resource[] {
  switch (p.type) {
    case T.InfraMachine:
      return r.listed.infraMachines;
    case T.MachineRequest:
      return r.listed.machineRequests;
    case T.InfraMachineStatus:
      return r.listed.infraMachineStatuses;
    case T.MachineRequestStatus:
      return r.listed.machineRequestStatuses;
    default:
      return (r.listed.namespace[p.type] ??= []);
  }
}

/** Gets what `ps` names and no List held; merges what they find (ours) into the lists. */
async function readMissing(r: Reading, ps: Iterable<Pointer>): Promise<Resource[]> {
  const wanted = new Map<string, Pointer>();
  for (const p of ps) if (!idsOf(r, p).has(p.id)) wanted.set(describePointer(p), p);
  // In the order asked, whatever order the answers come in: the plan is the same for the same Omni.
  const answers = await Promise.all(
    [...wanted].map(([key, p]) => getIfExists(r.state, p, r.call).then((x) => [key, p, x] as const)),
  );
  const found: Resource[] = [];
  for (const [key, p, x] of answers) {
    idsOf(r, p).add(p.id);
    if (!x) {
      r.goneById.add(key);
      r.cache.observeNotFound(p);
      continue;
    }
    r.missedByList.push(x);
    // Omni answers NotFound for what is not labelled with our ID: anything else is not planned.
    if (!isOurResource(x.metadata, r.providerId) || describePointer(x.metadata) !== key) continue;
    r.cache.observeMissed(x);
    const kept = r.cache.current(p) ?? r.cache.slim(x);
    r.foundById.add(kept);
    listOf(r, p).push(kept);
    found.push(kept);
  }
  return found;
}

function* missingParents(r: Reading): Generator<Pointer> {
  for (const x of perItem(r)) for (const p of parentsOf(x, r.profile)) if (!idsOf(r, p).has(p.id)) yield p;
}

/** The children no List held of the machines and requests among `parents` that a release is planned for. */
function* missingChildren(r: Reading, parents: Iterable<Resource>): Generator<Pointer> {
  const kindsOf = {
    [T.InfraMachine]: childKinds(T.InfraMachine, r.profile, r.providerId),
    [T.MachineRequest]: childKinds(T.MachineRequest, r.profile, r.providerId),
  };
  for (const x of parents) {
    const kinds =
      x.metadata.type === T.InfraMachine || x.metadata.type === T.MachineRequest ? kindsOf[x.metadata.type] : [];
    if (
      kinds.length === 0 ||
      x.metadata.phase !== PHASE_TEARING_DOWN ||
      ourFinalizers(x.metadata, r.providerId).length === 0
    )
      continue;
    for (const k of kinds) if (!idsOf(r, k).has(x.metadata.id)) yield { ...k, id: x.metadata.id };
  }
}
