// What every one of the sim's controllers (controllers.ts) does to the store, as Omni's internal
// actor: Omni's controller names (its owners and finalizers, docs/omni-lifecycle.md 3.2), reads that
// build no NotFound per absent resource, and writes as the resource's owner that write nothing when
// nothing changes, so that a pass finding nothing to do stays silent. Also the two facts of a
// provider the controllers keep asking: is it still Running, and where its ID sits on a Link.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import {
  cloneResource,
  LABEL_INFRA_PROVIDER_ID,
  NS_INFRA_PROVIDER,
  PHASE_RUNNING,
  PHASE_TEARING_DOWN,
  T,
} from '../../omni-api/resource.js';
import type { StateApi } from '../api.js';
import { INTERNAL } from '../api.js';
import { EMPTY_QUERY } from '../store/query.js';
import type { StoreEvent } from '../store/watch.js';
import type { OmniVersion } from '../version.js';
import { atLeast } from '../version.js';

/** Omni's controller names, used as owners and finalizers. */
export const C = {
  InfraMachine: 'InfraMachineController',
  InfraMachineRegistration: 'InfraMachineRegistrationController',
  Machine: 'MachineController',
  LinkCleanup: 'LinkCleanupController',
  MachineRequestSetStatus: 'MachineRequestSetStatusController',
  ClusterMachineRequestStatus: 'ClusterMachineRequestStatusController',
  MachineRequestStatusCleanup: 'MachineRequestStatusCleanupController',
  ConfigPatchRequest: 'ConfigPatchRequestController',
  InfraProviderCleanup: 'InfraProviderCleanupController',
  ProviderJoinConfig: 'ProviderJoinConfigController',
  InfraProviderStatus: 'InfraProviderStatusController',
} as const;

/** The store as controllers use it: the COSI API plus change notifications (SimStore). */
export interface ControllerStore extends StateApi {
  onEvent(cb: (e: StoreEvent) => void): () => void;
  /** A copy of the stored resource, or undefined: no NotFound error built and thrown per absent resource. */
  peek(p: Pointer): Resource | undefined;
  /** The stored resources of one kind, not copied (SimStore.viewKind). */
  viewKind(namespace: string, type: string): Iterable<Readonly<Resource>>;
}

export const ptr = (namespace: string, type: string, id: string): Pointer => ({ namespace, type, id });

export function eqLabel(key: string, value: string) {
  return { labelQueries: [[{ key, op: 1, value: [value], invert: false }]], idRegexp: '' };
}

/** The store helpers of Omni's internal actor, for the scenario's Omni version `v`. */
export class OmniActor {
  /** `addFinalizers`: whether Omni's own finalizers are added to Running resources that lack them. */
  constructor(
    readonly store: ControllerStore,
    readonly v: OmniVersion,
    private readonly addFinalizers: boolean,
  ) {}

  peek(p: Pointer): Resource | undefined {
    return this.store.peek(p);
  }

  list(ns: string, type: string, q = EMPTY_QUERY): Resource[] {
    return this.store.list(INTERNAL, ns, type, q);
  }

  /** Writes `change` of the current resource as its owner; no write when nothing changes. */
  mutate(r: Resource, change: (n: Resource) => void): Resource {
    const next = cloneResource(r);
    change(next);
    const same =
      JSON.stringify([
        next.metadata.finalizers,
        next.metadata.labels,
        next.metadata.annotations,
        next.metadata.phase,
      ]) === JSON.stringify([r.metadata.finalizers, r.metadata.labels, r.metadata.annotations, r.metadata.phase]) &&
      Buffer.from(next.spec.protoSpec).equals(Buffer.from(r.spec.protoSpec));
    return same ? r : this.store.update(INTERNAL, next, r.metadata.owner);
  }

  removeFinalizers(r: Resource, drop: (f: string) => boolean): Resource {
    return this.mutate(r, (n) => {
      n.metadata.finalizers = n.metadata.finalizers.filter((f) => !drop(f));
    });
  }

  addFinalizer(r: Resource, f: string): void {
    if (!this.addFinalizers || r.metadata.phase !== PHASE_RUNNING || r.metadata.finalizers.includes(f)) return;
    this.mutate(r, (n) => n.metadata.finalizers.push(f));
  }

  teardown(r: Resource): Resource {
    return this.mutate(r, (n) => {
      n.metadata.phase = PHASE_TEARING_DOWN;
    });
  }

  /** Destroys it once torn down and free of finalizers; true when gone. */
  destroyIfReady(r: Resource): boolean {
    if (r.metadata.phase !== PHASE_TEARING_DOWN || r.metadata.finalizers.length > 0) return false;
    this.store.destroy(INTERNAL, r.metadata, r.metadata.owner);
    return true;
  }

  /** Teardown + destroy as the resource's owner (Omni's cleanup helpers); true when gone. */
  teardownAndDestroy(r: Resource | undefined): boolean {
    if (!r) return true;
    return this.destroyIfReady(this.teardown(r));
  }

  providerActive(id: string): boolean {
    const p = this.peek(ptr(NS_INFRA_PROVIDER, T.InfraProvider, id));
    return p !== undefined && p.metadata.phase === PHASE_RUNNING;
  }

  /** The provider ID on a Link or Machine: an annotation up to 1.3, a label from 1.4. */
  providerOf(r: Resource): string | undefined {
    return atLeast(this.v, '1.4')
      ? r.metadata.labels[LABEL_INFRA_PROVIDER_ID]
      : r.metadata.annotations[LABEL_INFRA_PROVIDER_ID];
  }

  providerMark(providerId: string): Pick<Resource['metadata'], 'labels' | 'annotations'> {
    return atLeast(this.v, '1.4')
      ? { labels: { [LABEL_INFRA_PROVIDER_ID]: providerId }, annotations: {} }
      : { labels: {}, annotations: { [LABEL_INFRA_PROVIDER_ID]: providerId } };
  }
}
