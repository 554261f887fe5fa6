// Reads everything the plan needs: what the cache of each type holds (cache.ts: its List, then
// what its watch saw; a `plan` lists once), one Get for each of the single provider-wide resources,
// nothing per machine, except one Get for each resource that a destructive step would take as
// absent and no cache held (design rule 10; evidence.ts). The result is plain data (the Snapshot of
// plan/plan.ts); the planner decides.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import {
  LABEL_IS_STATIC_INFRA_PROVIDER,
  NS_DEFAULT,
  NS_EPHEMERAL,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  T,
  providerNamespace,
} from '../../omni-api/resource.js';
import type { CallOptions, State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { hasCode } from '../../omni-client/errors.js';
import { ProviderCache } from './cache.js';
import { readEvidence } from './evidence.js';
import type { OnStage } from '../run/stage.js';
import type { ProfileOption, ResolvedProfile } from '../profile.js';
import { resolveProfile } from '../profile.js';
import type { Snapshot, Unreadable } from '../plan/plan.js';
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

type SharedLists = Record<(typeof SHARED_LISTS)[number][0], Resource[]>;

/** What is read before the profile is known: the shared namespaces' Lists and the provider-wide resources. */
interface ProviderWide {
  shared: SharedLists;
  machines: Resource[];
  providerStatus: Resource | undefined;
  healthStatus: Resource | undefined;
  sysVersion: Resource | undefined;
  unreadable: Unreadable[];
}

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
  cache.clearChanged();
  opts.stage?.('reading');
  const wide = await readProviderWide(state, cache, opts, call);
  let profile = profileOf(opts, wide);
  const namespace = await listNamespace(cache, opts, profile);
  const { providerStatus, healthStatus } = wide;
  // Absences that a destructive step would rest on, each checked by one Get of the ID (rule 10).
  const evidence = await readEvidence({
    state,
    cache,
    providerId: id,
    call,
    profile,
    listed: { ...wide.shared, namespace },
    checkParents: opts.checkParents ?? true,
    readById: [providerStatus, healthStatus].filter((r) => r !== undefined),
  });
  if (evidence.missedByList.length > 0) profile = profileOf(opts, wide);
  const omniVersion = wide.sysVersion ? backendVersionOf(wide.sysVersion) : undefined;
  return {
    providerId: id,
    ...(omniVersion ? { omniVersion } : {}),
    ...(providerStatus ? { providerStatus } : {}),
    ...(healthStatus ? { healthStatus } : {}),
    ...wide.shared,
    machines: wide.machines,
    namespace,
    profile,
    unreadable: wide.unreadable,
    goneById: evidence.goneById,
    missedByList: evidence.missedByList,
    foundById: evidence.foundById,
  };
}

/** The shared namespaces' Lists, the Machines carrying the ID, and one Get of each provider-wide resource. */
async function readProviderWide(
  state: State,
  cache: ProviderCache,
  opts: SnapshotOptions,
  call: CallOptions,
): Promise<ProviderWide> {
  const id = opts.providerId;
  const unreadable: Unreadable[] = [];
  const [shared, machines, providerStatus, healthStatus, sysVersion] = await Promise.all([
    Promise.all(SHARED_LISTS.map(([, type]) => listKind(cache, opts, NS_INFRA_PROVIDER, type))),
    listKind(cache, opts, NS_DEFAULT, T.Machine).catch((err: unknown) => {
      if (!hasCode(err, 'OMNI_PERMISSION_DENIED')) throw err;
      unreadable.push({ namespace: NS_DEFAULT, type: T.Machine, error: err.omniMessage });
      return [] as Resource[];
    }),
    getObserved(state, cache, { namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id }, call),
    getObserved(state, cache, { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id }, call),
    // Readable with any valid signature (docs/omni-wire.md 4.6); an older Omni may not have it.
    getIfExists(state, { namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' }, call).catch(() => undefined),
  ]);
  const byName = Object.fromEntries(SHARED_LISTS.map(([name], i) => [name, shared[i] ?? []])) as SharedLists;
  return { shared: byName, machines, providerStatus, healthStatus, sysVersion, unreadable };
}

/** What the cache holds of the kind: ours only (labelled with the ID, in our namespace; Machines carrying it). */
async function listKind(
  cache: ProviderCache,
  opts: SnapshotOptions,
  namespace: string,
  type: string,
): Promise<Resource[]> {
  const items = await cache.list(namespace, type);
  opts.stage?.('reading', { kind: type, count: items.length });
  return items;
}

/** A Get whose answer, found or NotFound, the cache is told of. */
async function getObserved(
  state: State,
  cache: ProviderCache,
  p: Pointer,
  call: CallOptions,
): Promise<Resource | undefined> {
  const r = await getIfExists(state, p, call);
  if (r) cache.observe(r);
  else cache.observeNotFound(p);
  return r;
}

/** The profile, from the operator's option and what was read (the static label, how many machines and requests). */
function profileOf(opts: SnapshotOptions, wide: ProviderWide): ResolvedProfile {
  const { providerStatus, shared } = wide;
  return resolveProfile(
    opts.profile,
    {
      staticLabel:
        providerStatus !== undefined && Object.hasOwn(providerStatus.metadata.labels, LABEL_IS_STATIC_INFRA_PROVIDER),
      infraMachines: shared.infraMachines.length,
      machineRequests: shared.machineRequests.length,
    },
    opts.providerId,
    opts.stateTypes,
  );
}

/** Each type of the profile in `infra-provider:<id>`, even when empty. */
async function listNamespace(
  cache: ProviderCache,
  opts: SnapshotOptions,
  profile: ResolvedProfile,
): Promise<Record<string, Resource[]>> {
  const ns = providerNamespace(opts.providerId);
  const nsLists = await Promise.all(profile.namespaceTypes.map((type) => listKind(cache, opts, ns, type)));
  const namespace: Record<string, Resource[]> = {};
  profile.namespaceTypes.forEach((type, i) => {
    namespace[type] = nsLists[i] ?? [];
  });
  return namespace;
}

/** SysVersion field 1, `backend_version` (for example `v1.3.4`); undefined when unset or unreadable. */
export function backendVersionOf(r: Resource): string | undefined {
  try {
    return decodeSpec(SysVersionSpec, r.spec.protoSpec).value.backend_version || undefined;
  } catch {
    return undefined;
  }
}
