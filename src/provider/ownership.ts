// Design rule 1: which finalizers and resources belong to the provider ID we stand in for.
// The ID is compared case-sensitively and used exactly as given: IDs registered before Omni 1.10 may
// hold upper case letters and dots (docs/omni-lifecycle.md 2.2), so `proxmox` is not `proxmox-talos` and
// `BareMetal-IAD1` is not `baremetal-iad1`.

import type { Metadata } from '../omni-api/resource.js';
import { LABEL_INFRA_PROVIDER_ID, providerNamespace } from '../omni-api/resource.js';

/** Exactly `<id>.<Name>` with a non-empty, dot-free Name: every provider controller's name (0.2). */
export function isOurFinalizer(finalizer: string, providerId: string): boolean {
  // Checked in place (no string made): every finalizer of every resource the caches keep comes here.
  const n = providerId.length;
  return (
    n > 0 &&
    finalizer.length > n + 1 &&
    finalizer.charCodeAt(n) === DOT &&
    finalizer.startsWith(providerId) &&
    finalizer.indexOf('.', n + 1) < 0
  );
}

const DOT = 0x2e;

/** Labelled with our ID exactly, or living in our own namespace `infra-provider:<id>`. */
export function isOurResource(md: Pick<Metadata, 'namespace' | 'labels'>, providerId: string): boolean {
  if (md.namespace === ownNamespace(providerId)) return true;
  return Object.hasOwn(md.labels, LABEL_INFRA_PROVIDER_ID) && md.labels[LABEL_INFRA_PROVIDER_ID] === providerId;
}

/** providerNamespace of the last ID asked (a run asks for one only): not a string made per resource. */
let lastNamespace = { id: '', namespace: providerNamespace('') };
function ownNamespace(providerId: string): string {
  if (lastNamespace.id !== providerId) lastNamespace = { id: providerId, namespace: providerNamespace(providerId) };
  return lastNamespace.namespace;
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
  const all = md.finalizers;
  let i = 0;
  while (i < all.length && isOurFinalizer(all[i]!, providerId)) i++;
  if (i === all.length) return all;
  // Loops, not every/filter with a closure: this runs for every resource the caches keep.
  const ours = all.slice(0, i);
  for (i++; i < all.length; i++) if (isOurFinalizer(all[i]!, providerId)) ours.push(all[i]!);
  return ours;
}

/** Every finalizer that is not ours (Omni's own, another provider's, anything unrecognised). */
export function foreignFinalizers(
  md: Pick<Metadata, 'namespace' | 'labels' | 'finalizers'>,
  providerId: string,
): string[] {
  // Not ours: every finalizer is someone else's. Ours: those that are not our finalizers (ourFinalizers' complement).
  if (!isOurResource(md, providerId)) return [...md.finalizers];
  const out: string[] = [];
  for (const f of md.finalizers) if (!isOurFinalizer(f, providerId)) out.push(f);
  return out;
}

/**
 * Whether an `omni.Machine` carries the provider ID: a label from Omni 1.4, an annotation before
 * (docs/omni-lifecycle.md 1, Omni commit 88928fe6). Both are checked so the version need not be known.
 */
export function machineCarriesProvider(md: Pick<Metadata, 'labels' | 'annotations'>, providerId: string): boolean {
  return md.labels[LABEL_INFRA_PROVIDER_ID] === providerId || md.annotations[LABEL_INFRA_PROVIDER_ID] === providerId;
}
