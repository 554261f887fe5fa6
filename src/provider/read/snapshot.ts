// Reads everything the plan needs: what the cache of each type holds (cache.ts: its List, then
// what its watch saw; a `plan` lists once), one Get for each of the single provider-wide resources,
// nothing per machine, except one Get for each resource that a destructive step would take as
// absent and no cache held (design rule 10): the parent a per-item resource names (only a NotFound
// makes it a leftover), and the children a release must come after (rule 5). None of them in a run
// where every List holds what it should. The result is plain data (the Snapshot of plan/plan.ts); the planner decides.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import {
  NS_DEFAULT,
  NS_EPHEMERAL,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  PHASE_TEARING_DOWN,
  T,
  describePointer,
  providerNamespace,
} from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { hasCode } from '../../omni-client/errors.js';
import { ProviderCache } from './cache.js';
import { isOurResource, ourFinalizers } from '../ownership.js';
import type { OnStage } from '../run/stage.js';
import type { ProfileOption } from '../profile.js';
import { resolveProfile } from '../profile.js';
import type { Snapshot, Unreadable } from '../plan/plan.js';
import { childKinds, parentsOf, type NamespacedType } from '../plan/facts.js';
import { LABEL_IS_STATIC_INFRA_PROVIDER } from '../../omni-api/resource.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { SysVersionSpec } from '../../omni-api/specs/messages.js';

export interface SnapshotOptions {
  providerId: string;
  profile: ProfileOption;
  /** `--state-type` values, short or full. */
  stateTypes: string[];
  signal?: AbortSignal;
  /**
   * Read by ID the parents missing from their List (default true). Only whole-provider mode plans
   * leftovers and deregisters, the two things that rest on them; per-machine runs skip the Gets.
   * (The children of what is released are checked in both modes.)
   */
  checkParents?: boolean;
  /** The run's caches; without, one List per type (and nothing watched), as `plan` reads. */
  cache?: ProviderCache;
  /** Told `reading` first, then how far each kind's List got while it streams, and each kind as its List is in. */
  stage?: OnStage;
}

/** The types read in the shared namespaces, in a fixed order. */
const SHARED_LISTS = [
  ['infraMachines', T.InfraMachine],
  ['infraMachineStatuses', T.InfraMachineStatus],
  ['bmcConfigs', T.BMCConfig],
  ['machineRequests', T.MachineRequest],
  ['machineRequestStatuses', T.MachineRequestStatus],
  ['configPatchRequests', T.ConfigPatchRequest],
] as const;

export async function takeSnapshot(state: State, opts: SnapshotOptions): Promise<Snapshot> {
  const cache =
    opts.cache ??
    new ProviderCache(state, {
      providerId: opts.providerId,
      live: false,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  // How far each List got, while it streams: a long List is never a silent step.
  cache.onListProgress = opts.stage ? (kind, count) => opts.stage?.('reading', { kind, count }) : undefined;
  try {
    return await readSnapshot(state, cache, opts);
  } finally {
    cache.onListProgress = undefined;
    if (!opts.cache) cache.close();
  }
}

async function readSnapshot(state: State, cache: ProviderCache, opts: SnapshotOptions): Promise<Snapshot> {
  const id = opts.providerId;
  const call = { signal: opts.signal };
  const unreadable: Unreadable[] = [];
  cache.clearChanged();
  // What the cache holds of the kind: ours only (labelled with the ID, in our namespace; Machines carrying it).
  opts.stage?.('reading');
  const list = async (namespace: string, type: string) => {
    const items = await cache.list(namespace, type);
    opts.stage?.('reading', { kind: type, count: items.length });
    return items;
  };
  const record = async (p: Pointer) => {
    const r = await getIfExists(state, p, call);
    if (r) cache.observe(r);
    else cache.observeNotFound(p);
    return r;
  };
  const [shared, machines, providerStatus, healthStatus, sysVersion] = await Promise.all([
    Promise.all(SHARED_LISTS.map(([, type]) => list(NS_INFRA_PROVIDER, type))),
    list(NS_DEFAULT, T.Machine).catch((err: unknown) => {
      if (!hasCode(err, 'OMNI_PERMISSION_DENIED')) throw err;
      unreadable.push({ namespace: NS_DEFAULT, type: T.Machine, error: err.omniMessage });
      return [] as Resource[];
    }),
    record({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id }),
    record({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id }),
    // Readable with any valid signature (docs/omni-wire.md 4.6); an older Omni may not have it.
    getIfExists(state, { namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' }, call).catch(() => undefined),
  ]);
  const byName = Object.fromEntries(SHARED_LISTS.map(([name], i) => [name, shared[i] ?? []])) as Record<
    (typeof SHARED_LISTS)[number][0],
    Resource[]
  >;

  const resolve = () =>
    resolveProfile(
      opts.profile,
      {
        staticLabel:
          providerStatus !== undefined && Object.hasOwn(providerStatus.metadata.labels, LABEL_IS_STATIC_INFRA_PROVIDER),
        infraMachines: byName.infraMachines.length,
        machineRequests: byName.machineRequests.length,
      },
      id,
      opts.stateTypes,
    );
  let profile = resolve();

  const nsLists = await Promise.all(profile.namespaceTypes.map((type) => list(providerNamespace(id), type)));
  const namespace: Record<string, Resource[]> = {};
  profile.namespaceTypes.forEach((type, i) => {
    namespace[type] = nsLists[i] ?? [];
  });

  // Absences that a destructive step would rest on, each checked by one Get of the ID (rule 10).
  const foundById = new Set<Resource>([providerStatus, healthStatus].filter((r) => r !== undefined));
  const goneById = new Set<string>();
  const missedByList: Resource[] = [];
  // IDs by namespace and type: the IDs are the pooled strings of the lists; no key or pointer is
  // made for what a List holds (at 10 000 machines that is every one of 130 000 checks).
  const listed = new Map<string, Map<string, Set<string>>>();
  const idsOf = (p: NamespacedType): Set<string> => {
    let types = listed.get(p.namespace);
    if (!types) listed.set(p.namespace, (types = new Map()));
    let ids = types.get(p.type);
    if (!ids) types.set(p.type, (ids = new Set()));
    return ids;
  };
  function* perItem(): Generator<Resource> {
    yield* byName.infraMachineStatuses;
    yield* byName.machineRequestStatuses;
    yield* byName.configPatchRequests;
    for (const t of profile.namespaceTypes) yield* namespace[t] ?? [];
  }
  for (const rs of [byName.infraMachines, byName.machineRequests, perItem()]) {
    for (const r of rs) {
      idsOf(r.metadata).add(r.metadata.id);
      // Named by a live event, a Get or a write of this run: read by its ID (rule 4).
      if (cache.namedById(r.metadata)) foundById.add(r);
      // Left out by its List and found by a Get in an earlier pass: that List is still not complete.
      if (cache.wasMissed(r.metadata)) missedByList.push(r);
    }
  }
  for (const r of byName.bmcConfigs) if (cache.namedById(r.metadata)) foundById.add(r);
  const listOf = (p: Pointer): Resource[] => {
    switch (p.type) {
      case T.InfraMachine:
        return byName.infraMachines;
      case T.MachineRequest:
        return byName.machineRequests;
      case T.InfraMachineStatus:
        return byName.infraMachineStatuses;
      case T.MachineRequestStatus:
        return byName.machineRequestStatuses;
      default:
        return (namespace[p.type] ??= []);
    }
  };
  /** Gets what `ps` names and no List held; merges what they find (ours) into the lists. */
  const readMissing = async (ps: Iterable<Pointer>): Promise<Resource[]> => {
    const wanted = new Map<string, Pointer>();
    for (const p of ps) if (!idsOf(p).has(p.id)) wanted.set(describePointer(p), p);
    // In the order asked, whatever order the answers come in: the plan is the same for the same Omni.
    const answers = await Promise.all(
      [...wanted].map(([key, p]) => getIfExists(state, p, call).then((r) => [key, p, r] as const)),
    );
    const found: Resource[] = [];
    for (const [key, p, r] of answers) {
      idsOf(p).add(p.id);
      if (!r) {
        goneById.add(key);
        cache.observeNotFound(p);
        continue;
      }
      missedByList.push(r);
      // Omni answers NotFound for what is not labelled with our ID: anything else is not planned.
      if (!isOurResource(r.metadata, id) || describePointer(r.metadata) !== key) continue;
      cache.observeMissed(r);
      const kept = cache.current(p) ?? cache.slim(r);
      foundById.add(kept);
      listOf(p).push(kept);
      found.push(kept);
    }
    return found;
  };
  function* missingParents(): Generator<Pointer> {
    for (const r of perItem()) for (const p of parentsOf(r, profile)) if (!idsOf(p).has(p.id)) yield p;
  }
  const kindsOf = {
    [T.InfraMachine]: childKinds(T.InfraMachine, profile, id),
    [T.MachineRequest]: childKinds(T.MachineRequest, profile, id),
  };
  function* missingChildren(parents: Iterable<Resource>): Generator<Pointer> {
    for (const r of parents) {
      const kinds =
        r.metadata.type === T.InfraMachine || r.metadata.type === T.MachineRequest ? kindsOf[r.metadata.type] : [];
      if (kinds.length === 0 || r.metadata.phase !== PHASE_TEARING_DOWN || ourFinalizers(r.metadata, id).length === 0)
        continue;
      for (const k of kinds) if (!idsOf(k).has(r.metadata.id)) yield { ...k, id: r.metadata.id };
    }
  }
  // The parents named by what is listed (whole-provider mode: leftovers and deregistration rest on
  // them), and the children whose destruction a release waits for (rule 5): a release must not
  // follow from a List that left one of them out.
  const found = await readMissing([
    ...((opts.checkParents ?? true) ? missingParents() : []),
    ...missingChildren(byName.infraMachines),
    ...missingChildren(byName.machineRequests),
  ]);
  // Then the children of the parents a Get found.
  await readMissing(missingChildren(found));
  if (missedByList.length > 0) profile = resolve();

  const omniVersion = sysVersion ? backendVersionOf(sysVersion) : undefined;
  return {
    providerId: id,
    ...(omniVersion ? { omniVersion } : {}),
    ...(providerStatus ? { providerStatus } : {}),
    ...(healthStatus ? { healthStatus } : {}),
    ...byName,
    machines,
    namespace,
    profile,
    unreadable,
    goneById,
    missedByList,
    foundById,
  };
}

/** SysVersion field 1, `backend_version` (for example `v1.3.4`); undefined when unset or unreadable. */
export function backendVersionOf(r: Resource): string | undefined {
  try {
    return decodeSpec(SysVersionSpec, r.spec.protoSpec).value.backend_version || undefined;
  } catch {
    return undefined;
  }
}
