// Design rule 1: which finalizers and resources belong to the provider ID we stand in for.
// The ID is compared case-sensitively and used exactly as given: IDs registered before Omni 1.10 may
// hold upper case letters and dots (docs/omni-lifecycle.md 2.2), so `proxmox` is not `proxmox-talos` and
// `BareMetal-IAD1` is not `baremetal-iad1`.

import type { Metadata } from '../omni-api/resource.js';
import { LABEL_INFRA_PROVIDER_ID, providerNamespace } from '../omni-api/resource.js';

/** Exactly `<id>.<Name>` with a non-empty, dot-free Name: every provider controller's name (0.2). */
export function isOurFinalizer(finalizer: string, providerId: string): boolean {
  if (providerId === '' || !finalizer.startsWith(`${providerId}.`)) return false;
  const name = finalizer.slice(providerId.length + 1);
  return name.length > 0 && !name.includes('.');
}

/** Labelled with our ID exactly, or living in our own namespace `infra-provider:<id>`. */
export function isOurResource(md: Pick<Metadata, 'namespace' | 'labels'>, providerId: string): boolean {
  if (md.namespace === providerNamespace(providerId)) return true;
  return Object.hasOwn(md.labels, LABEL_INFRA_PROVIDER_ID) && md.labels[LABEL_INFRA_PROVIDER_ID] === providerId;
}

/**
 * The finalizers we may remove from this resource: none unless the resource itself is ours. When all
 * of them are ours, the resource's own list, shared by the caches (docs/performance.md, "Memory at
 * 10 000 machines (target <= 200 MB)"), read-only: the compiler keeps every caller from changing it.
 */
export function ourFinalizers(
  md: Pick<Metadata, 'namespace' | 'labels' | 'finalizers'>,
  providerId: string,
): readonly string[] {
  if (!isOurResource(md, providerId)) return [];
  if (md.finalizers.every((f) => isOurFinalizer(f, providerId))) return md.finalizers;
  return md.finalizers.filter((f) => isOurFinalizer(f, providerId));
}

/** Every finalizer that is not ours (Omni's own, another provider's, anything unrecognised). */
export function foreignFinalizers(
  md: Pick<Metadata, 'namespace' | 'labels' | 'finalizers'>,
  providerId: string,
): string[] {
  const ours = new Set(ourFinalizers(md, providerId));
  return md.finalizers.filter((f) => !ours.has(f));
}

/**
 * Whether an `omni.Machine` carries the provider ID: a label from Omni 1.4, an annotation before
 * (docs/omni-lifecycle.md 1, Omni commit 88928fe6). Both are checked so the version need not be known.
 */
export function machineCarriesProvider(md: Pick<Metadata, 'labels' | 'annotations'>, providerId: string): boolean {
  return md.labels[LABEL_INFRA_PROVIDER_ID] === providerId || md.annotations[LABEL_INFRA_PROVIDER_ID] === providerId;
}
