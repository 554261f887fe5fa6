// What the planner reads off a resource or Omni's version, for itself, the reads and the report: our
// marker, the MachineRequestStatus a refusal wrote, the warning of `omnictl infraprovider delete`;
// which resource belongs to which machine or request (parentsOf, childKinds).

import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_MACHINE_REQUEST, NS_INFRA_PROVIDER, T, providerNamespace } from '../../omni-api/resource.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { MachineRequestStatusSpec as MachineRequestStatusSpecSchema } from '../../omni-api/specs/messages.js';
import type { MachineRequestStatusSpec } from '../../omni-api/specs/messages.js';
import { predictHolds, predictionOf } from './explain.js';
import type { PlanItem } from './plan.js';
import { PROVIDER_WIDE_IDS, type ResolvedProfile } from '../profile.js';

/** The marker that every error text and description the stub writes starts with (design rule 7). */
export const STUB_MARKER = 'stub-provider';

/** Omni 1.4.0 added the cleanup that also tears down user-owned MachineRequestSets (docs/omni-lifecycle.md 9). */
const DELETE_EFFECT =
  'deleting the provider also tears down every user-owned MachineRequestSet, of every provider, not only this one: ' +
  'check `omnictl get machinerequestsets` first.';
export const DELETE_WARNING = `On Omni 1.4 and later, ${DELETE_EFFECT}`;
/** When Omni's version could not be read: the operator knows it, we do not. */
export const DELETE_WARNING_VERSION_UNKNOWN =
  `If this Omni is 1.4 or later (its version could not be read), ` + `${DELETE_EFFECT}`;

/** The warning that goes with `omnictl infraprovider delete` for this Omni version; none before 1.4. */
export function deleteWarning(omniVersion: string | undefined): string | undefined {
  if (omniVersion === undefined || !/^v?\d+\.\d+/.test(omniVersion.trim())) return DELETE_WARNING_VERSION_UNKNOWN;
  return atLeast(omniVersion, 1, 4) ? DELETE_WARNING : undefined;
}

/** A status the stub wrote to refuse a request: its error starts with our marker. */
export function isStubRefusal(status: Resource): boolean {
  return statusSpecOf(status)?.error.startsWith(STUB_MARKER) ?? false;
}

/** The decoded MachineRequestStatus spec, or undefined when the bytes do not decode. */
export function statusSpecOf(status: Resource): MachineRequestStatusSpec | undefined {
  try {
    return decodeSpec(MachineRequestStatusSpecSchema, status.spec.protoSpec).value;
  } catch {
    return undefined;
  }
}

/** The machine UUID a MachineRequestStatus names (field 1), when set. */
export function statusMachineId(status: Resource): string | undefined {
  return statusSpecOf(status)?.id || undefined;
}

/** `v1.4.0`, `1.3.4-beta.1` -> compares major.minor. */
export function atLeast(version: string, major: number, minor: number): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(version.trim());
  if (!m) return true;
  const [ma, mi] = [Number(m[1]), Number(m[2])];
  return ma > major || (ma === major && mi >= minor);
}

/**
 * An InfraMachine or MachineRequest item whose last operation, its release, leaves it to Omni to
 * destroy at once: no finalizer of anyone else stays on it, or only Omni's that let go by themselves.
 */
export function releasesCompletely(item: PlanItem): boolean {
  if (item.kind !== 'InfraMachine' && item.kind !== 'MachineRequest') return false;
  const last = item.ops.at(-1);
  return (
    last?.op === 'remove-finalizers' &&
    last.target.id === item.id &&
    (!last.holds || predictionOf(predictHolds(last.holds)) === 'lets-go')
  );
}

export function kindOf(r: Resource | { type: string }): string {
  const type = 'metadata' in r ? r.metadata.type : r.type;
  return type.split('.')[0] ?? type;
}

/**
 * The InfraMachine and/or MachineRequest a per-item resource belongs to, by its type: an
 * InfraMachineStatus to the InfraMachine of its ID, a MachineRequestStatus to the MachineRequest of
 * its ID, a ConfigPatchRequest to the request its label names, a resource in `infra-provider:<id>`
 * to the InfraMachine (per-machine types) or MachineRequest (per-request types) of its ID, both for
 * a type that is both, or, for a request-linked type, to the request its label names. None for
 * provider-wide resources (TLSConfig) nor an unlabelled request-linked one: only deregistration
 * cleans those.
 */
export function parentsOf(r: Resource, profile: ResolvedProfile): ParentPointer[] {
  const md = r.metadata;
  if (md.namespace === NS_INFRA_PROVIDER) {
    if (md.type === T.InfraMachineStatus) return [machineOf(md.id)];
    if (md.type === T.MachineRequestStatus) return [requestOf(md.id)];
    const req = md.type === T.ConfigPatchRequest ? md.labels[LABEL_MACHINE_REQUEST] : undefined;
    return req ? [requestOf(req)] : [];
  }
  if (profile.requestLinkedTypes.includes(md.type)) {
    // Its ID is not a request's (an OpenNebula NameReservation's is name-reservation/<cluster>/<role>/<n>).
    const req = md.labels[LABEL_MACHINE_REQUEST];
    return req ? [requestOf(req)] : [];
  }
  if (PROVIDER_WIDE_IDS.has(md.id)) return [];
  // Called for every per-item resource of every plan: no closures nor spreads.
  const out: ParentPointer[] = [];
  if (profile.machineTypes.includes(md.type)) out.push(machineOf(md.id));
  if (profile.stateTypes.includes(md.type)) out.push(requestOf(md.id));
  return out;
}

type ParentPointer = Pointer & { type: typeof T.InfraMachine | typeof T.MachineRequest };

/** The InfraMachine of that ID. */
export function machineOf(id: string): ParentPointer {
  return { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id };
}

/** The MachineRequest of that ID. */
export function requestOf(id: string): ParentPointer {
  return { namespace: NS_INFRA_PROVIDER, type: T.MachineRequest, id };
}

/** A namespace and a type. */
export type NamespacedType = Pick<Pointer, 'namespace' | 'type'>;

/**
 * What `parentsOf` names the other way round, as the kinds whose resource of the parent's ID
 * belongs to it: for an InfraMachine its InfraMachineStatus and the per-machine types in our
 * namespace, for a MachineRequest its MachineRequestStatus and the per-request types.
 * ConfigPatchRequests have IDs of their own and are found by List only.
 */
export function childKinds(
  parentType: typeof T.InfraMachine | typeof T.MachineRequest,
  profile: ResolvedProfile,
  providerId: string,
): NamespacedType[] {
  const ns = providerNamespace(providerId);
  if (parentType === T.InfraMachine)
    return [
      { namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus },
      ...profile.machineTypes.map((t) => ({ namespace: ns, type: t })),
    ];
  return [
    { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus },
    ...profile.stateTypes.map((t) => ({ namespace: ns, type: t })),
  ];
}
