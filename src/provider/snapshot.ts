// Reads everything the plan needs: one List per type (or one Get for the single provider-wide
// resources), nothing per machine. The result is plain data; `plan.ts` decides from it.

import type { Resource } from '../omni-client/resource.js';
import {
  NS_DEFAULT, NS_EPHEMERAL, NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T, providerNamespace,
} from '../omni-client/resource.js';
import type { State } from '../omni-client/types.js';
import { NotFoundError, PermissionDeniedError, isOmniError } from '../omni-client/errors.js';
import type { OmniError } from '../omni-client/errors.js';
import { isOurResource, machineCarriesProvider } from './ownership.js';
import type { ProfileOption, ResolvedProfile } from './profile.js';
import { resolveProfile } from './profile.js';
import { LABEL_IS_STATIC_INFRA_PROVIDER } from '../omni-client/resource.js';
import { decodeSpec, SysVersionSpec } from '../omni-client/specs.js';

export interface Unreadable {
  namespace: string;
  type: string;
  error: string;
}

export interface Snapshot {
  providerId: string;
  /** Omni's backend version (SysVersion `current`), when readable. */
  omniVersion?: string;
  providerStatus?: Resource;
  healthStatus?: Resource;
  infraMachines: Resource[];
  infraMachineStatuses: Resource[];
  bmcConfigs: Resource[];
  machineRequests: Resource[];
  machineRequestStatuses: Resource[];
  configPatchRequests: Resource[];
  /** `Machines.omni.sidero.dev` carrying the ID (label or annotation); the others are dropped at once. */
  machines: Resource[];
  /** Resources in `infra-provider:<id>` by full type string (every type of the profile, even when empty). */
  namespace: Record<string, Resource[]>;
  profile: ResolvedProfile;
  /** Types that could not be read (for example Machines on an Omni that refuses them). */
  unreadable: Unreadable[];
}

export interface SnapshotOptions {
  providerId: string;
  profile: ProfileOption;
  /** `--state-type` values, short or full. */
  stateTypes: string[];
  signal?: AbortSignal;
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
  const id = opts.providerId;
  const call = { signal: opts.signal };
  const unreadable: Unreadable[] = [];
  const ours = (rs: Resource[]) => rs.filter((r) => isOurResource(r.metadata, id));

  const [shared, machines, providerStatus, healthStatus, sysVersion] = await Promise.all([
    Promise.all(SHARED_LISTS.map(([, type]) => state.list(NS_INFRA_PROVIDER, type, call).then(ours))),
    state.list(NS_DEFAULT, T.Machine, call).then(
      (rs) => rs.filter((r) => machineCarriesProvider(r.metadata, id)),
      (err: unknown) => {
        if (!isOmniError(err, PermissionDeniedError)) throw err;
        unreadable.push({ namespace: NS_DEFAULT, type: T.Machine, error: (err as OmniError).omniMessage });
        return [] as Resource[];
      },
    ),
    getOrUndefined(state, { namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id }, opts.signal),
    getOrUndefined(state, { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id }, opts.signal),
    // Readable with any valid signature (omni-wire.md 5.4); an older Omni may not have it.
    getOrUndefined(state, { namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' }, opts.signal).catch(() => undefined),
  ]);
  const byName = Object.fromEntries(SHARED_LISTS.map(([name], i) => [name, shared[i] ?? []])) as Record<(typeof SHARED_LISTS)[number][0], Resource[]>;

  const profile = resolveProfile(opts.profile, {
    staticLabel: providerStatus !== undefined && Object.hasOwn(providerStatus.metadata.labels, LABEL_IS_STATIC_INFRA_PROVIDER),
    infraMachines: byName.infraMachines.length,
    machineRequests: byName.machineRequests.length,
  }, id, opts.stateTypes);

  const nsLists = await Promise.all(profile.namespaceTypes.map((type) => state.list(providerNamespace(id), type, call)));
  const namespace: Record<string, Resource[]> = {};
  profile.namespaceTypes.forEach((type, i) => { namespace[type] = nsLists[i] ?? []; });

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
  };
}

async function getOrUndefined(state: State, p: { namespace: string; type: string; id: string }, signal?: AbortSignal): Promise<Resource | undefined> {
  try {
    return await state.get(p, { signal });
  } catch (err) {
    if (isOmniError(err, NotFoundError)) return undefined;
    throw err;
  }
}

/** SysVersion field 1, `backend_version` (for example `v1.3.4`); undefined when unset or unreadable. */
export function backendVersionOf(r: Resource): string | undefined {
  try {
    return decodeSpec(SysVersionSpec, r.spec.protoSpec).value.backend_version || undefined;
  } catch {
    return undefined;
  }
}
