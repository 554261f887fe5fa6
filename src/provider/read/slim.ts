// What the provider keeps of each resource it read: strings shared across the fleet, specs only
// where it may write them back or reads them.

import type { Resource } from '../../omni-api/resource.js';
import { PHASE_RUNNING, PHASE_TEARING_DOWN, T, providerType } from '../../omni-api/resource.js';
import { OMNI_SPEC_SCHEMAS } from '../../omni-api/specs/specs.js';
import { ourFinalizers } from '../ownership.js';

export class Slimmer {
  private readonly pool = new Map<string, string>();
  /** Label sets, annotation sets and finalizer lists seen, each shared (frozen) by every resource that has it. */
  private readonly records = new Map<string, Readonly<Record<string, string>>>();
  private readonly lists = new Map<string, readonly string[]>();

  /** The provider's BMCConfiguration type, whose spec is always kept (see `slim`). */
  private readonly bmcConfigurationType: string;

  /**
   * The last value shared of each field: a List's items (most of what is slimmed) are of one kind and
   * mostly alike, so the next one's namespace, type, owner, timestamps, labels and finalizers are
   * most often the very same, found by comparing with it instead of building a key and looking it up.
   */
  private readonly last = {
    namespace: new LastString(),
    type: new LastString(),
    owner: new LastString(),
    created: new LastString(),
    updated: new LastString(),
  };
  private lastLabels: Recent<Readonly<Record<string, string>>> = { keys: [], value: EMPTY_RECORD };
  private lastAnnotations: Recent<Readonly<Record<string, string>>> = { keys: [], value: EMPTY_RECORD };
  private lastFinalizers: readonly string[] = EMPTY_LIST;

  constructor(private readonly providerId: string) {
    this.bmcConfigurationType = providerType('BMCConfiguration', providerId);
  }

  /**
   * What the caches keep of a resource (7 per machine: at 10 000 machines this is most of the stub's
   * memory). `yaml_spec` is dropped for Omni's registered types only: Omni renders it from
   * proto_spec on every answer and ignores it in an Update, and the stub never reads it. For the
   * provider's own (opaque) types in `infra-provider:<id>` Omni stores and echoes the yaml_spec it
   * was given, so an Update removing our finalizer must send it back exactly as read: kept. Strings
   * that repeat across a fleet are shared.
   *
   * A resource without a finalizer of ours is never written back from what was read (the stub only
   * destroys it, or re-reads it first): its spec is not kept at all (`Spec.omitted`; the client
   * refuses to write such a resource), unless the plan reads that type's spec (SPEC_READ). At 10 000
   * machines that is four of every machine's seven resources.
   */
  slim(r: Resource, listed = false): Resource {
    const id = this.providerId;
    const md = r.metadata;
    const one = this.intern;
    const last = this.last;
    md.namespace = last.namespace.of(md.namespace, one);
    md.type = last.type.of(md.type, one);
    md.id = one(md.id);
    md.owner = last.owner.of(md.owner, one);
    md.version = one(md.version);
    md.phase = md.phase === PHASE_TEARING_DOWN ? PHASE_TEARING_DOWN : PHASE_RUNNING;
    // Timestamps repeat across what one List holds; every event brings new ones.
    if (listed && md.created !== undefined) md.created = last.created.of(md.created, one);
    if (listed && md.updated !== undefined) md.updated = last.updated.of(md.updated, one);
    // Most resources of a kind carry the same labels, none or the same annotations and the same
    // finalizers: one frozen object each, shared (nothing writes them in place: a write starts from
    // a copy, cloneResource or a spread).
    md.finalizers = this.list(md.finalizers, one);
    md.labels = this.record(md.labels, this.lastLabels);
    md.annotations = this.record(md.annotations, this.lastAnnotations);
    if (
      !SPEC_READ.has(md.type) &&
      md.type !== this.bmcConfigurationType &&
      (md.finalizers.length === 0 || ourFinalizers(md, id).length === 0)
    ) {
      r.spec = OMITTED_SPEC;
      return r;
    }
    // A zero-length array cannot be written to: every empty spec can share one.
    if (r.spec.protoSpec.length === 0) r.spec.protoSpec = EMPTY_BYTES;
    if (OMNI_SPEC_SCHEMAS.has(md.type)) delete r.spec.yamlSpec;
    return r;
  }

  /** The one copy of a string that repeats across the fleet (an ID, an owner, a finalizer, ...). */
  readonly intern = (v: string): string => {
    const seen = this.pool.get(v);
    if (seen !== undefined) return seen;
    if (this.pool.size < MAX_POOLED) this.pool.set(v, v);
    return v;
  };

  /** One shared frozen copy of a label or annotation set (values pooled first); `recent`: the last one shared here. */
  private record(o: Record<string, string>, recent: Recent<Readonly<Record<string, string>>>): Record<string, string> {
    // Already shared (a resource slimmed before, observed again).
    if (Object.isFrozen(o)) return o;
    const keys = Object.keys(o);
    if (keys.length === 0) return EMPTY_RECORD as Record<string, string>;
    if (sameRecord(keys, o, recent)) return recent.value as Record<string, string>;
    let key = '';
    for (const k of keys) {
      const v = this.intern(o[k]!);
      o[k] = v;
      key += `${k}\u0000${v}\u0001`;
    }
    let shared = this.records.get(key);
    if (!shared && this.records.size < MAX_SETS) this.records.set(key, (shared = Object.freeze(o)));
    if (!shared) return o;
    recent.keys = keys;
    recent.value = shared;
    return shared as Record<string, string>;
  }

  /** One shared frozen copy of a finalizer list (its strings pooled). */
  private list(a: string[], one: (v: string) => string): string[] {
    if (Object.isFrozen(a)) return a;
    if (a.length === 0) return EMPTY_LIST as string[];
    if (sameList(a, this.lastFinalizers)) return this.lastFinalizers as string[];
    const key = a.join('\u0000');
    let shared = this.lists.get(key);
    if (!shared) {
      for (let i = 0; i < a.length; i++) a[i] = one(a[i]!);
      if (this.lists.size < MAX_SETS) this.lists.set(key, (shared = Object.freeze(a)));
    }
    if (!shared) return a;
    this.lastFinalizers = shared;
    return shared as string[];
  }
}

/** The last string shared of one field. */
class LastString {
  private v = '';

  /** The shared copy of `s`: the last one when `s` equals it, else `one(s)` (which becomes the last). */
  of(s: string, one: (v: string) => string): string {
    return s === this.v ? this.v : (this.v = one(s));
  }
}

/** The last shared set of one field, with its keys in order. */
interface Recent<T> {
  keys: readonly string[];
  value: T;
}

/** Whether `o` (whose keys are `keys`) holds exactly what the last shared set holds, in the same order. */
function sameRecord(
  keys: readonly string[],
  o: Record<string, string>,
  recent: Recent<Readonly<Record<string, string>>>,
): boolean {
  const r = recent.keys;
  if (r.length !== keys.length) return false;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    if (k !== r[i] || o[k] !== recent.value[k]) return false;
  }
  return true;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Strings shared at most (IDs, owners, versions, finalizers, label values): beyond, a string is kept as it came. */
const MAX_POOLED = 1 << 18;
/** Label sets and finalizer lists shared at most: beyond, each is kept as it came. */
const MAX_SETS = 1 << 12;
const EMPTY_RECORD: Readonly<Record<string, string>> = Object.freeze({});
const EMPTY_LIST: readonly string[] = Object.freeze([]);

const EMPTY_BYTES = new Uint8Array(0);
/** Shared by every resource whose spec was not kept; frozen so that nobody fills it in. */
const OMITTED_SPEC: Resource['spec'] = Object.freeze({ protoSpec: EMPTY_BYTES, omitted: true as const });

/**
 * Types whose spec the stub reads from what it read: MachineRequestStatus (plan.ts tells a FAILED
 * status written by an earlier run from others) and the BMC data a wipe uses (BMCConfig here, the
 * provider's BMCConfiguration by its ID in `slim`).
 */
const SPEC_READ = new Set<string>([T.MachineRequestStatus, T.BMCConfig]);
