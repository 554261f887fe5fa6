// A dump of an Omni's state (`omnictl get <type> -o yaml` documents, or a sim `--dump` file) served
// in-process and read-only, as the provider's account would see it: the sim's store behind Omni's
// access rules (access.ts), for `stub-provider plan --from-dump`. The plan is made by the real code
// (src/provider/read/snapshot.ts and plan.ts) over this State; nothing here plans.
//
// What a dump can and cannot hold (docs/operator-guide.md, "Planning from a dump"): omnictl resolves
// a type through Omni's ResourceDefinitions, and a provider's own types
// (`<Name>.<id>.infraprovider.sidero.dev` in `infra-provider:<id>`) have none, so no omnictl call
// dumps that namespace. An empty List prints nothing either: a kind absent from a dump may be empty
// in Omni or may not have been dumped. `summarizeDump` says what the dump holds, for the caller to
// word what the plan could not see.

import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_INFRA_PROVIDER_ID, NS_EPHEMERAL, NS_INFRA_PROVIDER, T } from '../../omni-api/resource.js';
import type { CallOptions, QueryOptions, RemoveFinalizersResult, State, WatchEvent } from '../../omni-api/state.js';
import type { Identity, Query } from '../api.js';
import { createAccessApi } from '../access/access.js';
import { sysVersionResource } from '../behaviour.js';
import { emailForIdentityName } from './keys.js';
import type { Scenario } from './scenario.js';
import { SimStore } from '../store/store.js';

const PROVIDER_NS_PREFIX = 'infra-provider:';

export interface DumpSummary {
  /** IDs of the provider registrations (InfraProviders) the dump holds. */
  registered: string[];
  /**
   * Provider IDs that the dump's resources name (the infra-provider-id label, or an `infra-provider:<id>` namespace).
   */
  named: string[];
  /** Whether the dump holds a resource of this namespace and type. */
  has(namespace: string, type: string): boolean;
  /** Whether the dump holds anything in this namespace. */
  hasNamespace(namespace: string): boolean;
}

export function summarizeDump(sc: Pick<Scenario, 'resources'>): DumpSummary {
  const kinds = new Set<string>();
  const namespaces = new Set<string>();
  const registered = new Set<string>();
  const named = new Set<string>();
  for (const r of sc.resources) {
    const md = r.metadata;
    kinds.add(`${md.namespace}\u0000${md.type}`);
    namespaces.add(md.namespace);
    if (md.type === T.InfraProvider && md.namespace === NS_INFRA_PROVIDER) registered.add(md.id);
    const label = md.labels[LABEL_INFRA_PROVIDER_ID];
    if (label) named.add(label);
    if (md.namespace.startsWith(PROVIDER_NS_PREFIX)) named.add(md.namespace.slice(PROVIDER_NS_PREFIX.length));
  }
  return {
    registered: [...registered].sort(),
    named: [...named].sort(),
    has: (namespace, type) => kinds.has(`${namespace}\u0000${type}`),
    hasNamespace: (namespace) => namespaces.has(namespace),
  };
}

export class ReadOnlyDumpError extends Error {
  constructor(what: string) {
    super(`${what}: a dump is read-only (plan --from-dump writes nothing)`);
    this.name = 'ReadOnlyDumpError';
  }
}

/**
 * A read-only State over the dump, answering as Omni answers `infra-provider:<providerId>`: its
 * access rules (registration, label filtering) at the dump's Omni version (a header's, its
 * SysVersion's, else scenario.ts's default), the store's NotFound for what the dump does not hold;
 * the SysVersion of a header's version when the dump has none (a sim's dump).
 * Writes and watches throw.
 */
export function dumpState(sc: Scenario, providerId: string): State {
  const store = new SimStore({ clock: { now: () => Date.now() } });
  store.seed(sc.resources);
  // A sim's dump names its Omni's version in its header and leaves out the SysVersion that sim served
  // (it made it itself): serve it again, as that sim did. Never made up when the file did not say.
  const hasSysVersion = sc.resources.some(
    (r) => r.metadata.namespace === NS_EPHEMERAL && r.metadata.type === T.SysVersion,
  );
  if (sc.omniVersionFromHeader && !hasSysVersion) store.seed([sysVersionResource(sc.omniVersion, Date.now())]);
  const api = createAccessApi(store, { version: sc.omniVersion });
  const name = `${PROVIDER_NS_PREFIX}${providerId}`;
  const who: Identity = { name, email: emailForIdentityName(name), role: 'InfraProvider', providerId };
  const noQuery: Query = { labelQueries: [], idRegexp: '' };
  const answer = async <R>(fn: () => R, signal?: AbortSignal): Promise<R> => {
    if (signal?.aborted) throw signal.reason ?? errorFromStatus(GrpcCode.Canceled, 'canceled');
    return fn();
  };
  const refuse = (what: string) => Promise.reject(new ReadOnlyDumpError(what));
  return {
    get: (p: Pointer, o?: CallOptions) => answer(() => api.get(who, p), o?.signal),
    list: (namespace: string, type: string, o?: QueryOptions) => {
      if (o?.labelQueries?.length || o?.idRegexp) return refuse(`a List of ${type} with a query`);
      return answer(() => api.list(who, namespace, type, noQuery), o?.signal);
    },
    // eslint-disable-next-line require-yield
    watchKind: async function* (namespace: string, type: string): AsyncGenerator<WatchEvent[]> {
      throw new ReadOnlyDumpError(`a watch of ${namespace}/${type}`);
    },
    create: (r: Resource) => refuse(`a Create of ${r.metadata.type} ${r.metadata.id}`),
    update: (r: Resource) => refuse(`an Update of ${r.metadata.type} ${r.metadata.id}`),
    destroy: (p: Pointer) => refuse(`a Destroy of ${p.type} ${p.id}`),
    updateWithConflicts: (t: Resource | Pointer) => {
      const p = 'metadata' in t ? t.metadata : t;
      return refuse(`an Update of ${p.type} ${p.id}`);
    },
    teardown: (p: Pointer) => refuse(`a teardown of ${p.type} ${p.id}`),
    removeFinalizers: (t: Resource | Pointer): Promise<RemoveFinalizersResult> => {
      const p = 'metadata' in t ? t.metadata : t;
      return refuse(`removing finalizers of ${p.type} ${p.id}`);
    },
  };
}
