// Omni's controllers of an infra provider's registration, as the sim emulates them (controllers.ts):
// the cleanup that runs when `InfraProviders/<id>` is deleted (statuses, the service account, and from
// 1.4 the provider's Links, statuses and every user-owned MachineRequestSet), the join config and the
// combined status that go with it, and the provider's ConfigPatchRequests. The handlers and their
// order are docs/omni-lifecycle.md 7.3; what each release added is section 8 there.

import type { Resource } from '../../omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  NS_DEFAULT,
  NS_EPHEMERAL,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  PHASE_RUNNING,
  T,
} from '../../omni-api/resource.js';
import { C, eqLabel, type OmniActor, ptr } from './actor.js';
import { atLeast } from '../version.js';

/**
 * InfraProviderCleanupController, ProviderJoinConfigController, InfraProviderStatusController, Destroy[InfraProviders].
 * `onServiceAccountDeleted`: the cleanup deleted the account `infra-provider:<id>`.
 */
export function reconcileProvider(
  a: OmniActor,
  id: string,
  onServiceAccountDeleted?: (providerId: string) => void,
): void {
  if (!atLeast(a.v, '0.50')) return;
  const p = a.peek(ptr(NS_INFRA_PROVIDER, T.InfraProvider, id));
  if (!p) return;
  if (p.metadata.phase === PHASE_RUNNING) {
    a.addFinalizer(p, C.InfraProviderCleanup);
    return;
  }
  let cur = p;
  if (cur.metadata.finalizers.includes(C.InfraProviderCleanup) && cleanupProvider(a, id, onServiceAccountDeleted)) {
    cur = a.removeFinalizers(cur, (f) => f === C.InfraProviderCleanup);
  }
  if (
    cur.metadata.finalizers.includes(C.ProviderJoinConfig) &&
    a.teardownAndDestroy(a.peek(ptr(NS_INFRA_PROVIDER, T.ProviderJoinConfig, id)))
  ) {
    cur = a.removeFinalizers(a.peek(cur.metadata) ?? cur, (f) => f === C.ProviderJoinConfig);
  }
  if (
    cur.metadata.finalizers.includes(C.InfraProviderStatus) &&
    a.teardownAndDestroy(a.peek(ptr(NS_EPHEMERAL, T.InfraProviderCombinedStatus, id)))
  ) {
    cur = a.removeFinalizers(a.peek(cur.metadata) ?? cur, (f) => f === C.InfraProviderStatus);
  }
  if (cur.metadata.owner === '') a.destroyIfReady(cur);
}

/** The cleanup handlers in order; false when one has to wait (the chain stops there). */
function cleanupProvider(a: OmniActor, id: string, onServiceAccountDeleted?: (providerId: string) => void): boolean {
  const ownerless = (r: Resource | undefined) => (r && r.metadata.owner === '' ? r : undefined);
  if (!a.teardownAndDestroy(ownerless(a.peek(ptr(NS_INFRA_PROVIDER, T.InfraProviderStatus, id))))) return false;
  if (!a.teardownAndDestroy(ownerless(a.peek(ptr(NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, id)))))
    return false;
  onServiceAccountDeleted?.(id);
  if (!atLeast(a.v, '1.4')) return true;
  const labelled = eqLabel(LABEL_INFRA_PROVIDER_ID, id);
  for (const link of a.list(NS_DEFAULT, T.Link, labelled)) a.teardown(link);
  let done = true;
  for (const ims of a.list(NS_INFRA_PROVIDER, T.InfraMachineStatus, labelled)) done = a.teardownAndDestroy(ims) && done;
  if (!done) return false;
  for (const mrs of a.list(NS_INFRA_PROVIDER, T.MachineRequestStatus, labelled))
    done = a.teardownAndDestroy(mrs) && done;
  if (!done) return false;
  // Every user-owned set, whatever provider it uses (docs/omni-lifecycle.md 7.3, handler 6).
  for (const set of a.list(NS_DEFAULT, T.MachineRequestSet)) {
    if (set.metadata.owner === '') done = a.teardownAndDestroy(set) && done;
  }
  return done;
}

/** ConfigPatchRequestController: its finalizer clears once the request is torn down (its ConfigPatch goes with it). */
export function reconcileConfigPatchRequest(a: OmniActor, id: string): void {
  const cpr = a.peek(ptr(NS_INFRA_PROVIDER, T.ConfigPatchRequest, id));
  if (!cpr) return;
  if (cpr.metadata.phase === PHASE_RUNNING) {
    a.addFinalizer(cpr, C.ConfigPatchRequest);
    return;
  }
  const patch = a.peek(ptr(NS_DEFAULT, 'ConfigPatches.omni.sidero.dev', id));
  if (patch && !a.teardownAndDestroy(patch)) return;
  a.removeFinalizers(cpr, (f) => f === C.ConfigPatchRequest);
}
