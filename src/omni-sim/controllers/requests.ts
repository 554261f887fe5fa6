// Omni's controllers of a provisioning provider's machines, as the sim emulates them (controllers.ts):
// the MachineRequest, its MachineRequestStatus and the user's MachineRequestSet that asks for them,
// and the requests Omni creates for a set. The chain of a deletion is docs/omni-lifecycle.md 4.2,
// who lets go when is section 3.2, and the sets' caveat from 1.4 is section 9.

import type { Resource } from '../../omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_MACHINE_REQUEST_SET,
  newMetadata,
  NS_DEFAULT,
  NS_INFRA_PROVIDER,
  PHASE_RUNNING,
  PHASE_TEARING_DOWN,
  T,
} from '../../omni-api/resource.js';
import { decodeSpec, encodeSpec, updateSpec } from '../../omni-api/specs/codec.js';
import { MachineRequestSetSpec, MachineRequestSpec, MachineRequestStatusSpec } from '../../omni-api/specs/messages.js';
import { INTERNAL } from '../api.js';
import { C, eqLabel, type OmniActor, ptr } from './actor.js';
import { atLeast } from '../version.js';

/** Kinds of `default` that Omni's MachineRequestStatusCleanupController waits for (by the status's machine ID). */
export const MACHINE_SET_NODE = 'MachineSetNodes.omni.sidero.dev';
export const CLUSTER_MACHINE = 'ClusterMachines.omni.sidero.dev';
/** Before 1.4, ClusterMachineRequestStatusController also let go past this one (a ClusterMachine finalizer). */
const CLUSTER_MACHINE_ENCRYPTION_KEY = 'ClusterMachineEncryptionKeyController';

/** The fields a MachineRequest copies from its set, left empty by the sim. */
const REQUEST_DEFAULTS = { extensions: [], kernel_args: [], meta_values: [], provider_data: '', grpc_tunnel: 0 };

export interface MachineRequestOptions {
  providerId: string;
  /** Default `<set>-<6 random chars>` for set members; required otherwise. */
  id?: string;
  /** The MachineRequestSet it belongs to (label `omni.sidero.dev/machine-request-set`). */
  set?: string;
  talosVersion?: string;
}

export interface MachineRequestSetOptions {
  id: string;
  providerId: string;
  machineCount: number;
  talosVersion?: string;
}

/**
 * MachineRequestSetStatusController and ClusterMachineRequestStatusController on a torn-down request. The
 * latter (a qtransform with WithIgnoreTeardownUntil, docs/omni-behaviour.md 'What Omni's own controllers wait
 * for') treats the request as running while any other finalizer is on it (before 1.4: other than
 * ClusterMachineEncryptionKeyController); then it destroys its own ClusterMachineRequestStatus, which no
 * controller holds, and lets go at once.
 */
export function reconcileMachineRequest(a: OmniActor, id: string): void {
  const mr = a.peek(ptr(NS_INFRA_PROVIDER, T.MachineRequest, id));
  if (!mr) return;
  if (mr.metadata.phase === PHASE_RUNNING) {
    // A qtransform adds its finalizer to every running input, before its transform runs.
    a.addFinalizer(mr, C.ClusterMachineRequestStatus);
    return;
  }
  let cur = a.removeFinalizers(mr, (f) => f === C.MachineRequestSetStatus);
  const ignored = new Set<string>([
    C.ClusterMachineRequestStatus,
    ...(atLeast(a.v, '1.4') ? [] : [CLUSTER_MACHINE_ENCRYPTION_KEY]),
  ]);
  if (cur.metadata.finalizers.every((f) => ignored.has(f)))
    cur = a.removeFinalizers(cur, (f) => f === C.ClusterMachineRequestStatus);
  const inSet = cur.metadata.labels[LABEL_MACHINE_REQUEST_SET] !== undefined;
  // A standalone request (1.7+, owner "") is destroyed by whoever tore it down (TeardownAndDestroy).
  if (!inSet && cur.metadata.owner === '') return;
  a.destroyIfReady(cur);
}

/**
 * MachineRequestStatusCleanupController (docs/omni-behaviour.md, 1.3.4 and 1.9.3): once the
 * status is torn down, a MachineSetNode of its machine is waited for while a controller owns it
 * and torn down and destroyed when a user does; then it waits while the machine's ClusterMachine
 * exists; then it tears down the machine's Link and lets go. Nothing of it: it lets go at once.
 */
export function reconcileMachineRequestStatus(a: OmniActor, id: string): void {
  const mrs = a.peek(ptr(NS_INFRA_PROVIDER, T.MachineRequestStatus, id));
  if (!mrs) return;
  if (mrs.metadata.phase === PHASE_RUNNING) {
    a.addFinalizer(mrs, C.MachineRequestStatusCleanup);
    return;
  }
  if (!mrs.metadata.finalizers.includes(C.MachineRequestStatusCleanup)) return;
  let uuid = '';
  try {
    uuid = decodeSpec(MachineRequestStatusSpec, mrs.spec.protoSpec).value.id;
  } catch {
    // An undecodable status names no machine.
  }
  if (uuid !== '') {
    const node = a.peek(ptr(NS_DEFAULT, MACHINE_SET_NODE, uuid));
    if (node && (node.metadata.owner !== '' || !a.teardownAndDestroy(node))) return;
    if (a.peek(ptr(NS_DEFAULT, CLUSTER_MACHINE, uuid))) return;
    const link = a.peek(ptr(NS_DEFAULT, T.Link, uuid));
    if (link) a.teardown(link);
  }
  const cur = a.peek(mrs.metadata);
  if (cur) a.removeFinalizers(cur, (f) => f === C.MachineRequestStatusCleanup);
}

/**
 * MachineRequestSetStatusController: scale down, (1.7+) replace, tear down with the set. `suffix`: of replacement IDs.
 */
export function reconcileSet(a: OmniActor, id: string, suffix: () => string): void {
  const set = a.peek(ptr(NS_DEFAULT, T.MachineRequestSet, id));
  if (!set) return;
  const requests = a.list(NS_INFRA_PROVIDER, T.MachineRequest, eqLabel(LABEL_MACHINE_REQUEST_SET, id));
  let spec: MachineRequestSetSpec | undefined;
  try {
    spec = decodeSpec(MachineRequestSetSpec, set.spec.protoSpec).value;
  } catch {
    spec = undefined;
  }
  if (set.metadata.phase === PHASE_TEARING_DOWN) {
    const providerId = spec?.provider_id || requests[0]?.metadata.labels[LABEL_INFRA_PROVIDER_ID];
    const strip = atLeast(a.v, '1.4') && (providerId === undefined || !a.providerActive(providerId));
    for (const r of requests) {
      const torn = a.teardown(r);
      if (strip) a.removeFinalizers(torn, (f) => f !== C.ClusterMachineRequestStatus);
    }
    if (requests.length === 0 || requests.every((r) => !a.peek(r.metadata))) {
      const cur = a.peek(set.metadata);
      if (cur) {
        const after = a.removeFinalizers(cur, (f) => f === C.MachineRequestSetStatus);
        if (after.metadata.owner === '') a.destroyIfReady(after);
      }
    }
    return;
  }
  if (!spec) return;
  const running = requests
    .filter((r) => r.metadata.phase === PHASE_RUNNING)
    .sort((x, y) => (x.metadata.id < y.metadata.id ? -1 : 1));
  for (const extra of running.slice(Math.max(0, spec.machine_count))) a.teardown(extra);
  if (atLeast(a.v, '1.7')) {
    for (let n = requests.length; n < spec.machine_count; n++)
      newRequest(
        a,
        { providerId: spec.provider_id, set: id, ...(spec.talos_version ? { talosVersion: spec.talos_version } : {}) },
        suffix,
      );
  }
}

/** A MachineRequest as Omni creates it (owner "" from 1.7, MachineRequestSetStatusController before). */
export function newRequest(a: OmniActor, o: MachineRequestOptions, suffix: () => string): Resource {
  const id = o.id ?? (o.set !== undefined ? `${o.set}-${suffix()}` : undefined);
  if (id === undefined) throw new Error('a MachineRequest outside a set needs an id');
  const labels: Record<string, string> = { [LABEL_INFRA_PROVIDER_ID]: o.providerId };
  if (o.set !== undefined) labels[LABEL_MACHINE_REQUEST_SET] = o.set;
  const owner = atLeast(a.v, '1.7') || o.set === undefined ? '' : C.MachineRequestSetStatus;
  const spec = encodeSpec(MachineRequestSpec, { ...REQUEST_DEFAULTS, talos_version: o.talosVersion ?? '' });
  return a.store.create(
    INTERNAL,
    {
      metadata: newMetadata(ptr(NS_INFRA_PROVIDER, T.MachineRequest, id), { owner, labels }),
      spec: { protoSpec: spec },
    },
    owner,
  );
}

/** A user-owned MachineRequestSet with its first `machineCount` requests. */
export function createMachineRequestSet(
  a: OmniActor,
  opts: MachineRequestSetOptions,
  suffix: () => string,
): { set: Resource; requests: Resource[] } {
  const spec = encodeSpec(MachineRequestSetSpec, {
    ...REQUEST_DEFAULTS,
    provider_id: opts.providerId,
    machine_count: opts.machineCount,
    talos_version: opts.talosVersion ?? '',
  });
  const set = a.store.create(
    INTERNAL,
    { metadata: newMetadata(ptr(NS_DEFAULT, T.MachineRequestSet, opts.id)), spec: { protoSpec: spec } },
    '',
  );
  const requests: Resource[] = [];
  for (let i = 0; i < opts.machineCount; i++) {
    requests.push(
      newRequest(
        a,
        {
          providerId: opts.providerId,
          set: opts.id,
          ...(opts.talosVersion ? { talosVersion: opts.talosVersion } : {}),
        },
        suffix,
      ),
    );
  }
  return { set, requests };
}

/** Sets the MachineRequestSet's machine_count to `count`; the extra requests are torn down. */
export function scaleDown(a: OmniActor, set: string, count: number): void {
  const s = a.store.get(INTERNAL, ptr(NS_DEFAULT, T.MachineRequestSet, set));
  a.mutate(s, (n) => {
    n.spec.protoSpec = updateSpec(MachineRequestSetSpec, n.spec.protoSpec, { machine_count: count });
  });
}
