// Layer 2 of Omni's access rules (access.ts): Omni's infra-provider state, in front of the
// namespaces `infra-provider`, `infra-provider-ephemeral` and `infra-provider:*`: which types it
// manages and how (read-only for providers but for their finalizers, ID = provider ID, admins
// only), the namespace and type-suffix rules, and the provider label that filters reads and
// watches in the shared namespaces (docs/omni-wire.md 4.2 to 4.5).

import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Resource } from '../../omni-api/resource.js';
import {
  bytesEqual,
  LABEL_INFRA_PROVIDER_ID,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  recordsEqual,
  T,
} from '../../omni-api/resource.js';
import { EventType } from '../../omni-api/wire.js';
import type { SimEvent, WatchBatches } from '../api.js';
import { denied } from './roles.js';
import { goQuote as q } from '../store/backend.js';
import type { OmniVersion } from '../version.js';
import { atLeast } from '../version.js';

export const PROVIDER_NS_PREFIX = 'infra-provider:';
const PROVIDER_TYPE_SUFFIX = '.infraprovider.sidero.dev';

// infraprovider.State resource configuration (getResourceConfig)

export interface InfraConfig {
  readOnlyForProviders: boolean;
  checkID: boolean;
  onlyAdminCanRead: boolean;
}

export function infraConfig(ns: string, type: string, v: OmniVersion): InfraConfig | undefined {
  const c = (readOnlyForProviders = false, checkID = false, onlyAdminCanRead = false): InfraConfig => ({
    readOnlyForProviders,
    checkID,
    onlyAdminCanRead,
  });
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

export function isInfraNamespace(ns: string): boolean {
  return ns === NS_INFRA_PROVIDER || ns === NS_INFRA_PROVIDER_EPHEMERAL || ns.startsWith(PROVIDER_NS_PREFIX);
}

/** True when labels must be checked (shared namespaces). */
export function checkNamespaceAndType(ns: string, type: string, id: string): boolean {
  if (ns === NS_INFRA_PROVIDER || ns === NS_INFRA_PROVIDER_EPHEMERAL) return true;
  const own = `${PROVIDER_NS_PREFIX}${id}`;
  if (ns === own) {
    const suffix = `.${id}${PROVIDER_TYPE_SUFFIX}`;
    if (!type.endsWith(suffix)) {
      throw errorFromStatus(
        GrpcCode.InvalidArgument,
        `resources in namespace ${q(ns)} must have a type suffix ${q(suffix)}`,
      );
    }
    return false;
  }
  throw denied(`namespace not allowed, must be one of: ${NS_INFRA_PROVIDER}, ${NS_INFRA_PROVIDER_EPHEMERAL}, ${own}`);
}

/** The provider's label on a resource of a shared namespace: what makes it that provider's to see. */
export function labelled(r: Resource, providerId: string): boolean {
  return (
    Object.hasOwn(r.metadata.labels, LABEL_INFRA_PROVIDER_ID) &&
    r.metadata.labels[LABEL_INFRA_PROVIDER_ID] === providerId
  );
}

/** resourcesAreEqual: equal after ignoring version and finalizers (timestamps not compared); spec bytes exactly. */
export function finalizerOnlyChange(old: Resource, next: Resource): boolean {
  const a = old.metadata;
  const b = next.metadata;
  return (
    a.namespace === b.namespace &&
    a.type === b.type &&
    a.id === b.id &&
    a.phase === b.phase &&
    a.owner === b.owner &&
    recordsEqual(a.labels, b.labels) &&
    recordsEqual(a.annotations, b.annotations) &&
    bytesEqual(old.spec.protoSpec, next.spec.protoSpec)
  );
}

/**
 * The infra-provider state's event filter. From 1.0: BOOTSTRAPPED, ERRORED and NOOP always pass,
 * others only with the caller's label (tombstones have none, so a single-resource watch of a missing
 * resource gets no initial event); aggregated batches are forwarded even when emptied. Before 1.0
 * (753259c2) NOOP was filtered like a resource event, and the aggregated filter let nothing through
 * on its type alone, BOOTSTRAPPED included.
 */
export async function* filterWatch(
  batches: WatchBatches,
  providerId: string,
  aggregated: boolean,
  v10: boolean,
): AsyncGenerator<SimEvent[]> {
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
