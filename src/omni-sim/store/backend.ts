// Where Omni keeps a kind and how that storage words its answers. Omni stores most namespaces in
// etcd (COSI's state-etcd) and a few in memory (COSI's inmem state); its API reads the kinds its
// controllers cache from that cache. The three word the same conditions differently, and a caller
// reads them: real Omni's recordings (omni-v1.3.4 and omni-v1.9.3 in the team's shared data) show
// the etcd forms below for every infra-provider kind.
//
//   etcd     "failed to get: resource T(ns/id@undefined) doesn't exist", "failed to create: ... already
//            exists", "failed to update: ... update conflict: expected version '\a', actual version
//            '\x01'" (the versions are int64s printed with Go's %q, i.e. as character literals),
//            "failed to destroy: ... has pending finalizers &[a b]" (a pointer to the list, %s);
//            Update checks version, then owner, then phase.
//   inmem    the same sentences without the "failed to <op>: " prefix, versions as quoted strings
//            ("7"); Update checks owner, then version, then phase.
//   cache    a Get of a cached kind that is absent: "resource T(ns/id@v) doesn't exist".

import {
  NS_EPHEMERAL,
  NS_INFRA_PROVIDER_EPHEMERAL,
  NS_META,
  T,
  VERSION_UNDEFINED,
  type Pointer,
} from '../../omni-api/resource.js';

export type Backend = 'etcd' | 'inmem';

/**
 * Omni's in-memory kinds: the `ephemeral` and `meta` namespaces, and InfraProviderHealthStatuses in
 * `infra-provider-ephemeral` (the infra-provider state sends only that type there to memory; the
 * namespace's other types live in etcd).
 */
export function backendOf(p: { namespace: string; type: string }): Backend {
  if (p.namespace === NS_EPHEMERAL || p.namespace === NS_META) return 'inmem';
  if (p.namespace === NS_INFRA_PROVIDER_EPHEMERAL && p.type === T.InfraProviderHealthStatus) return 'inmem';
  return 'etcd';
}

const omni = (n: string) => `${n}.omni.sidero.dev`;

/**
 * Kinds Omni's API reads from its controllers' cache (the controller runtime's resource cache,
 * `WithResourceCache` in Omni's runtime, the same for 1.3 and 1.9 as far as these go). Only the
 * wording of a missing one's NotFound depends on it here.
 */
export const CACHED_TYPES: ReadonlySet<string> = new Set<string>([
  T.Machine,
  T.Link,
  T.ConfigPatchRequest,
  T.ProviderJoinConfig,
  T.InfraProviderCombinedStatus,
  ...[
    'Clusters',
    'ClusterMachines',
    'ClusterMachineStatuses',
    'ClusterMachineRequestStatuses',
    'ClusterStatuses',
    'ConfigPatches',
    'MachineClasses',
    'MachineLabels',
    'MachineSets',
    'MachineSetNodes',
    'MachineSetStatuses',
    'MachineSetDestroyStatuses',
    'MachineStatuses',
    'MachineStatusSnapshots',
    'JoinTokens',
    'JoinTokenStatuses',
    'DefaultJoinTokens',
    'NodeUniqueTokens',
    'NodeUniqueTokenStatuses',
    'ConnectionParams',
    'SiderolinkAPIConfigs',
    'ServiceAccountStatuses',
  ].map(omni),
]);

/** How COSI names a resource in errors: `Type(namespace/id@version)`. */
export function resourceString(p: Pointer, version: string = VERSION_UNDEFINED): string {
  return `${p.type}(${p.namespace}/${p.id}@${version})`;
}

// ---------------------------------------------------------------------------------------------
// Go's %q

const SIMPLE_ESCAPES: Record<number, string> = {
  7: '\\a',
  8: '\\b',
  12: '\\f',
  10: '\\n',
  13: '\\r',
  9: '\\t',
  11: '\\v',
};
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/** One rune as strconv's appendEscapedRune writes it, inside `quote` quotes. */
function escapeRune(cp: number, quote: string): string {
  const c = String.fromCodePoint(cp);
  if (c === quote || c === '\\') return `\\${c}`;
  if (PRINTABLE.test(c)) return c;
  const simple = SIMPLE_ESCAPES[cp];
  if (simple !== undefined) return simple;
  const hex = (n: number, w: number) => n.toString(16).padStart(w, '0');
  if (cp < 0x20 || cp === 0x7f) return `\\x${hex(cp, 2)}`;
  return cp < 0x10000 ? `\\u${hex(cp, 4)}` : `\\U${hex(cp, 8)}`;
}

/** Go's `%q` of a string (strconv.Quote). */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) out += escapeRune(ch.codePointAt(0) ?? 0xfffd, '"');
  return `${out}"`;
}

/** Go's `%q` of an integer: the character literal of that code point (strconv.QuoteRune), `'\x01'` for 1. */
export function goQuoteRune(n: bigint): string {
  const valid = n >= 0n && n <= 0x10ffffn && !(n >= 0xd800n && n <= 0xdfffn);
  return `'${escapeRune(valid ? Number(n) : 0xfffd, "'")}'`;
}

// ---------------------------------------------------------------------------------------------
// Messages

export type Op = 'get' | 'create' | 'update' | 'destroy';

function wrap(b: Backend, op: Op, s: string): string {
  return b === 'etcd' ? `failed to ${op}: ${s}` : s;
}

const versionValue = (v: string): bigint => (/^[0-9]+$/.test(v) ? BigInt(v) : 0n);

export const backendMessage = {
  notFound: (b: Backend, op: Op, p: Pointer, version?: string) =>
    wrap(b, op, `resource ${resourceString(p, version)} doesn't exist`),
  /** The cache's NotFound (a Get of a cached kind through Omni's API). */
  notCached: (p: Pointer, version?: string) => `resource ${resourceString(p, version)} doesn't exist`,
  alreadyExists: (b: Backend, p: Pointer, version: string) =>
    wrap(b, 'create', `resource ${resourceString(p, version)} already exists`),
  versionConflict: (b: Backend, p: Pointer, current: string, expected: string) =>
    wrap(
      b,
      'update',
      `resource ${resourceString(p, current)} update conflict: expected version ${
        b === 'etcd' ? goQuoteRune(versionValue(expected)) : goQuote(expected)
      }, actual version ${b === 'etcd' ? goQuoteRune(versionValue(current)) : goQuote(current)}`,
    ),
  ownerConflict: (b: Backend, op: 'update' | 'destroy', p: Pointer, current: string, owner: string) =>
    wrap(b, op, `resource ${resourceString(p, current)} is owned by ${goQuote(owner)}`),
  phaseConflict: (b: Backend, p: Pointer, current: string, phase: string) =>
    wrap(b, 'update', `resource ${resourceString(p, current)} is not in phase ${phase}`),
  pendingFinalizers: (b: Backend, p: Pointer, current: string, finalizers: readonly string[]) =>
    wrap(b, 'destroy', `resource ${resourceString(p, current)} has pending finalizers &[${finalizers.join(' ')}]`),
};
