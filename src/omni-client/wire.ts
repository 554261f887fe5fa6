// JSON form of the cosi.resource.State messages as Omni's gateway speaks it (omni-wire.md 1.3, 2):
// proto (snake_case) names out, proto or lowerCamel names in, numeric enums, zero values omitted,
// proto3 `optional` fields emitted whenever set, bytes as standard base64, unknown fields rejected
// when decoding strictly (the server side) and ignored otherwise (the client side, so a newer Omni
// that adds a field does not break us).
//
// Decoded messages are plain objects keyed by proto names; absent scalars decode to their zero value,
// absent sub-messages and absent `optional` fields to `undefined`.

import type { ProtocolCode } from './errors.js';
import type { Metadata, Resource } from './resource.js';
import { isValidPhase, isValidVersion } from './resource.js';

type Kind =
  | { k: 'string' }
  | { k: 'bool' }
  | { k: 'int32' }
  | { k: 'bytes' }
  | { k: 'timestamp' }
  | { k: 'enum'; values: Record<string, number> }
  | { k: 'map' }
  | { k: 'message'; schema: () => MessageSchema };

interface FieldSchema {
  name: string;
  kind: Kind;
  repeated?: boolean;
  optional?: boolean;
}

export interface MessageSchema {
  name: string;
  fields: FieldSchema[];
  /** Names protojson skips silently (reserved fields). */
  reserved?: string[];
}

const S: Kind = { k: 'string' };
const B: Kind = { k: 'bool' };
const I32: Kind = { k: 'int32' };
const BYTES: Kind = { k: 'bytes' };
const TS: Kind = { k: 'timestamp' };
const MAP: Kind = { k: 'map' };
const msg = (schema: () => MessageSchema): Kind => ({ k: 'message', schema });

export const LabelTermOperation = {
  EXISTS: 0,
  EQUAL: 1,
  NOT_EXISTS: 2,
  IN: 3,
  LT: 4,
  LTE: 5,
  LT_NUMERIC: 6,
  LTE_NUMERIC: 7,
} as const;

export const EventType = {
  CREATED: 0,
  UPDATED: 1,
  DESTROYED: 2,
  BOOTSTRAPPED: 3,
  ERRORED: 4,
  NOOP: 5,
} as const;

function def(name: string, fields: FieldSchema[], reserved?: string[]): MessageSchema {
  return { name, fields, ...(reserved ? { reserved } : {}) };
}

export const MetadataSchema = def('Metadata', [
  { name: 'namespace', kind: S },
  { name: 'type', kind: S },
  { name: 'id', kind: S },
  { name: 'version', kind: S },
  { name: 'owner', kind: S },
  { name: 'phase', kind: S },
  { name: 'created', kind: TS },
  { name: 'updated', kind: TS },
  { name: 'finalizers', kind: S, repeated: true },
  { name: 'labels', kind: MAP },
  { name: 'annotations', kind: MAP },
]);
export const SpecSchema = def('Spec', [
  { name: 'proto_spec', kind: BYTES },
  { name: 'yaml_spec', kind: S },
]);
export const ResourceSchema = def('Resource', [
  { name: 'metadata', kind: msg(() => MetadataSchema) },
  { name: 'spec', kind: msg(() => SpecSchema) },
]);
export const LabelTermSchema = def('LabelTerm', [
  { name: 'key', kind: S },
  { name: 'op', kind: { k: 'enum', values: LabelTermOperation } },
  { name: 'value', kind: S, repeated: true },
  { name: 'invert', kind: B },
]);
export const LabelQuerySchema = def('LabelQuery', [
  { name: 'terms', kind: msg(() => LabelTermSchema), repeated: true },
]);
export const IDQuerySchema = def('IDQuery', [{ name: 'regexp', kind: S }]);

const ownerOptions = (name: string) => def(name, [{ name: 'owner', kind: S }]);
const pointerRequest = (name: string, options: MessageSchema) =>
  def(name, [
    { name: 'namespace', kind: S },
    { name: 'type', kind: S },
    { name: 'id', kind: S },
    { name: 'options', kind: msg(() => options) },
  ]);
const resourceResponse = (name: string) => def(name, [{ name: 'resource', kind: msg(() => ResourceSchema) }]);

export const GetOptionsSchema = def('GetOptions', []);
export const GetRequestSchema = pointerRequest('GetRequest', GetOptionsSchema);
export const GetResponseSchema = resourceResponse('GetResponse');

export const ListOptionsSchema = def('ListOptions', [
  { name: 'label_query', kind: msg(() => LabelQuerySchema), repeated: true },
  { name: 'id_query', kind: msg(() => IDQuerySchema) },
]);
export const ListRequestSchema = def('ListRequest', [
  { name: 'namespace', kind: S },
  { name: 'type', kind: S },
  { name: 'options', kind: msg(() => ListOptionsSchema) },
]);
export const ListResponseSchema = resourceResponse('ListResponse');

export const CreateOptionsSchema = ownerOptions('CreateOptions');
export const CreateRequestSchema = def('CreateRequest', [
  { name: 'resource', kind: msg(() => ResourceSchema) },
  { name: 'options', kind: msg(() => CreateOptionsSchema) },
]);
export const CreateResponseSchema = resourceResponse('CreateResponse');

export const UpdateOptionsSchema = def('UpdateOptions', [
  { name: 'owner', kind: S },
  { name: 'expected_phase', kind: S, optional: true },
]);
export const UpdateRequestSchema = def(
  'UpdateRequest',
  [
    { name: 'new_resource', kind: msg(() => ResourceSchema) },
    { name: 'options', kind: msg(() => UpdateOptionsSchema) },
  ],
  ['current_version'],
);
export const UpdateResponseSchema = resourceResponse('UpdateResponse');

export const DestroyOptionsSchema = ownerOptions('DestroyOptions');
export const DestroyRequestSchema = pointerRequest('DestroyRequest', DestroyOptionsSchema);
export const DestroyResponseSchema = def('DestroyResponse', []);

export const WatchOptionsSchema = def('WatchOptions', [
  { name: 'bootstrap_contents', kind: B },
  { name: 'tail_events', kind: I32 },
  { name: 'label_query', kind: msg(() => LabelQuerySchema), repeated: true },
  { name: 'id_query', kind: msg(() => IDQuerySchema) },
  { name: 'aggregated', kind: B },
  { name: 'start_from_bookmark', kind: BYTES, optional: true },
  { name: 'bootstrap_bookmark', kind: B },
]);
export const WatchRequestSchema = def('WatchRequest', [
  { name: 'namespace', kind: S },
  { name: 'type', kind: S },
  { name: 'id', kind: S, optional: true },
  { name: 'options', kind: msg(() => WatchOptionsSchema) },
  { name: 'api_version', kind: I32 },
]);
export const EventSchema = def('Event', [
  { name: 'resource', kind: msg(() => ResourceSchema) },
  { name: 'event_type', kind: { k: 'enum', values: EventType } },
  { name: 'old', kind: msg(() => ResourceSchema) },
  { name: 'error', kind: S, optional: true },
  { name: 'bookmark', kind: BYTES, optional: true },
]);
export const WatchResponseSchema = def('WatchResponse', [
  { name: 'event', kind: msg(() => EventSchema), repeated: true },
]);

export const TeardownOptionsSchema = ownerOptions('TeardownOptions');
export const TeardownRequestSchema = pointerRequest('TeardownRequest', TeardownOptionsSchema);
export const TeardownResponseSchema = def('TeardownResponse', [{ name: 'destroy_ready', kind: B }]);
export const TeardownAndDestroyOptionsSchema = ownerOptions('TeardownAndDestroyOptions');
export const TeardownAndDestroyRequestSchema = pointerRequest('TeardownAndDestroyRequest', TeardownAndDestroyOptionsSchema);
export const TeardownAndDestroyResponseSchema = def('TeardownAndDestroyResponse', []);

/** The gRPC method's request and response schemas. */
export const Methods = {
  Get: { request: GetRequestSchema, response: GetResponseSchema, stream: false },
  List: { request: ListRequestSchema, response: ListResponseSchema, stream: true },
  Create: { request: CreateRequestSchema, response: CreateResponseSchema, stream: false },
  Update: { request: UpdateRequestSchema, response: UpdateResponseSchema, stream: false },
  Destroy: { request: DestroyRequestSchema, response: DestroyResponseSchema, stream: false },
  Watch: { request: WatchRequestSchema, response: WatchResponseSchema, stream: true },
  Teardown: { request: TeardownRequestSchema, response: TeardownResponseSchema, stream: false },
  TeardownAndDestroy: { request: TeardownAndDestroyRequestSchema, response: TeardownAndDestroyResponseSchema, stream: false },
} as const;
export type MethodName = keyof typeof Methods;
export const STATE_SERVICE = 'cosi.resource.State';
export function fullMethod(m: MethodName): string {
  return `/${STATE_SERVICE}/${m}`;
}

// ---------------------------------------------------------------------------------------------
// Encoding (object with proto names -> JSON value)

/**
 * A message that does not decode. On the client side the transport turns it into a ProtocolError
 * with `code`, naming the call and the endpoint (errors.ts); the sim answers InvalidArgument.
 */
export class WireError extends Error {
  constructor(
    message: string,
    readonly code: ProtocolCode = 'STUB_PROTOCOL',
  ) {
    super(message);
    this.name = 'WireError';
  }
}

function isZero(kind: Kind, v: unknown): boolean {
  switch (kind.k) {
    case 'string': return v === '';
    case 'bool': return v === false;
    case 'int32': case 'enum': return v === 0;
    case 'bytes': return v instanceof Uint8Array && v.length === 0;
    case 'map': return typeof v === 'object' && v !== null && Object.keys(v).length === 0;
    default: return false;
  }
}

/**
 * Where a value sits, for error messages only. Every call encodes and decodes a few dozen fields;
 * the path string is built when an error needs it, not per field (it was most of the codec's
 * allocations at thousands of calls per second).
 */
function at(path: string, field: string, index?: number): string {
  return index === undefined ? `${path}.${field}` : `${path}.${field}[${index}]`;
}

function encodeScalar(kind: Kind, v: unknown, path: string, field: string, index?: number): unknown {
  switch (kind.k) {
    case 'string': case 'timestamp':
      if (typeof v !== 'string') throw new WireError(`${at(path, field, index)}: expected a string`);
      return v;
    case 'bool':
      if (typeof v !== 'boolean') throw new WireError(`${at(path, field, index)}: expected a boolean`);
      return v;
    case 'int32': case 'enum':
      if (typeof v !== 'number' || !Number.isInteger(v)) throw new WireError(`${at(path, field, index)}: expected an integer`);
      return v;
    case 'bytes':
      if (!(v instanceof Uint8Array)) throw new WireError(`${at(path, field, index)}: expected bytes`);
      return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
    case 'map': {
      if (typeof v !== 'object' || v === null) throw new WireError(`${at(path, field, index)}: expected a map`);
      const m = v as Record<string, unknown>;
      const out: Record<string, string> = {};
      for (const k in m) {
        if (!Object.hasOwn(m, k)) continue;
        const x = m[k];
        if (typeof x !== 'string') throw new WireError(`${at(path, field, index)}.${k}: expected a string`);
        out[k] = x;
      }
      return out;
    }
    case 'message':
      return encodeMessage(kind.schema(), v as Record<string, unknown>, at(path, field, index));
  }
}

export function encodeMessage(schema: MessageSchema, obj: Record<string, unknown>, path = schema.name): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of schema.fields) {
    const v = obj[f.name];
    if (v === undefined || v === null) continue;
    if (f.repeated) {
      if (!Array.isArray(v)) throw new WireError(`${at(path, f.name)}: expected a list`);
      if (v.length === 0) continue;
      const list = new Array<unknown>(v.length);
      for (let i = 0; i < v.length; i++) list[i] = encodeScalar(f.kind, v[i], path, f.name, i);
      out[f.name] = list;
      continue;
    }
    if (!f.optional && f.kind.k !== 'message' && isZero(f.kind, v)) continue;
    out[f.name] = encodeScalar(f.kind, v, path, f.name);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Decoding (JSON value -> object with proto names)

export interface DecodeOptions {
  /** Reject unknown fields and the same field given twice (Omni's server behaviour). */
  strict: boolean;
}

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

interface FieldIndex {
  /** Proto name and lowerCamel name -> field. */
  byKey: Map<string, FieldSchema>;
  /** Reserved names in both spellings. */
  reserved: Set<string>;
}

const fieldIndexes = new WeakMap<MessageSchema, FieldIndex>();

/** The JSON keys a message accepts, computed once per schema. */
function fieldIndex(schema: MessageSchema): FieldIndex {
  let idx = fieldIndexes.get(schema);
  if (!idx) {
    const byKey = new Map<string, FieldSchema>();
    // Proto names win over a camel spelling that happens to equal another field's proto name.
    for (const f of schema.fields) if (!byKey.has(camel(f.name))) byKey.set(camel(f.name), f);
    for (const f of schema.fields) byKey.set(f.name, f);
    idx = { byKey, reserved: new Set([...(schema.reserved ?? []), ...(schema.reserved ?? []).map(camel)]) };
    fieldIndexes.set(schema, idx);
  }
  return idx;
}

const BASE64_RE = /^[A-Za-z0-9+/_-]*={0,2}$/;
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function zeroOf(f: FieldSchema): unknown {
  if (f.repeated) return [];
  if (f.optional) return undefined;
  switch (f.kind.k) {
    case 'string': return '';
    case 'bool': return false;
    case 'int32': case 'enum': return 0;
    case 'bytes': return new Uint8Array(0);
    case 'map': return {};
    case 'timestamp': case 'message': return undefined;
  }
}

function decodeScalar(kind: Kind, v: unknown, opts: DecodeOptions, path: string, field: string, index?: number): unknown {
  switch (kind.k) {
    case 'string':
      if (typeof v !== 'string') throw new WireError(`${at(path, field, index)}: invalid value for string field`);
      return v;
    case 'timestamp':
      if (typeof v !== 'string' || !RFC3339_RE.test(v) || Number.isNaN(Date.parse(v))) {
        throw new WireError(`${at(path, field, index)}: invalid google.protobuf.Timestamp value`);
      }
      return v;
    case 'bool':
      if (typeof v !== 'boolean') throw new WireError(`${at(path, field, index)}: invalid value for bool field`);
      return v;
    case 'int32': {
      const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < -(2 ** 31) || n >= 2 ** 31) {
        throw new WireError(`${at(path, field, index)}: invalid value for int32 field`);
      }
      return n;
    }
    case 'enum': {
      if (typeof v === 'number' && Number.isInteger(v)) return v;
      if (typeof v === 'string' && Object.hasOwn(kind.values, v)) return kind.values[v];
      throw new WireError(`${at(path, field, index)}: invalid value for enum field`);
    }
    case 'bytes': {
      if (typeof v !== 'string' || !BASE64_RE.test(v)) throw new WireError(`${at(path, field, index)}: invalid value for bytes field`);
      // Node's base64 decoder reads the URL-safe alphabet too, so no rewrite of the string is needed.
      // Copied out of Node's shared Buffer pool: a view would keep a whole pool slab alive.
      return new Uint8Array(Buffer.from(v, 'base64'));
    }
    case 'map': {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new WireError(`${at(path, field, index)}: invalid value for map field`);
      const m = v as Record<string, unknown>;
      const out: Record<string, string> = {};
      for (const k in m) {
        if (!Object.hasOwn(m, k)) continue;
        const x = m[k];
        if (typeof x !== 'string') throw new WireError(`${at(path, field, index)}.${k}: invalid value for string field`);
        out[k] = x;
      }
      return out;
    }
    case 'message':
      return decodeMessage(kind.schema(), v, opts, at(path, field, index));
  }
}

export function decodeMessage(schema: MessageSchema, json: unknown, opts: DecodeOptions, path = schema.name): Record<string, unknown> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new WireError(`${path}: expected a JSON object`);
  }
  const idx = fieldIndex(schema);
  const out: Record<string, unknown> = {};
  for (const f of schema.fields) out[f.name] = zeroOf(f);
  // JSON.parse already keeps one value per key: a field can only come twice as its proto and its
  // camel name, which only the strict (server) side refuses.
  const seen = opts.strict ? new Set<string>() : undefined;
  const obj = json as Record<string, unknown>;
  for (const key in obj) {
    if (!Object.hasOwn(obj, key)) continue;
    const v = obj[key];
    const f = idx.byKey.get(key);
    if (!f) {
      if (idx.reserved.has(key)) continue;
      if (opts.strict) throw new WireError(`unknown field "${key}" in ${schema.name}`);
      continue;
    }
    if (seen) {
      if (seen.has(f.name)) throw new WireError(`duplicate field "${key}" in ${schema.name}`);
      seen.add(f.name);
    }
    if (v === null) {
      out[f.name] = zeroOf(f);
      continue;
    }
    if (f.repeated) {
      if (!Array.isArray(v)) throw new WireError(`${at(path, f.name)}: invalid value for repeated field`);
      const list = new Array<unknown>(v.length);
      for (let i = 0; i < v.length; i++) list[i] = decodeScalar(f.kind, v[i], opts, path, f.name, i);
      out[f.name] = list;
      continue;
    }
    out[f.name] = decodeScalar(f.kind, v, opts, path, f.name);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Resource model <-> wire objects

export interface WireResource {
  metadata?: Record<string, unknown>;
  spec?: Record<string, unknown>;
}

/** The decoded (proto-named) form of a model Resource, ready for encodeMessage. */
export function resourceToWire(r: Resource): Record<string, unknown> {
  const m = r.metadata;
  return {
    metadata: {
      namespace: m.namespace,
      type: m.type,
      id: m.id,
      version: m.version,
      owner: m.owner,
      phase: m.phase,
      created: m.created,
      updated: m.updated,
      finalizers: m.finalizers,
      labels: m.labels,
      annotations: m.annotations,
    },
    spec: { proto_spec: r.spec.protoSpec, yaml_spec: r.spec.yamlSpec ?? '' },
  };
}

/**
 * A decoded (proto-named) Resource as the model. With `validate`, applies Omni's metadata rules
 * (omni-wire.md 3.1): metadata and spec present, version `undefined` or decimal, phase known.
 */
export function resourceFromWire(w: unknown, validate = false): Resource {
  const r = (w ?? {}) as { metadata?: Record<string, unknown>; spec?: Record<string, unknown> };
  if (validate) {
    if (!r.metadata) throw new WireError('metadata is missing');
    if (!r.spec) throw new WireError('spec is missing');
  }
  const md = r.metadata ?? {};
  const version = String(md['version'] ?? '');
  const phase = String(md['phase'] ?? '');
  if (validate) {
    if (!isValidVersion(version)) throw new WireError(`failed to parse version "${version}"`);
    if (!isValidPhase(phase)) throw new WireError(`unknown phase "${phase}"`);
  }
  const metadata: Metadata = {
    namespace: String(md['namespace'] ?? ''),
    type: String(md['type'] ?? ''),
    id: String(md['id'] ?? ''),
    version: version === '' ? 'undefined' : version,
    owner: String(md['owner'] ?? ''),
    phase: isValidPhase(phase) ? phase : 'running',
    finalizers: [...((md['finalizers'] as string[] | undefined) ?? [])],
    labels: { ...((md['labels'] as Record<string, string> | undefined) ?? {}) },
    annotations: { ...((md['annotations'] as Record<string, string> | undefined) ?? {}) },
  };
  if (typeof md['created'] === 'string') metadata.created = md['created'];
  if (typeof md['updated'] === 'string') metadata.updated = md['updated'];
  const spec = r.spec ?? {};
  const yaml = spec['yaml_spec'];
  return {
    metadata,
    spec: {
      protoSpec: (spec['proto_spec'] as Uint8Array | undefined) ?? new Uint8Array(0),
      ...(typeof yaml === 'string' && yaml !== '' ? { yamlSpec: yaml } : {}),
    },
  };
}

/** google.rpc.Status as the gateway prints it: `{"code":..,"message":..,"details":[..]}`. */
export interface RpcStatus {
  code: number;
  message: string;
  details?: unknown[];
}

export function parseRpcStatus(json: unknown): RpcStatus | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const o = json as Record<string, unknown>;
  const code = typeof o['code'] === 'number' ? o['code'] : undefined;
  const message = typeof o['message'] === 'string' ? o['message'] : undefined;
  if (code === undefined && message === undefined) return undefined;
  return { code: code ?? 2, message: message ?? '', ...(Array.isArray(o['details']) ? { details: o['details'] } : {}) };
}

/** Current time as Omni prints a Timestamp (RFC 3339, UTC, `Z`). */
export function timestampNow(nowMs: number = Date.now()): string {
  return new Date(nowMs).toISOString();
}
