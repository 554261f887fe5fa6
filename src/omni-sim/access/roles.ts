// Layer 1 of Omni's access rules (access.ts): the generic role checks of Omni's API state
// (filterAccess, then filterAccessByType), for the types that matter here, by role: what needs
// only a valid signature, Reader to read and Operator to write, Admin, and the few types an
// InfraProvider account may read outside its namespaces (docs/omni-wire.md 3.4, 4.6). The
// infra-provider state's own rules (layer 2) are infra.ts.

import { errorFromStatus, GrpcCode, OmniError } from '../../omni-api/errors.js';
import { T } from '../../omni-api/resource.js';
import type { Identity, Role } from '../api.js';
import { ROLE_RANK, ROLE_SINCE } from '../api.js';
import { validationError } from './validations.js';
import { goQuote as q } from '../store/backend.js';
import type { OmniVersion } from '../version.js';
import { atLeast } from '../version.js';

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'destroy';
export const isRead = (v: Verb) => v === 'get' || v === 'list' || v === 'watch';

export const denied = (msg: string) => errorFromStatus(GrpcCode.PermissionDenied, msg);

/** Omni's role checks (filterAccess), run as validations of its API state. */
export function roleValidation(check: () => void): void {
  try {
    check();
  } catch (e) {
    throw e instanceof OmniError ? validationError(e) : e;
  }
}

const omni = (n: string) => `${n}.omni.sidero.dev`;

/** Readable by InfraProvider and above (and read-only for everyone, see READ_ONLY). */
const PROVIDER_READABLE = new Set<string>([T.Machine, omni('SiderolinkAPIConfigs'), omni('ConnectionParams')]);

/** "Valid signature only" types. */
const SIGNATURE_ONLY = new Set<string>([
  T.Namespace,
  T.ResourceDefinition,
  T.SysVersion,
  ...[
    'FeaturesConfigs',
    'TalosExtensions',
    'TalosVersions',
    'KubernetesVersions',
    'InstallationMedias',
    'OngoingTasks',
    'MachineStatusMetrics',
    'Notifications',
    'ClusterMetrics',
    'ClusterStatusMetrics',
    'AdvertisedEndpoints',
    'CurrentUsers',
    'ClusterPermissions',
    'Quirks',
    'VersionContract',
    'Permissions',
  ].map(omni),
]);

/** Reader to read, Operator to write. */
const READER_OPERATOR = new Set<string>([
  T.Link,
  T.InfraProviderCombinedStatus,
  ...[
    'Clusters',
    'ClusterBootstrapStatuses',
    'ClusterConfigVersions',
    'ClusterDestroyStatuses',
    'ClusterEndpoints',
    'ClusterKubernetesNodes',
    'ClusterMachineIdentities',
    'ClusterMachineStatuses',
    'ClusterMachineRequestStatuses',
    'ClusterMachineTalosVersions',
    'ClusterMachines',
    'ClusterMachineConfigPatches',
    'ClusterMachineConfigStatuses',
    'ClusterStatuses',
    'ClusterDiagnostics',
    'ClusterUUIDs',
    'ClusterWorkloadProxyStatuses',
    'ClusterTaints',
    'ConfigPatches',
    'ControlPlaneStatuses',
    'ExposedServices',
    'EtcdBackups',
    'EtcdBackupStatuses',
    'EtcdManualBackups',
    'InfraMachineConfigs',
    'KubernetesStatuses',
    'KubernetesUpgradeStatuses',
    'LoadBalancerConfigs',
    'LoadBalancerStatuses',
    'MachineLabels',
    'MachineSets',
    'MachineSetDestroyStatuses',
    'MachineSetNodes',
    'MachineRequestSetStatuses',
    'MachineRequestSets',
    'MachineSetStatuses',
    'PendingMachines',
    'LinkStatuses',
    'JoinTokenStatuses',
    'JoinTokens',
    'DefaultJoinTokens',
    'NodeUniqueTokenStatuses',
    'GRPCTunnelConfigs',
    'MachineClasses',
    'MachineExtensionsStatuses',
    'MachineExtensions',
    'MachineInstallDiskConfigs',
    'MachineInstallDiskStatuses',
    'MachineStatuses',
    'MachineStatusSnapshots',
    'MachineStatusLinks',
    'MachineConfigGenOptions',
    'MachinePendingUpdates',
    'SchematicConfigurations',
    'InstallationMediaConfigs',
    'ExtensionsConfigurations',
    'MachineUpgradeStatuses',
    'KernelArgs',
    'KernelArgsStatuses',
    'TalosUpgradeStatuses',
    'NodeForceDestroyRequests',
    'KubernetesManifestGroups',
    'RotateTalosCAs',
    'RotateKubernetesCAs',
    'KubernetesHealthChecks',
    'KubernetesHealthCheckStatuses',
    'ImagePullRequests',
    'ImagePullStatuses',
  ].map(omni),
]);

const ADMIN_ONLY = new Set<string>([
  T.InfraProvider,
  'JWTPublicKeys.system.sidero.dev',
  ...[
    'Identities',
    'IdentityLastActives',
    'IdentityStatuses',
    'PublicKeyLastActives',
    'Users',
    'ServiceAccountStatuses',
    'SAMLLabelRules',
    'AccessPolicies',
    'EtcdBackupS3Confs',
    'InfraMachineBMCConfigs',
  ].map(omni),
]);

/** Fully managed by users (common.UserManagedResourceTypes). */
const USER_MANAGED = new Set<string>([
  T.InfraProvider,
  ...[
    'AccessPolicies',
    'SAMLLabelRules',
    'DefaultJoinTokens',
    'GRPCTunnelConfigs',
    'Clusters',
    'ConfigPatches',
    'EtcdManualBackups',
    'MachineClasses',
    'MachineLabels',
    'MachineSets',
    'MachineSetNodes',
    'EtcdBackupS3Confs',
    'ExtensionsConfigurations',
    'KernelArgs',
    'MachineRequestSets',
    'InfraMachineBMCConfigs',
    'InfraMachineConfigs',
    'InstallationMediaConfigs',
    'MachineInstallDiskConfigs',
    'NodeForceDestroyRequests',
    'KubernetesManifestGroups',
    'RotateTalosCAs',
    'RotateKubernetesCAs',
    'KubernetesHealthChecks',
  ].map(omni),
]);

const IDENTITY_TYPES = new Set<string>([omni('Identities'), omni('Users')]);
const LINK_LIKE = new Set<string>([T.Link, omni('PendingMachines')]);
const JOIN_TOKEN = omni('JoinTokens');

/** Why `role` cannot be an account's at Omni `v` (it came later), or undefined. */
export function roleMissingIn(role: Role, v: OmniVersion | string): string | undefined {
  const since = ROLE_SINCE[role];
  return since !== undefined && !atLeast(v, since) ? `role ${role} exists from Omni ${since} on` : undefined;
}

export function roleCheck(who: Identity, min: Role): void {
  if (ROLE_RANK[who.role] < ROLE_RANK[min])
    throw denied(`unauthorized: access denied: insufficient role: ${q(who.role)}`);
}

export function outerCheck(who: Identity, type: string, verb: Verb, v: OmniVersion): void {
  if (PROVIDER_READABLE.has(type)) roleCheck(who, 'InfraProvider');
  else if (READER_OPERATOR.has(type)) {
    roleCheck(who, isRead(verb) ? 'Reader' : 'Operator');
    if (verb === 'create' && type === JOIN_TOKEN) {
      throw denied(
        'only read, update and destroy access is permitted, create should be done via the management.CreateJoinToken ' +
          'API call',
      );
    }
  } else if (SIGNATURE_ONLY.has(type)) {
    // A verified signature is all these need, and every caller that gets here has one.
  } else if (ADMIN_ONLY.has(type)) {
    roleCheck(who, 'Admin');
    if (!isRead(verb) && IDENTITY_TYPES.has(type)) {
      throw denied(
        `only read access is permitted on resource ${type}, mutations should be done via ManagementService API calls`,
      );
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
    throw denied(
      'only read, update and destroy access is permitted; create should be done via the management.CreateJoinToken ' +
        'API call',
    );
  }
  if (isRead(verb)) return;
  throw denied('only read access is permitted');
}
