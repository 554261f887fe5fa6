// Which resource types and finalizers a provider kind uses (docs/omni-lifecycle.md 1 and 3.1, docs/providers.md), and
// how
// `--profile` / `--state-type` turn into the types the stub reads and cleans.

import { providerType } from '../omni-api/resource.js';

export type ProfileOption = 'auto' | 'bare-metal' | 'provisioning';

/** Controller names bare-metal v0.5.0+ puts on every InfraMachine, as `<id>.<Name>` (1.2). */
export const BARE_METAL_CONTROLLERS = [
  'BMCConfigurationController',
  'InfraMachineStatusController',
  'MachineStatusController',
  'PowerOperationController',
  'RebootStatusController',
  'WipeStatusController',
] as const;

/** Bare-metal's types in `infra-provider:<id>` (docs/omni-wire.md 5.3); all keyed by machine UUID but TLSConfig. */
export const BARE_METAL_NAMESPACE_TYPES = [
  'BMCConfiguration',
  'MachineStatus',
  'PowerOperation',
  'RebootStatus',
  'WipeStatus',
  'TLSConfig',
] as const;

/** TLSConfig has one resource, `tls-config`: provider-wide, cleaned only when deregistering. */
export const PROVIDER_WIDE_IDS: ReadonlySet<string> = new Set(['tls-config']);

/** The provider library's controller that owns MachineRequestStatus and the state resource (1.1). */
export const PROVISION_CONTROLLER = 'ProvisionController';
export const HEALTH_STATUS_CONTROLLER = 'ProviderHealthStatusController';

export interface StateTypeSource {
  /** The provider, by its default ID. */
  provider: string;
  /** The short name of its per-request state type. */
  stateType: string;
  repo: string;
  file: string;
  commit: string;
}

/**
 * Per-request state types of the public SDK-based providers, each read from the provider's source
 * (docs/providers.md lists the same table). All of them call `infra.ResourceType("Machine", id)`.
 */
export const KNOWN_STATE_TYPES: readonly StateTypeSource[] = [
  {
    provider: 'kubevirt',
    stateType: 'Machine',
    repo: 'siderolabs/omni-infra-provider-kubevirt',
    file: 'internal/pkg/provider/resources/machine.go',
    commit: 'e5b928c88cffc06efff9dea2744794c8bd781f13',
  },
  {
    provider: 'libvirt',
    stateType: 'Machine',
    repo: 'siderolabs/omni-infra-provider-libvirt',
    file: 'internal/pkg/provider/resources/machine.go',
    commit: '261e7a83b7fb0dcebeaf9dca76da351eaba380a5',
  },
  {
    provider: 'proxmox',
    stateType: 'Machine',
    repo: 'siderolabs/omni-infra-provider-proxmox',
    file: 'internal/pkg/provider/resources/machine.go',
    commit: '0d9fd58da9ec9de75506938c755a03f4ade28ee8',
  },
  {
    provider: 'vsphere',
    stateType: 'Machine',
    repo: 'siderolabs/omni-infra-provider-vsphere',
    file: 'internal/pkg/provider/resources/machine.go',
    commit: '2b1463a2ff76e4b2c04f6cdeb934fb6366a32708',
  },
  {
    provider: 'proxmox (community)',
    stateType: 'Machine',
    repo: 'mitchross/omni-infra-provider-proxmox',
    file: 'internal/pkg/provider/resources/machine.go',
    commit: '4929213743fab2d6a9d72274f8f72381aac35284',
  },
];

/** The distinct short names of KNOWN_STATE_TYPES. */
export const KNOWN_STATE_TYPE_NAMES: readonly string[] = [...new Set(KNOWN_STATE_TYPES.map((s) => s.stateType))];

/** `Machine` -> `Machine.<id>.infraprovider.sidero.dev`; a full type string (it has a dot) as is. */
export function resolveStateType(name: string, providerId: string): string {
  return name.includes('.') ? name : providerType(name, providerId);
}

export interface ProfileFacts {
  staticLabel: boolean;
  infraMachines: number;
  machineRequests: number;
}

export interface ResolvedProfile {
  /** Treat InfraMachines as a bare-metal (static) provider's. */
  static: boolean;
  /** Treat MachineRequests as an SDK-based provisioning provider's. */
  provisioning: boolean;
  /** Why, for the report. */
  reason: string;
  /** Per-machine types in `infra-provider:<id>` (full type strings), keyed by machine UUID. */
  machineTypes: string[];
  /** Per-request state types (full type strings), keyed by request ID. */
  stateTypes: string[];
  /** Every type in `infra-provider:<id>` to read and, when deregistering, to empty. */
  namespaceTypes: string[];
  /** Whether the state types include one the operator named (otherwise only the known ones). */
  stateTypesGiven: boolean;
  /**
   * Whether a ProviderStatus the stub creates gets the static label: from the facts (InfraMachines of
   * the ID exist; only static providers have them) or `--profile bare-metal`, never dropped because
   * of `--profile provisioning`. Omni reads the label; a wrong one changes how it treats the machines.
   */
  staticLabel: boolean;
}

/**
 * `auto`: static if the ProviderStatus has the static label or InfraMachines exist, provisioning if
 * MachineRequests exist; both may hold. When nothing tells (everything already gone), both sets of
 * types are read, so leftovers of either kind are still found and cleaned.
 */
export function resolveProfile(
  option: ProfileOption,
  facts: ProfileFacts,
  providerId: string,
  extraTypes: string[] = [],
): ResolvedProfile {
  let isStatic: boolean;
  let isProvisioning: boolean;
  let reason: string;
  if (option === 'bare-metal') {
    [isStatic, isProvisioning, reason] = [true, false, '--profile bare-metal'];
  } else if (option === 'provisioning') {
    [isStatic, isProvisioning, reason] = [false, true, '--profile provisioning'];
  } else {
    isStatic = facts.staticLabel || facts.infraMachines > 0;
    isProvisioning = facts.machineRequests > 0;
    const why: string[] = [];
    if (facts.staticLabel) why.push('the ProviderStatus has the static label');
    if (facts.infraMachines > 0) why.push(`${facts.infraMachines} InfraMachine(s) exist`);
    if (facts.machineRequests > 0) why.push(`${facts.machineRequests} MachineRequest(s) exist`);
    if (!isStatic && !isProvisioning) {
      isStatic = true;
      isProvisioning = true;
      why.push('nothing tells the kind apart, so the types of both kinds are read');
    }
    reason = `auto: ${why.join('; ')}`;
  }
  const given = extraTypes.map((t) => resolveStateType(t, providerId));
  // Types the operator names are per-machine (static) or per-request (provisioning) as well.
  // Per-machine and per-request types of BOTH kinds whatever the profile: they only decide which
  // resources in our namespace belong to a machine or a request, so a leftover whose machine or request
  // is gone is recognised the same way whichever kind this run detected (a second run must not find
  // work the first one skipped).
  const machineTypes = uniq([
    ...BARE_METAL_NAMESPACE_TYPES.filter((n) => n !== 'TLSConfig').map((n) => providerType(n, providerId)),
    ...given,
  ]);
  const stateTypes = uniq([...KNOWN_STATE_TYPE_NAMES.map((n) => providerType(n, providerId)), ...given]);
  // Read (and, when deregistering, empty) the known types of BOTH kinds whatever the profile: a List
  // costs one call, and a provider labelled static can still have left a state resource of the other
  // kind in its namespace; missing it would make a "deregistered" run not final.
  const namespaceTypes = uniq([
    ...BARE_METAL_NAMESPACE_TYPES.map((n) => providerType(n, providerId)),
    ...KNOWN_STATE_TYPE_NAMES.map((n) => providerType(n, providerId)),
    ...given,
  ]);
  const staticLabel = option === 'bare-metal' || facts.infraMachines > 0;
  return {
    static: isStatic,
    provisioning: isProvisioning,
    reason,
    machineTypes,
    stateTypes,
    namespaceTypes,
    stateTypesGiven: given.length > 0,
    staticLabel,
  };
}

function uniq(xs: string[]): string[] {
  return [...new Set(xs)];
}

/** A full type must live in our namespace: Omni refuses other suffixes with InvalidArgument (docs/omni-wire.md 4.2). */
export function stateTypeProblem(name: string, providerId: string): string | undefined {
  if (name === '') return 'an empty --state-type';
  const full = resolveStateType(name, providerId);
  const suffix = `.${providerId}.infraprovider.sidero.dev`;
  if (!full.endsWith(suffix) || full.length === suffix.length) {
    return (
      `--state-type ${JSON.stringify(name)}: a full type string must end in ${JSON.stringify(suffix)} (or give ` +
      `the short name, like Machine)`
    );
  }
  return undefined;
}
