// One resource as a YAML document, both ways: read strictly (every error names the document and the
// key, through the scenario reader's DocReader) from either shape scenario.ts accepts (the scenario's
// `resources:` entries, or `omnictl get -o yaml` documents with omnictl's spec spelling), and written
// back in the scenario shape so that a dump reloads as the same resource. Apart from scenario.ts,
// which assembles documents into a scenario (its header, identities, faults, defaults), because a
// resource's metadata and its three spec forms (spec, proto_spec, yaml_spec) are a grammar of their own.

import { stringify } from 'yaml';
import type { Resource } from '../../omni-api/resource.js';
import { bytesEqual, isValidPhase, newMetadata } from '../../omni-api/resource.js';
import { decodeSpec, encodeSpec } from '../../omni-api/specs/codec.js';
import { formatTimestamp, parseTimestamp } from '../../omni-api/specs/timestamp.js';
import { OMNI_SPEC_SCHEMAS, specSchemaForType } from '../../omni-api/specs/specs.js';
import { specFromPlain, specToPlain } from './plain.js';

export type Plain = Record<string, unknown>;
export const isMap = (v: unknown): v is Plain =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

/** How a document is read strictly: scenario.ts's reader of one document (its name and index in errors). */
export interface DocReader {
  fail(path: string, why: string): never;
  onlyKeys(obj: Plain, allowed: string[], path: string): void;
  str(v: unknown, path: string, opts?: { required?: boolean; fallback?: string }): string;
}

const RESOURCE_KEYS = ['metadata', 'spec', 'proto_spec', 'yaml_spec'];
const METADATA_KEYS = [
  'namespace',
  'type',
  'id',
  'version',
  'owner',
  'phase',
  'created',
  'updated',
  'labels',
  'annotations',
  'finalizers',
];

function parseStringMap(ctx: DocReader, v: unknown, path: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isMap(v)) ctx.fail(path, 'expected a map of strings');
  const out: Record<string, string> = {};
  // `key:` with no value is YAML null; omnictl prints "" for Omni's empty-valued labels.
  for (const [k, x] of Object.entries(v)) out[k] = x === null ? '' : ctx.str(x, `${path}.${k}`);
  return out;
}

function parseTime(ctx: DocReader, v: unknown, path: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (v instanceof Date)
    return formatTimestamp({ seconds: BigInt(Math.floor(v.getTime() / 1000)), nanos: (v.getTime() % 1000) * 1e6 });
  const text = ctx.str(v, path);
  try {
    return formatTimestamp(parseTimestamp(text));
  } catch {
    return ctx.fail(path, 'expected an RFC 3339 timestamp such as 2026-03-01T10:00:00Z');
  }
}

export function parseResource(ctx: DocReader, raw: unknown, path: string, omnictlDoc: boolean): Resource {
  const at = (k: string) => (path ? `${path}.${k}` : k);
  if (!isMap(raw)) return ctx.fail(path || '(document)', 'expected a map with metadata and spec');
  ctx.onlyKeys(raw, RESOURCE_KEYS, path);
  const m = raw['metadata'];
  if (!isMap(m)) return ctx.fail(at('metadata'), 'required map');
  ctx.onlyKeys(m, METADATA_KEYS, at('metadata'));
  const mp = (k: string) => at(`metadata.${k}`);
  const type = ctx.str(m['type'], mp('type'), { required: true });
  const namespace = ctx.str(m['namespace'], mp('namespace'), { required: true });
  const id = ctx.str(m['id'], mp('id'), { required: true });
  let version = '1';
  const v = m['version'];
  if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) version = String(v);
  else if (typeof v === 'bigint' && v > 0n) version = String(v);
  else if (typeof v === 'string' && /^[1-9][0-9]*$/.test(v)) version = v;
  else if (v !== undefined && v !== null) ctx.fail(mp('version'), 'expected a positive integer');
  const phase = ctx.str(m['phase'], mp('phase'), { fallback: 'running' });
  if (!isValidPhase(phase)) ctx.fail(mp('phase'), 'expected running or tearingDown');
  const finalizers = m['finalizers'] ?? [];
  if (!Array.isArray(finalizers)) ctx.fail(mp('finalizers'), 'expected a list of strings');
  const created = parseTime(ctx, m['created'], mp('created'));
  const updated = parseTime(ctx, m['updated'], mp('updated'));
  const metadata = newMetadata(
    { namespace, type, id },
    {
      version,
      owner: ctx.str(m['owner'], mp('owner')),
      phase,
      ...(created !== undefined ? { created } : {}),
      ...(updated !== undefined ? { updated } : {}),
      finalizers: finalizers.map((f, i) => ctx.str(f, `${mp('finalizers')}[${i}]`)),
      labels: parseStringMap(ctx, m['labels'], mp('labels')),
      annotations: parseStringMap(ctx, m['annotations'], mp('annotations')),
    },
  );

  const hasSpec = raw['spec'] !== undefined;
  const hasProto = raw['proto_spec'] !== undefined && raw['proto_spec'] !== null;
  if (hasSpec && hasProto) ctx.fail(at('spec'), 'give either spec or proto_spec, not both');
  let protoSpec: Uint8Array = new Uint8Array(0);
  let yamlSpec: string | undefined;
  if (hasProto) {
    const b64 = ctx.str(raw['proto_spec'], at('proto_spec'));
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 === 1)
      ctx.fail(at('proto_spec'), 'expected standard base64');
    protoSpec = new Uint8Array(Buffer.from(b64, 'base64'));
  } else if (hasSpec && raw['spec'] !== null) {
    const schema = specSchemaForType(type);
    if (schema) {
      try {
        protoSpec = encodeSpec(schema, specFromPlain(schema, raw['spec'], at('spec')));
      } catch (e) {
        ctx.fail(at('spec'), (e as Error).message);
      }
    } else if (omnictlDoc) {
      // omnictl shows an opaque type's yaml_spec as its spec: keep it as that.
      yamlSpec = stringify(raw['spec']);
    } else {
      ctx.fail(at('spec'), `no spec codec for type ${type}; give proto_spec (base64) instead`);
    }
  }
  if (raw['yaml_spec'] !== undefined && raw['yaml_spec'] !== null) {
    if (yamlSpec !== undefined) ctx.fail(at('yaml_spec'), 'give either spec or yaml_spec for this type, not both');
    yamlSpec = ctx.str(raw['yaml_spec'], at('yaml_spec'));
  }
  // Omni ignores yaml_spec for its registered types and renders its own.
  if (OMNI_SPEC_SCHEMAS.has(type)) yamlSpec = undefined;
  if (protoSpec.length > 0 && specSchemaForType(type)) {
    try {
      decodeSpec(specSchemaForType(type)!, protoSpec);
    } catch (e) {
      ctx.fail(
        hasProto ? at('proto_spec') : at('spec'),
        `does not decode as the spec of ${type}: ${(e as Error).message}`,
      );
    }
  }
  return { metadata, spec: { protoSpec, ...(yamlSpec !== undefined && yamlSpec !== '' ? { yamlSpec } : {}) } };
}

/** The spec as a readable map when that map encodes back to exactly the same bytes; else undefined. */
function specAsPlain(r: Resource): Plain | undefined {
  const schema = specSchemaForType(r.metadata.type);
  if (!schema) return undefined;
  try {
    const { value, unknown } = decodeSpec(schema, r.spec.protoSpec);
    if (unknown.length > 0) return undefined;
    const plain = specToPlain(schema, value, 'proto');
    return bytesEqual(encodeSpec(schema, specFromPlain(schema, plain)), r.spec.protoSpec) ? plain : undefined;
  } catch {
    return undefined;
  }
}

/** A resource as a scenario lists it: the spec as a map where it encodes back the same, else base64. */
export function resourceToPlain(r: Resource): Plain {
  const m = r.metadata;
  const version = /^[0-9]+$/.test(m.version) && Number.isSafeInteger(Number(m.version)) ? Number(m.version) : m.version;
  const metadata: Plain = { namespace: m.namespace, type: m.type, id: m.id, version, owner: m.owner, phase: m.phase };
  if (m.created !== undefined) metadata['created'] = m.created;
  if (m.updated !== undefined) metadata['updated'] = m.updated;
  if (Object.keys(m.labels).length > 0) metadata['labels'] = { ...m.labels };
  if (Object.keys(m.annotations).length > 0) metadata['annotations'] = { ...m.annotations };
  if (m.finalizers.length > 0) metadata['finalizers'] = [...m.finalizers];
  const out: Plain = { metadata };
  const plain = specAsPlain(r);
  if (plain) out['spec'] = plain;
  else if (r.spec.protoSpec.length > 0) out['proto_spec'] = Buffer.from(r.spec.protoSpec).toString('base64');
  if (r.spec.yamlSpec !== undefined && !OMNI_SPEC_SCHEMAS.has(m.type)) out['yaml_spec'] = r.spec.yamlSpec;
  return out;
}
