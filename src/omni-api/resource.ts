// The COSI resource model, in Omni's words (cosi.resource.Metadata / Spec / Resource).
// Shared by the client and the simulated Omni; it knows nothing about HTTP.

export type Phase = 'running' | 'tearingDown';

export const PHASE_RUNNING: Phase = 'running';
export const PHASE_TEARING_DOWN: Phase = 'tearingDown';

/** The literal Omni uses for "no version yet" (Create) and for tombstones. */
export const VERSION_UNDEFINED = 'undefined';

export interface Pointer {
  namespace: string;
  type: string;
  id: string;
}

export interface Metadata extends Pointer {
  /** Decimal uint64 as a string, or `undefined`. Never empty. */
  version: string;
  owner: string;
  phase: Phase;
  /** RFC 3339 UTC strings as Omni's gateway prints them; absent when unset. */
  created?: string;
  updated?: string;
  /** Set semantics; order is kept as read so that an Update sends back what it read. */
  finalizers: string[];
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface Spec {
  /** The protobuf encoding of the typed spec, passed through untouched unless we mean to change it. */
  protoSpec: Uint8Array;
  /** The server's YAML rendering (or, for opaque provider types, what the writer sent). */
  yamlSpec?: string;
  /**
   * The spec was not kept when the resource was read (only its metadata is needed): `protoSpec` is
   * empty and says nothing. The client refuses to write such a resource back (it would erase the spec).
   */
  omitted?: true;
}

export interface Resource {
  metadata: Metadata;
  spec: Spec;
}

export function pointerOf(r: { metadata: Pointer } | Pointer): Pointer {
  const p = 'metadata' in r ? r.metadata : r;
  return { namespace: p.namespace, type: p.type, id: p.id };
}

/** `namespace/type/id`, the way errors and logs name a resource. */
export function describePointer(p: Pointer): string {
  return `${p.namespace}/${p.type}/${p.id}`;
}

export function newMetadata(p: Pointer, init: Partial<Omit<Metadata, keyof Pointer>> = {}): Metadata {
  return {
    namespace: p.namespace,
    type: p.type,
    id: p.id,
    version: init.version ?? VERSION_UNDEFINED,
    owner: init.owner ?? '',
    phase: init.phase ?? PHASE_RUNNING,
    ...(init.created !== undefined ? { created: init.created } : {}),
    ...(init.updated !== undefined ? { updated: init.updated } : {}),
    finalizers: [...(init.finalizers ?? [])],
    labels: { ...(init.labels ?? {}) },
    annotations: { ...(init.annotations ?? {}) },
  };
}

export function cloneResource(r: Resource): Resource {
  return {
    metadata: {
      ...r.metadata,
      finalizers: [...r.metadata.finalizers],
      labels: { ...r.metadata.labels },
      annotations: { ...r.metadata.annotations },
    },
    spec: {
      protoSpec: new Uint8Array(r.spec.protoSpec),
      ...(r.spec.yamlSpec !== undefined ? { yamlSpec: r.spec.yamlSpec } : {}),
      ...(r.spec.omitted ? { omitted: true as const } : {}),
    },
  };
}

/** Parses a metadata version; `undefined` counts as 0, which never matches a stored resource. */
export function versionNumber(version: string): bigint {
  if (version === VERSION_UNDEFINED) return 0n;
  return BigInt(version);
}

export function isValidVersion(version: string): boolean {
  return version === VERSION_UNDEFINED || /^[0-9]+$/.test(version);
}

export function isValidPhase(phase: string): phase is Phase {
  return phase === PHASE_RUNNING || phase === PHASE_TEARING_DOWN;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function recordsEqual(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

// Well-known names (docs/omni-wire.md 5.1, docs/omni-lifecycle.md 1).
export const NS_INFRA_PROVIDER = 'infra-provider';
export const NS_INFRA_PROVIDER_EPHEMERAL = 'infra-provider-ephemeral';
export const NS_DEFAULT = 'default';
export const NS_EPHEMERAL = 'ephemeral';
export const NS_META = 'meta';

/** `infra-provider:<id>`, the provider's own namespace. */
export function providerNamespace(providerId: string): string {
  return `infra-provider:${providerId}`;
}

/** `<Name>.<id>.infraprovider.sidero.dev`, a type in the provider's own namespace. */
export function providerType(name: string, providerId: string): string {
  return `${name}.${providerId}.infraprovider.sidero.dev`;
}

export const T = {
  InfraProvider: 'InfraProviders.omni.sidero.dev',
  InfraProviderStatus: 'InfraProviderStatuses.omni.sidero.dev',
  InfraProviderHealthStatus: 'InfraProviderHealthStatuses.omni.sidero.dev',
  InfraProviderCombinedStatus: 'InfraProviderCombinedStatuses.omni.sidero.dev',
  MachineRequest: 'MachineRequests.omni.sidero.dev',
  MachineRequestStatus: 'MachineRequestStatuses.omni.sidero.dev',
  MachineRequestSet: 'MachineRequestSets.omni.sidero.dev',
  InfraMachine: 'InfraMachines.omni.sidero.dev',
  InfraMachineStatus: 'InfraMachineStatuses.omni.sidero.dev',
  InfraMachineRegistration: 'InfraMachineRegistrations.omni.sidero.dev',
  BMCConfig: 'BMCConfigs.omni.sidero.dev',
  ConfigPatchRequest: 'ConfigPatchRequests.omni.sidero.dev',
  ProviderJoinConfig: 'ProviderJoinConfigs.omni.sidero.dev',
  Link: 'Links.omni.sidero.dev',
  Machine: 'Machines.omni.sidero.dev',
  SysVersion: 'SysVersions.system.sidero.dev',
  Namespace: 'Namespaces.meta.cosi.dev',
  ResourceDefinition: 'ResourceDefinitions.meta.cosi.dev',
} as const;

export const LABEL_INFRA_PROVIDER_ID = 'omni.sidero.dev/infra-provider-id';
export const LABEL_IS_STATIC_INFRA_PROVIDER = 'omni.sidero.dev/is-static-infra-provider';
export const LABEL_MACHINE_REQUEST = 'omni.sidero.dev/machine-request';
export const LABEL_MACHINE_REQUEST_SET = 'omni.sidero.dev/machine-request-set';
