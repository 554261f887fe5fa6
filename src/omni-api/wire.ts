// The cosi.resource.State messages as tables (proto names, kinds, repeated and optional fields), the
// methods of the service, and the resource model's wire form; WireError, a message that does not
// decode. Their JSON codec (protojson, as Omni's gateway speaks it) is protojson.ts.

import type { Metadata, Resource } from './resource.js';
import { isValidPhase, isValidVersion } from './resource.js';
import type { ProtocolCode } from './errors.js';

/**
 * A message that does not decode. On the client side the transport turns it into a ProtocolError
 * with `code`, naming the call and the endpoint (src/omni-client/errors.ts); the sim answers InvalidArgument.
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

export type Kind =
  | { k: 'string' }
  | { k: 'bool' }
  | { k: 'int32' }
  | { k: 'bytes' }
  | { k: 'timestamp' }
  | { k: 'enum'; values: Record<string, number> }
  | { k: 'map' }
  | { k: 'message'; schema: () => MessageSchema };

export interface FieldSchema {
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
const EVENT_FIELDS: FieldSchema[] = [
  { name: 'resource', kind: msg(() => ResourceSchema) },
  { name: 'event_type', kind: { k: 'enum', values: EventType } },
  { name: 'old', kind: msg(() => ResourceSchema) },
  { name: 'error', kind: S, optional: true },
  { name: 'bookmark', kind: BYTES, optional: true },
];
export const EventSchema = def('Event', EVENT_FIELDS);
export const WatchResponseSchema = def('WatchResponse', [
  { name: 'event', kind: msg(() => EventSchema), repeated: true },
]);
/**
 * The same message as read by a consumer that never looks at an UPDATED event's previous state
 * (WatchKindOptions.previous false): `old` is left unread, neither decoded nor checked.
 */
export const EventWithoutOldSchema = def(
  'Event',
  EVENT_FIELDS.filter((f) => f.name !== 'old'),
  ['old'],
);
export const WatchResponseWithoutOldSchema = def('WatchResponse', [
  { name: 'event', kind: msg(() => EventWithoutOldSchema), repeated: true },
]);

export const TeardownOptionsSchema = ownerOptions('TeardownOptions');
export const TeardownRequestSchema = pointerRequest('TeardownRequest', TeardownOptionsSchema);
export const TeardownResponseSchema = def('TeardownResponse', [{ name: 'destroy_ready', kind: B }]);
export const TeardownAndDestroyOptionsSchema = ownerOptions('TeardownAndDestroyOptions');
export const TeardownAndDestroyRequestSchema = pointerRequest(
  'TeardownAndDestroyRequest',
  TeardownAndDestroyOptionsSchema,
);
export const TeardownAndDestroyResponseSchema = def('TeardownAndDestroyResponse', []);

/**
 * The decoded form of the messages every answer, List item and watch event carries, as one object
 * literal each (protojson.ts fills it from its fields' values, in schema order): objects of one
 * fixed shape, which the code reading them is fast on. Used only while it has the schema's fields.
 */
export const DECODED_SHAPES = new Map<MessageSchema, (v: unknown[]) => Record<string, unknown>>([
  [
    MetadataSchema,
    (v) => ({
      namespace: v[0],
      type: v[1],
      id: v[2],
      version: v[3],
      owner: v[4],
      phase: v[5],
      created: v[6],
      updated: v[7],
      finalizers: v[8],
      labels: v[9],
      annotations: v[10],
    }),
  ],
  [SpecSchema, (v) => ({ proto_spec: v[0], yaml_spec: v[1] })],
  [ResourceSchema, (v) => ({ metadata: v[0], spec: v[1] })],
  [EventSchema, (v) => ({ resource: v[0], event_type: v[1], old: v[2], error: v[3], bookmark: v[4] })],
  [WatchResponseSchema, (v) => ({ event: v[0] })],
  [EventWithoutOldSchema, (v) => ({ resource: v[0], event_type: v[1], error: v[2], bookmark: v[3] })],
  [WatchResponseWithoutOldSchema, (v) => ({ event: v[0] })],
]);

/** The gRPC method's request and response schemas. */
export const Methods = {
  Get: { request: GetRequestSchema, response: GetResponseSchema, stream: false },
  List: { request: ListRequestSchema, response: ListResponseSchema, stream: true },
  Create: { request: CreateRequestSchema, response: CreateResponseSchema, stream: false },
  Update: { request: UpdateRequestSchema, response: UpdateResponseSchema, stream: false },
  Destroy: { request: DestroyRequestSchema, response: DestroyResponseSchema, stream: false },
  Watch: { request: WatchRequestSchema, response: WatchResponseSchema, stream: true },
  Teardown: { request: TeardownRequestSchema, response: TeardownResponseSchema, stream: false },
  TeardownAndDestroy: {
    request: TeardownAndDestroyRequestSchema,
    response: TeardownAndDestroyResponseSchema,
    stream: false,
  },
} as const;
export type MethodName = keyof typeof Methods;
export const STATE_SERVICE = 'cosi.resource.State';
export function fullMethod(m: MethodName): string {
  return `/${STATE_SERVICE}/${m}`;
}

// ---------------------------------------------------------------------------------------------
// Resource model <-> wire objects

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
 * (docs/design.md, "What an answer must be"): metadata and spec present, version `undefined` or
 * decimal, phase known.
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
  const created = md['created'];
  const updated = md['updated'];
  const namespace = String(md['namespace'] ?? '');
  const type = String(md['type'] ?? '');
  const id = String(md['id'] ?? '');
  const v = version === '' ? 'undefined' : version;
  const owner = String(md['owner'] ?? '');
  const ph = isValidPhase(phase) ? phase : 'running';
  const finalizers = [...((md['finalizers'] as string[] | undefined) ?? [])];
  const labels = { ...((md['labels'] as Record<string, string> | undefined) ?? {}) };
  const annotations = { ...((md['annotations'] as Record<string, string> | undefined) ?? {}) };
  // Both times in the literal when both came (as Omni sends them): every field then lives inside the
  // object, where adding them afterwards gives each of the tens of thousands of resources a cache
  // holds a second block for them (docs/performance.md, "Memory at 10 000 machines (target <= 200 MB)").
  const metadata: Metadata =
    typeof created === 'string' && typeof updated === 'string'
      ? { namespace, type, id, version: v, owner, phase: ph, finalizers, labels, annotations, created, updated }
      : { namespace, type, id, version: v, owner, phase: ph, finalizers, labels, annotations };
  if (metadata.created === undefined && typeof created === 'string') metadata.created = created;
  if (metadata.updated === undefined && typeof updated === 'string') metadata.updated = updated;
  const spec = r.spec ?? {};
  const yaml = spec['yaml_spec'];
  const protoSpec = (spec['proto_spec'] as Uint8Array | undefined) ?? new Uint8Array(0);
  // One literal per case, not a spread of a temporary object: this runs for every resource read.
  return { metadata, spec: typeof yaml === 'string' && yaml !== '' ? { protoSpec, yamlSpec: yaml } : { protoSpec } };
}
