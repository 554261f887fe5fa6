// src/omni-sim/access: who may do what: Omni's access rules over the store (this file, composing
// roles.ts, infra.ts and validations.ts), the identities with their public keys (identities.ts), and
// the verification of a call's siderov1 signature (siderov1.ts).
//
// Omni's access rules in front of the sim's store, for one caller at a time (docs/omni-wire.md 4,
// docs/omni-lifecycle.md 2). Two layers, in Omni's order:
//   1. the generic role checks of Omni's API state (docs/omni-wire.md 3.4), skipped for the types the
//      infra-provider state manages;
//   2. the infra-provider state (docs/omni-wire.md 4.2-4.6) for the namespaces `infra-provider`,
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
//
// This file composes the layers into the StateApi the gateway serves; each has its own file:
// roles.ts (layer 1), infra.ts (layer 2), validations.ts (the validations).

import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import {
  cloneResource,
  LABEL_INFRA_PROVIDER_ID,
  NS_INFRA_PROVIDER,
  PHASE_RUNNING,
  PHASE_TEARING_DOWN,
  pointerOf,
  T,
} from '../../omni-api/resource.js';
import type { Identity, Query, StateApi, WatchBatches, WatchParams } from '../api.js';
import { ROLE_RANK } from '../api.js';
import {
  checkNamespaceAndType,
  filterWatch,
  finalizerOnlyChange,
  type InfraConfig,
  infraConfig,
  isInfraNamespace,
  labelled,
  PROVIDER_NS_PREFIX,
} from './infra.js';
import { denied, isRead, outerCheck, roleCheck, roleValidation, type Verb } from './roles.js';
import { checkMachineRequestImmutable, checkProviderDeletable } from './validations.js';
import { backendMessage, backendOf, CACHED_TYPES, goQuote } from '../store/backend.js';
import type { OmniVersion } from '../version.js';
import { atLeast, parseVersion } from '../version.js';

// The module's exports as they were before the split, so that no importer has to change.

const q = goQuote;

export interface AccessOptions {
  /** The simulated Omni version (`omni.version` of the scenario). */
  version: OmniVersion | string;
}

/** What layer 2 decided for one call. */
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
  constructor(
    private readonly inner: StateApi,
    private readonly v: OmniVersion,
  ) {}

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
    if (!infraManaged && !(readsFirst && isInfraNamespace(ns)))
      roleValidation(() => outerCheck(who, type, verb, this.v));
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
      return { config, labelProviderId: checkNamespaceAndType(ns, type, id) ? id : undefined };
    }
    // Users (Reader and above).
    if (!isRead(verb) && type !== T.InfraProvider && !(type === T.MachineRequest && atLeast(this.v, '1.7'))) {
      throw denied(`users are not allowed to modify ${q(type)} resources`);
    }
    if (!isRead(verb) && type === T.MachineRequest && ROLE_RANK[who.role] < ROLE_RANK.Operator) {
      throw denied(`only operators and admins are allowed to modify ${q(type)} resources`);
    }
    if (config.onlyAdminCanRead && who.role !== 'Admin')
      throw denied(`only admins are allowed to read ${q(type)} resources`);
    return { config, labelProviderId: undefined };
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
    const message = CACHED_TYPES.has(p.type)
      ? backendMessage.notCached(p, version)
      : backendMessage.notFound(backendOf(p), 'get', p, version);
    throw errorFromStatus(GrpcCode.NotFound, message, { resource: pointerOf(p) });
  }

  get(who: Identity, p: Pointer): Resource {
    if (who.internal) return this.inner.get(who, p);
    const a = this.check(who, p.namespace, p.type, 'get');
    this.read(p);
    const r = this.inner.get(who, p);
    if (a?.labelProviderId !== undefined && !labelled(r, a.labelProviderId))
      throw errorFromStatus(GrpcCode.NotFound, 'not found');
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
    if (isInfraNamespace(namespace)) checkMachineRequestImmutable(old, r);
    if (old.metadata.phase === PHASE_RUNNING && r.metadata.phase === PHASE_TEARING_DOWN)
      checkProviderDeletable(this.inner, this.v, r.metadata, who);
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
    checkProviderDeletable(this.inner, this.v, p, who);
    const cur = this.read(p);
    const providerId = a?.labelProviderId;
    if (providerId !== undefined) {
      if (a?.config.readOnlyForProviders)
        throw denied(`infra providers are not allowed to destroy ${q(p.type)} resources`);
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
      checkProviderDeletable(this.inner, this.v, p, who);
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
