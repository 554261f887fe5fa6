// Resources across the sim's gateway (docs/omni-wire.md 2.2): a Create/Update body validated as Omni's
// server validates it (proto_spec of its registered types decoded, yaml_spec ignored), and a resource or
// Watch event answered as Omni answers it (yaml_spec rendered for the version, map keys sorted).

import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Resource } from '../../omni-api/resource.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { OMNI_SPEC_SCHEMAS } from '../../omni-api/specs/specs.js';
import { EventType, resourceFromWire, resourceToWire } from '../../omni-api/wire.js';
import type { SimEvent } from '../api.js';
import { renderYamlSpec } from '../behaviour.js';
import type { OmniVersion } from '../version.js';

/** A map with its keys in order, as Go's protojson writes map fields (the recordings show labels sorted). */
function sortedKeys(m: Record<string, string>): Record<string, string> {
  const keys = Object.keys(m);
  if (keys.length < 2) return m;
  const out: Record<string, string> = {};
  for (const k of keys.sort()) out[k] = m[k] as string;
  return out;
}

/**
 * Rendered yaml_spec by (type, proto bytes); bounded, the oldest entry evicted first. A hit only reads
 * (no reordering on every hit, dear in a map of a 100 000-machine fleet's specs): a cache sized by the
 * fleet it serves rarely evicts.
 */
export class YamlCache {
  private readonly m = new Map<string, string | undefined>();
  constructor(
    private readonly max: number,
    private readonly renderSpec: (type: string, bytes: Uint8Array) => string | undefined,
  ) {}
  render(type: string, bytes: Uint8Array): string | undefined {
    // latin1 maps each byte to one char: a cheap exact key (rendering YAML is ~50x dearer).
    const key = `${type}\0${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')}`;
    const hit = this.m.get(key);
    if (hit !== undefined || this.m.has(key)) return hit;
    const v = this.renderSpec(type, bytes);
    if (this.m.size >= this.max) this.m.delete(this.m.keys().next().value as string);
    this.m.set(key, v);
    return v;
  }
}

/** Enough for a 10 000-machine fleet (about 22 000 distinct specs of Omni's types, ~0.4 KB each). */
const MIN_YAML_ENTRIES = 32_768;

/** Resources in and out of the gateway for one Omni version. */
export class ResourceCodec {
  /**
   * The same specs are rendered again and again (every List, Update and Watch event echoes them): the
   * cache holds one entry per resource of the fleet it serves (`specs`, at least `MIN_YAML_ENTRIES`).
   * A cache smaller than the fleet misses on nearly every call once a run walks the whole fleet (a
   * List, then a write per resource), and the sim then spends its time rendering YAML.
   */
  private readonly yaml: YamlCache;

  constructor(version: OmniVersion, specs = 0) {
    this.yaml = new YamlCache(Math.max(MIN_YAML_ENTRIES, specs), (t, b) => renderYamlSpec(t, b, version));
  }

  /** A resource from a Create/Update body, validated like Omni's server (docs/omni-wire.md 2.2). */
  incoming(w: unknown): Resource {
    let r: Resource;
    try {
      r = resourceFromWire(w, true);
    } catch (e) {
      throw errorFromStatus(GrpcCode.Unknown, (e as Error).message);
    }
    if (OMNI_SPEC_SCHEMAS.has(r.metadata.type)) {
      // Omni's registered types: proto_spec is decoded (bad bytes fail), yaml_spec ignored.
      const schema = OMNI_SPEC_SCHEMAS.get(r.metadata.type)!;
      try {
        decodeSpec(schema, r.spec.protoSpec);
      } catch (e) {
        throw errorFromStatus(GrpcCode.Unknown, `failed to unmarshal spec: ${(e as Error).message}`);
      }
      delete r.spec.yamlSpec;
    }
    return r;
  }

  /** A resource as Omni answers it: yaml_spec rendered by the server for its registered types. */
  out(r: Resource): Record<string, unknown> {
    if (OMNI_SPEC_SCHEMAS.has(r.metadata.type)) {
      try {
        const yaml = this.yaml.render(r.metadata.type, r.spec.protoSpec);
        if (yaml !== undefined) r.spec.yamlSpec = yaml;
      } catch {
        // Bytes seeded by a scenario that do not decode: send them as they are.
      }
    }
    const w = resourceToWire(r);
    const md = w['metadata'] as Record<string, unknown>;
    md['labels'] = sortedKeys(r.metadata.labels);
    md['annotations'] = sortedKeys(r.metadata.annotations);
    return w;
  }

  eventOut(e: SimEvent): Record<string, unknown> {
    return {
      ...(e.eventType === EventType.ERRORED ? {} : { resource: this.out(e.resource) }),
      event_type: e.eventType,
      ...(e.old ? { old: this.out(e.old) } : {}),
      ...(e.error !== undefined ? { error: e.error } : {}),
      ...(e.bookmark !== undefined ? { bookmark: e.bookmark } : {}),
    };
  }
}
