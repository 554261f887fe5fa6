// Omni's access rules in front of the sim's store, for one caller at a time (docs/omni-wire.md 4,
// docs/omni-lifecycle.md 2). Two layers, in Omni's order:
//   1. the generic role checks of Omni's API state (`state_access.go`), skipped for the types the
//      infra-provider state manages;
//   2. the infra-provider state (`infraprovider/state.go`) for the namespaces `infra-provider`,
//      `infra-provider-ephemeral` and `infra-provider:*`: the provider must be registered, namespace
//      and type-suffix checks, read-only types that accept finalizer-only updates, label filtering and
//      forced labels, ID checks.
// Plus the Omni validations a caller can run into here: a MachineRequest's spec is immutable, and
// (1.4+) an infra provider with running machines cannot be torn down or destroyed.
//
// Teardown is what Omni's state does for it: Get, then (unless already tearing down) an Update of
// the phase, so on infra-provider types the update rules apply; from 1.9 Omni's API state also
// authorises it as a destroy first. Omni's own controllers (identity `internal`) bypass all of this.
// Messages and codes are Omni's (`%q` as Go prints it, backend.ts). Omni runs its role checks as
// validations of its API state, so their refusals read "failed to validate: 1 error occurred: ...
// rpc error: code = PermissionDenied desc = <why>" with the code kept (the recordings show it).

import { errorFromStatus, GrpcCode, grpcCodeName, OmniError } from '../omni-client/errors.js';
import type { Pointer, Resource } from '../omni-client/resource.js';
import {
  bytesEqual, cloneResource, LABEL_INFRA_PROVIDER_ID, NS_DEFAULT, NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL,
  PHASE_RUNNING, PHASE_TEARING_DOWN, pointerOf, recordsEqual, T,
} from '../omni-client/resource.js';
import { decodeSpec, encodeSpec, MachineRequestSpec } from '../omni-client/specs.js';
import { EventType, LabelTermOperation } from '../omni-client/wire.js';
import type { Identity, Query, Role, SimEvent, StateApi, WatchBatches, WatchParams } from './api.js';
import { INTERNAL, ROLE_RANK } from './api.js';
import { backendMessage, backendOf, CACHED_TYPES, goQuote } from './backend.js';
import type { OmniVersion } from './version.js';
import { atLeast, parseVersion } from './version.js';

const PROVIDER_NS_PREFIX = 'infra-provider:';
const PROVIDER_TYPE_SUFFIX = '.infraprovider.sidero.dev';

type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'destroy';
const isRead = (v: Verb) => v === 'get' || v === 'list' || v === 'watch';

const q = goQuote;
const denied = (msg: string) => errorFromStatus(GrpcCode.PermissionDenied, msg);

/**
 * Omni's `validated` state error: "failed to validate: " + a one-entry go-multierror list. A plain
 * error is InvalidArgument; a gRPC status error keeps its code and is listed as gRPC prints it.
 */
export function validationError(e: string | OmniError): OmniError {
  const entry = typeof e === 'string' ? e : `rpc error: code = ${grpcCodeName(e.grpcCode)} desc = ${e.omniMessage}`;
  return errorFromStatus(typeof e === 'string' ? GrpcCode.InvalidArgument : e.grpcCode, `failed to validate: 1 error occurred:\n\t* ${entry}\n\n`);
}

/** Omni's role checks (filterAccess), run as validations of its API state. */
function roleValidation(check: () => void): void {
  try {
    check();
  } catch (e) {
    throw e instanceof OmniError ? validationError(e) : e;
  }
}

// ---------------------------------------------------------------------------------------------
// Layer 2: infraprovider.State resource configuration (getResourceConfig)

interface InfraConfig {
  readOnlyForProviders: boolean;
  checkID: boolean;
  onlyAdminCanRead: boolean;
}

function infraConfig(ns: string, type: string, v: OmniVersion): InfraConfig | undefined {
  const c = (readOnlyForProviders = false, checkID = false, onlyAdminCanRead = false): InfraConfig => ({ readOnlyForProviders, checkID, onlyAdminCanRead });
  if (ns.startsWith(PROVIDER_NS_PREFIX)) return c();
  switch (type) {
    case T.MachineRequest:
    case T.InfraMachine:
      return c(true);
    case T.InfraMachineRegistration:
      return atLeast(v, '0.52') ? c(true) : undefined;
    case T.ProviderJoinConfig:
      return atLeast(v, '1.0') ? c(true) : undefined;
    case T.MachineRequestStatus:
    case T.InfraMachineStatus:
    case T.ConfigPatchRequest:
      return c();
    case T.InfraProviderStatus:
    case T.InfraProviderHealthStatus:
    case T.InfraProvider:
      return c(false, true);
    case T.BMCConfig:
      return c(true, false, true);
    default:
      return undefined;
  }
}

function isInfraNamespace(ns: string): boolean {
  return ns === NS_INFRA_PROVIDER || ns === NS_INFRA_PROVIDER_EPHEMERAL || ns.startsWith(PROVIDER_NS_PREFIX);
}

// ---------------------------------------------------------------------------------------------
// Layer 1: Omni's generic role checks (filterAccess + filterAccessByType), for the types that matter

const omni = (n: string) => `${n}.omni.sidero.dev`;

/** Readable by InfraProvider and above (and read-only for everyone, see READ_ONLY). */
const PROVIDER_READABLE = new Set<string>([T.Machine, omni('SiderolinkAPIConfigs'), omni('ConnectionParams')]);

/** "Valid signature only" types. */
const SIGNATURE_ONLY = new Set<string>([
  T.Namespace, T.ResourceDefinition, T.SysVersion,
  ...['FeaturesConfigs', 'TalosExtensions', 'TalosVersions', 'KubernetesVersions', 'InstallationMedias', 'OngoingTasks',
    'MachineStatusMetrics', 'Notifications', 'ClusterMetrics', 'ClusterStatusMetrics', 'AdvertisedEndpoints', 'CurrentUsers',
    'ClusterPermissions', 'Quirks', 'VersionContract', 'Permissions'].map(omni),
]);

/** Reader to read, Operator to write. */
const READER_OPERATOR = new Set<string>([
  T.Link, T.InfraProviderCombinedStatus,
  ...['Clusters', 'ClusterBootstrapStatuses', 'ClusterConfigVersions', 'ClusterDestroyStatuses', 'ClusterEndpoints', 'ClusterKubernetesNodes',
    'ClusterMachineIdentities', 'ClusterMachineStatuses', 'ClusterMachineRequestStatuses', 'ClusterMachineTalosVersions', 'ClusterMachines',
    'ClusterMachineConfigPatches', 'ClusterMachineConfigStatuses', 'ClusterStatuses', 'ClusterDiagnostics', 'ClusterUUIDs', 'ClusterWorkloadProxyStatuses',
    'ClusterTaints', 'ConfigPatches', 'ControlPlaneStatuses', 'ExposedServices', 'EtcdBackups', 'EtcdBackupStatuses', 'EtcdManualBackups',
    'InfraMachineConfigs', 'KubernetesStatuses', 'KubernetesUpgradeStatuses', 'LoadBalancerConfigs', 'LoadBalancerStatuses', 'MachineLabels',
    'MachineSets', 'MachineSetDestroyStatuses', 'MachineSetNodes', 'MachineRequestSetStatuses', 'MachineRequestSets', 'MachineSetStatuses',
    'PendingMachines', 'LinkStatuses', 'JoinTokenStatuses', 'JoinTokens', 'DefaultJoinTokens', 'NodeUniqueTokenStatuses', 'GRPCTunnelConfigs',
    'MachineClasses', 'MachineExtensionsStatuses', 'MachineExtensions', 'MachineInstallDiskConfigs', 'MachineInstallDiskStatuses', 'MachineStatuses',
    'MachineStatusSnapshots', 'MachineStatusLinks', 'MachineConfigGenOptions', 'MachinePendingUpdates', 'SchematicConfigurations',
    'InstallationMediaConfigs', 'ExtensionsConfigurations', 'MachineUpgradeStatuses', 'KernelArgs', 'KernelArgsStatuses', 'TalosUpgradeStatuses',
    'NodeForceDestroyRequests', 'KubernetesManifestGroups', 'RotateTalosCAs', 'RotateKubernetesCAs', 'KubernetesHealthChecks',
    'KubernetesHealthCheckStatuses', 'ImagePullRequests', 'ImagePullStatuses'].map(omni),
]);

const ADMIN_ONLY = new Set<string>([
  T.InfraProvider,
  'JWTPublicKeys.system.sidero.dev',
  ...['Identities', 'IdentityLastActives', 'IdentityStatuses', 'PublicKeyLastActives', 'Users', 'ServiceAccountStatuses', 'SAMLLabelRules',
    'AccessPolicies', 'EtcdBackupS3Confs', 'InfraMachineBMCConfigs'].map(omni),
]);

/** Fully managed by users (common.UserManagedResourceTypes). */
const USER_MANAGED = new Set<string>([
  T.InfraProvider,
  ...['AccessPolicies', 'SAMLLabelRules', 'DefaultJoinTokens', 'GRPCTunnelConfigs', 'Clusters', 'ConfigPatches', 'EtcdManualBackups', 'MachineClasses',
    'MachineLabels', 'MachineSets', 'MachineSetNodes', 'EtcdBackupS3Confs', 'ExtensionsConfigurations', 'KernelArgs', 'MachineRequestSets',
    'InfraMachineBMCConfigs', 'InfraMachineConfigs', 'InstallationMediaConfigs', 'MachineInstallDiskConfigs', 'NodeForceDestroyRequests',
    'KubernetesManifestGroups', 'RotateTalosCAs', 'RotateKubernetesCAs', 'KubernetesHealthChecks'].map(omni),
]);

const IDENTITY_TYPES = new Set<string>([omni('Identities'), omni('Users')]);
const LINK_LIKE = new Set<string>([T.Link, omni('PendingMachines')]);
const JOIN_TOKEN = omni('JoinTokens');

function roleCheck(who: Identity, min: Role): void {
  if (ROLE_RANK[who.role] < ROLE_RANK[min]) throw denied(`unauthorized: access denied: insufficient role: ${q(who.role)}`);
}

function outerCheck(who: Identity, type: string, verb: Verb, v: OmniVersion): void {
  if (PROVIDER_READABLE.has(type)) roleCheck(who, 'InfraProvider');
  else if (READER_OPERATOR.has(type)) {
    roleCheck(who, isRead(verb) ? 'Reader' : 'Operator');
    if (verb === 'create' && type === JOIN_TOKEN) {
      throw denied('only read, update and destroy access is permitted, create should be done via the management.CreateJoinToken API call');
    }
  } else if (SIGNATURE_ONLY.has(type)) {
    // A verified signature is all these need, and every caller that gets here has one.
  } else if (ADMIN_ONLY.has(type)) {
    roleCheck(who, 'Admin');
    if (!isRead(verb) && IDENTITY_TYPES.has(type)) {
      throw denied(`only read access is permitted on resource ${type}, mutations should be done via ManagementService API calls`);
    }
  } else throw denied('no access is permitted');
  // filterAccessByType
  if (USER_MANAGED.has(type)) return;
  if (LINK_LIKE.has(type)) {
    if (atLeast(v, '1.9')) {
      if (isRead(verb) || verb === 'destroy') return;
      throw denied('only read and delete access is permitted');
    }
    if (isRead(verb) || verb === 'update' || verb === 'destroy') return;
    throw denied('only read, update and delete access is permitted');
  }
  if (type === JOIN_TOKEN) {
    if (verb !== 'create') return;
    throw denied('only read, update and destroy access is permitted; create should be done via the management.CreateJoinToken API call');
  }
  if (isRead(verb)) return;
  throw denied('only read access is permitted');
}

// ---------------------------------------------------------------------------------------------

export interface AccessOptions {
  /** The simulated Omni version (`omni.version` of the scenario). */
  version: OmniVersion | string;
}

interface InfraAccess {
  config: InfraConfig;
  /** Set when the caller is exactly InfraProvider and the namespace is shared: label-checked. */
  labelProviderId: string | undefined;
}

/** Omni's access rules for external callers, in front of `inner` (the store, which has none). */
export function createAccessApi(inner: StateApi, opts: AccessOptions): StateApi {
  const version = typeof opts.version === 'string' ? parseVersion(opts.version) : opts.version;
  return new AccessApi(inner, version);
}

class AccessApi implements StateApi {
  constructor(private readonly inner: StateApi, private readonly v: OmniVersion) {}

  // -- the checks ------------------------------------------------------------------------------

  /**
   * Runs layer 1 (unless infra-managed) and layer 2 (infra namespaces). Undefined = not an infra
   * namespace. Omni's API state reads before it validates a Get, an Update or a Destroy, and the
   * infra-provider state refuses a type it does not manage while reading: so those answer an
   * unmanaged type in an infra namespace with layer 2's refusal, and List, Create and Watch with
   * layer 1's.
   */
  private check(who: Identity, ns: string, type: string, verb: Verb): InfraAccess | undefined {
    const infraManaged = ns.startsWith(PROVIDER_NS_PREFIX) || infraConfig(ns, type, this.v) !== undefined;
    const readsFirst = verb === 'get' || verb === 'update' || verb === 'destroy';
    if (!infraManaged && !(readsFirst && isInfraNamespace(ns))) roleValidation(() => outerCheck(who, type, verb, this.v));
    if (!isInfraNamespace(ns)) {
      // Omni would route an infra-managed type outside these namespaces to a store with no checks;
      // the sim refuses instead of emulating that gap.
      if (infraManaged) throw denied('no access is permitted');
      return undefined;
    }
    const config = infraConfig(ns, type, this.v);
    if (!config) throw denied(`internal error: resource ${q(type)} is not an infra provider managed resource`);
    roleCheck(who, 'InfraProvider');
    if (who.role === 'InfraProvider') {
      const id = who.providerId ?? '';
      if (atLeast(this.v, '0.50') && !this.inner.view({ namespace: NS_INFRA_PROVIDER, type: T.InfraProvider, id })) {
        throw denied(`infra provider with name ${q(id)} is not registered in the system`);
      }
      return { config, labelProviderId: this.checkNamespaceAndType(ns, type, id) ? id : undefined };
    }
    // Users (Reader and above).
    if (!isRead(verb) && type !== T.InfraProvider && !(type === T.MachineRequest && atLeast(this.v, '1.7'))) {
      throw denied(`users are not allowed to modify ${q(type)} resources`);
    }
    if (!isRead(verb) && type === T.MachineRequest && ROLE_RANK[who.role] < ROLE_RANK.Operator) {
      throw denied(`only operators and admins are allowed to modify ${q(type)} resources`);
    }
    if (config.onlyAdminCanRead && who.role !== 'Admin') throw denied(`only admins are allowed to read ${q(type)} resources`);
    return { config, labelProviderId: undefined };
  }

  /** True when labels must be checked (shared namespaces). */
  private checkNamespaceAndType(ns: string, type: string, id: string): boolean {
    if (ns === NS_INFRA_PROVIDER || ns === NS_INFRA_PROVIDER_EPHEMERAL) return true;
    const own = `${PROVIDER_NS_PREFIX}${id}`;
    if (ns === own) {
      const suffix = `.${id}${PROVIDER_TYPE_SUFFIX}`;
      if (!type.endsWith(suffix)) {
        throw errorFromStatus(GrpcCode.InvalidArgument, `resources in namespace ${q(ns)} must have a type suffix ${q(suffix)}`);
      }
      return false;
    }
    throw denied(`namespace not allowed, must be one of: ${NS_INFRA_PROVIDER}, ${NS_INFRA_PROVIDER_EPHEMERAL}, ${own}`);
  }



  /** validations/infra_provider.go (1.4+): no tearing down or destroying a provider with Running machines. */
  private checkProviderDeletable(p: Pointer, who: Identity): void {
    if (who.internal || p.type !== T.InfraProvider || !atLeast(this.v, '1.4')) return;
    if (!this.inner.view(p)) return;
    const query: Query = { labelQueries: [[{ key: LABEL_INFRA_PROVIDER_ID, op: LabelTermOperation.EQUAL, value: [p.id], invert: false }]], idRegexp: '' };
    const running = this.inner.list(INTERNAL, NS_DEFAULT, T.Machine, query).filter((m) => m.metadata.phase === PHASE_RUNNING).map((m) => m.metadata.id);
    if (running.length > 0) {
      throw validationError(`cannot delete the infra provider ${q(p.id)}, as there are ${running.length} running machines managed by it: [${running.join(' ')}]`);
    }
  }

  /** infraprovider/validation.go: a MachineRequest's spec never changes (compared as decoded messages, unknown fields included). */
  private checkMachineRequestImmutable(old: Resource, next: Resource): void {
    if (old.metadata.type !== T.MachineRequest) return;
    const canon = (b: Uint8Array): Uint8Array => {
      try {
        const d = decodeSpec(MachineRequestSpec, b);
        return encodeSpec(MachineRequestSpec, d.value, d.unknown);
      } catch {
        return b;
      }
    };
    if (!bytesEqual(canon(old.spec.protoSpec), canon(next.spec.protoSpec))) throw validationError('machine request spec is immutable');
  }

  // -- StateApi --------------------------------------------------------------------------------

  view(p: Pointer): Readonly<Resource> | undefined {
    return this.inner.view(p);
  }

  /**
   * What Omni's API reads first for a Get, an Update or a Destroy: the stored resource, or the NotFound
   * of that read, which names the pointer with the version given (an Update's). Cached kinds are read
   * from the controllers' cache, whose wording differs from the store's.
   */
  private read(p: Pointer, version?: string): Readonly<Resource> {
    const r = this.inner.view(p);
    if (r) return r;
    const message = CACHED_TYPES.has(p.type) ? backendMessage.notCached(p, version) : backendMessage.notFound(backendOf(p), 'get', p, version);
    throw errorFromStatus(GrpcCode.NotFound, message, { resource: pointerOf(p) });
  }

  get(who: Identity, p: Pointer): Resource {
    if (who.internal) return this.inner.get(who, p);
    const a = this.check(who, p.namespace, p.type, 'get');
    this.read(p);
    const r = this.inner.get(who, p);
    if (a?.labelProviderId !== undefined && !labelled(r, a.labelProviderId)) throw errorFromStatus(GrpcCode.NotFound, 'not found');
    return r;
  }

  list(who: Identity, namespace: string, type: string, query: Query): Resource[] {
    if (who.internal) return this.inner.list(who, namespace, type, query);
    const a = this.check(who, namespace, type, 'list');
    const items = this.inner.list(who, namespace, type, query);
    const id = a?.labelProviderId;
    return id === undefined ? items : items.filter((r) => labelled(r, id));
  }

  create(who: Identity, r: Resource, owner: string): Resource {
    if (who.internal) return this.inner.create(who, r, owner);
    const { namespace, type, id } = r.metadata;
    const a = this.check(who, namespace, type, 'create');
    const providerId = a?.labelProviderId;
    if (providerId === undefined) return this.inner.create(who, r, owner);
    if (a?.config.readOnlyForProviders) throw denied(`infra providers are not allowed to create ${q(type)} resources`);
    if (a?.config.checkID && id !== providerId) {
      throw errorFromStatus(GrpcCode.InvalidArgument, `resource ID must match the infra provider ID ${q(providerId)}`);
    }
    const next = cloneResource(r);
    next.metadata.labels[LABEL_INFRA_PROVIDER_ID] = providerId;
    return this.inner.create(who, next, owner);
  }

  update(who: Identity, r: Resource, owner: string, expectedPhase?: string): Resource {
    if (who.internal) return this.inner.update(who, r, owner, expectedPhase);
    const { namespace, type } = r.metadata;
    const a = this.check(who, namespace, type, 'update');
    const old = this.read(r.metadata, r.metadata.version);
    const providerId = a?.labelProviderId;
    if (providerId !== undefined) {
      if (a?.config.readOnlyForProviders && !finalizerOnlyChange(old, r)) {
        throw denied(`infra providers are not allowed to update ${q(type)} resources other than setting finalizers`);
      }
      if (!labelled(old, providerId)) throw errorFromStatus(GrpcCode.NotFound, 'not found');
    }
    // Omni's validations, behind the access checks.
    if (isInfraNamespace(namespace)) this.checkMachineRequestImmutable(old, r);
    if (old.metadata.phase === PHASE_RUNNING && r.metadata.phase === PHASE_TEARING_DOWN) this.checkProviderDeletable(r.metadata, who);
    if (providerId === undefined) return this.inner.update(who, r, owner, expectedPhase);
    const next = cloneResource(r);
    next.metadata.labels[LABEL_INFRA_PROVIDER_ID] = providerId;
    return this.inner.update(who, next, owner, expectedPhase);
  }

  destroy(who: Identity, p: Pointer, owner: string): void {
    if (who.internal) {
      this.inner.destroy(who, p, owner);
      return;
    }
    const a = this.check(who, p.namespace, p.type, 'destroy');
    this.checkProviderDeletable(p, who);
    const cur = this.read(p);
    const providerId = a?.labelProviderId;
    if (providerId !== undefined) {
      if (a?.config.readOnlyForProviders) throw denied(`infra providers are not allowed to destroy ${q(p.type)} resources`);
      if (!labelled(cur, providerId)) throw errorFromStatus(GrpcCode.NotFound, 'not found');
    }
    this.inner.destroy(who, p, owner);
  }

  teardown(who: Identity, p: Pointer, owner: string): boolean {
    if (who.internal) return this.inner.teardown(who, p, owner);
    // Omni 1.9+ authorises a teardown as a destroy in its API state; its Get + Update then run on the
    // state below, i.e. without the API state's checks but through the infra-provider state's.
    const asDestroy = atLeast(this.v, '1.9');
    if (asDestroy) {
      if (!isInfraNamespace(p.namespace)) {
        this.check(who, p.namespace, p.type, 'destroy');
        return this.inner.teardown(who, p, owner);
      }
      this.checkProviderDeletable(p, who);
    }
    const cur = this.get(who, p);
    if (cur.metadata.phase === PHASE_TEARING_DOWN) return cur.metadata.finalizers.length === 0;
    const next = cloneResource(cur);
    next.metadata.phase = PHASE_TEARING_DOWN;
    return this.update(who, next, owner).metadata.finalizers.length === 0;
  }

  async teardownAndDestroy(who: Identity, p: Pointer, owner: string, signal: AbortSignal): Promise<void> {
    if (who.internal) {
      await this.inner.teardownAndDestroy(who, p, owner, signal);
      return;
    }
    this.teardown(who, p, owner);
    // Omni checks the destroy once the finalizers are gone; the sim refuses a destroy it will refuse
    // anyway before waiting, so a caller is not left hanging on something that cannot succeed.
    const a = this.check(who, p.namespace, p.type, 'destroy');
    if (a?.labelProviderId !== undefined && a.config.readOnlyForProviders) {
      throw denied(`infra providers are not allowed to destroy ${q(p.type)} resources`);
    }
    await this.inner.teardownAndDestroy(who, p, owner, signal);
  }

  watch(who: Identity, params: WatchParams, signal: AbortSignal): WatchBatches {
    if (who.internal) return this.inner.watch(who, params, signal);
    const a = this.check(who, params.namespace, params.type, 'watch');
    const batches = this.inner.watch(who, params, signal);
    const id = a?.labelProviderId;
    if (id === undefined) return batches;
    return filterWatch(batches, id, params.aggregated, atLeast(this.v, '1.0'));
  }
}

function labelled(r: Resource, providerId: string): boolean {
  return Object.hasOwn(r.metadata.labels, LABEL_INFRA_PROVIDER_ID) && r.metadata.labels[LABEL_INFRA_PROVIDER_ID] === providerId;
}

/** resourcesAreEqual: equal after ignoring version and finalizers (timestamps not compared); spec bytes exactly. */
function finalizerOnlyChange(old: Resource, next: Resource): boolean {
  const a = old.metadata;
  const b = next.metadata;
  return a.namespace === b.namespace && a.type === b.type && a.id === b.id && a.phase === b.phase && a.owner === b.owner &&
    recordsEqual(a.labels, b.labels) && recordsEqual(a.annotations, b.annotations) && bytesEqual(old.spec.protoSpec, next.spec.protoSpec);
}

/**
 * The infra-provider state's event filter. From 1.0: BOOTSTRAPPED, ERRORED and NOOP always pass,
 * others only with the caller's label (tombstones have none, so a single-resource watch of a missing
 * resource gets no initial event); aggregated batches are forwarded even when emptied. Before 1.0
 * (753259c2) NOOP was filtered like a resource event, and the aggregated filter let nothing through
 * on its type alone, BOOTSTRAPPED included.
 */
async function* filterWatch(batches: WatchBatches, providerId: string, aggregated: boolean, v10: boolean): AsyncGenerator<SimEvent[]> {
  const passes = (e: SimEvent): boolean => {
    if (aggregated && !v10) return labelled(e.resource, providerId);
    if (e.eventType === EventType.BOOTSTRAPPED || e.eventType === EventType.ERRORED) return true;
    if (e.eventType === EventType.NOOP && v10) return true;
    return labelled(e.resource, providerId);
  };
  for await (const batch of batches) {
    const kept = batch.filter(passes);
    if (aggregated || kept.length > 0) yield kept;
  }
}
