// The JSON form of protobuf messages as Omni's gateway speaks it (grpc-gateway's protojson): proto
// (snake_case) names out, proto or lowerCamel names in, numeric enums, zero values omitted, proto3
// `optional` fields emitted whenever set, bytes as standard base64, unknown fields rejected when
// decoding strictly (the server side) and ignored otherwise (the client side, so a newer Omni that
// adds a field does not break us). The messages themselves are tables in wire.ts.
//
// Decoded messages are plain objects keyed by proto names; absent scalars decode to their zero value,
// absent sub-messages and absent `optional` fields to `undefined`.

import type { FieldSchema, Kind, MessageSchema } from './wire.js';
import { DECODED_SHAPES, WireError } from './wire.js';

// ---------------------------------------------------------------------------------------------
// Encoding (object with proto names -> JSON value)

function isZero(kind: Kind, v: unknown): boolean {
  switch (kind.k) {
    case 'string':
      return v === '';
    case 'bool':
      return v === false;
    case 'int32':
    case 'enum':
      return v === 0;
    case 'bytes':
      return v instanceof Uint8Array && v.length === 0;
    case 'map':
      return typeof v === 'object' && v !== null && Object.keys(v).length === 0;
    default:
      return false;
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
    case 'string':
    case 'timestamp':
      if (typeof v !== 'string') throw new WireError(`${at(path, field, index)}: expected a string`);
      return v;
    case 'bool':
      if (typeof v !== 'boolean') throw new WireError(`${at(path, field, index)}: expected a boolean`);
      return v;
    case 'int32':
    case 'enum':
      if (typeof v !== 'number' || !Number.isInteger(v))
        throw new WireError(`${at(path, field, index)}: expected an integer`);
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

export function encodeMessage(
  schema: MessageSchema,
  obj: Record<string, unknown>,
  path = schema.name,
): Record<string, unknown> {
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
  /** The message's fixed shape (wire.ts DECODED_SHAPES), when it has one that matches its fields. */
  shape?: FixedShape | undefined;
}

/**
 * How decodeFixed reads a message: its fields' positions by JSON key, their values before any is read
 * (undefined where the zero value is a fresh list, map or bytes: made only when the JSON left it out).
 */
interface FixedShape {
  build: (v: unknown[]) => Record<string, unknown>;
  at: Map<string, number>;
  zeros: unknown[];
  containers: number[];
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
    const reserved = new Set([...(schema.reserved ?? []), ...(schema.reserved ?? []).map(camel)]);
    idx = { byKey, reserved, shape: fixedShape(schema, byKey) };
    fieldIndexes.set(schema, idx);
  }
  return idx;
}

/** The schema's fixed shape, if DECODED_SHAPES has one that builds exactly its fields in its order (31 at most). */
function fixedShape(schema: MessageSchema, byKey: Map<string, FieldSchema>): FixedShape | undefined {
  const build = DECODED_SHAPES.get(schema);
  const fields = schema.fields;
  const zeros = fields.map((f) => zeroOf(f));
  if (!build || fields.length > 31 || Object.keys(build(zeros)).join() !== fields.map((f) => f.name).join()) return;
  const at = new Map([...byKey].map(([key, f]) => [key, fields.indexOf(f)]));
  const containers = fields.flatMap((_, i) => (typeof zeros[i] === 'object' ? [i] : []));
  for (const i of containers) zeros[i] = undefined;
  return { build, at, zeros, containers };
}

const BASE64_RE = /^[A-Za-z0-9+/_-]*={0,2}$/;
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** The two-digit number at `i` of a string the RFC3339 pattern matched. */
function two(v: string, i: number): number {
  return (v.charCodeAt(i) - 48) * 10 + v.charCodeAt(i + 1) - 48;
}

/**
 * Whether a time the RFC3339 pattern matched is one that Date.parse surely reads: month 1-12, day
 * 1-28, hour 0-23, minutes and seconds 0-59, an offset under 24 h. Two of every resource's fields
 * are times, and Date.parse costs most of their check: it is left for what is not plainly valid
 * (days 29-31, 24:00, what it refuses), so what is accepted stays exactly what it accepts.
 */
function plainTime(v: string): boolean {
  const month = two(v, 5);
  const day = two(v, 8);
  if (month < 1 || month > 12 || day < 1 || day > 28) return false;
  if (two(v, 11) > 23 || two(v, 14) > 59 || two(v, 17) > 59) return false;
  // `Z`, or `+hh:mm` / `-hh:mm` as the pattern's last six characters.
  const n = v.length;
  return v.charCodeAt(n - 1) === 0x5a || (two(v, n - 5) <= 23 && two(v, n - 2) <= 59);
}

function zeroOf(f: FieldSchema): unknown {
  if (f.repeated) return [];
  if (f.optional) return undefined;
  switch (f.kind.k) {
    case 'string':
      return '';
    case 'bool':
      return false;
    case 'int32':
    case 'enum':
      return 0;
    case 'bytes':
      return new Uint8Array(0);
    case 'map':
      return {};
    case 'timestamp':
    case 'message':
      return undefined;
  }
}

function decodeScalar(
  kind: Kind,
  v: unknown,
  opts: DecodeOptions,
  path: string,
  field: string,
  index?: number,
): unknown {
  switch (kind.k) {
    case 'string':
      if (typeof v !== 'string') throw new WireError(`${at(path, field, index)}: invalid value for string field`);
      return v;
    case 'timestamp':
      if (typeof v !== 'string' || !RFC3339_RE.test(v) || !(plainTime(v) || !Number.isNaN(Date.parse(v)))) {
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
      if (typeof v !== 'string' || !BASE64_RE.test(v))
        throw new WireError(`${at(path, field, index)}: invalid value for bytes field`);
      // Node's base64 decoder reads the URL-safe alphabet too, so no rewrite of the string is needed.
      // Copied out of Node's shared Buffer pool: a view would keep a whole pool slab alive.
      return new Uint8Array(Buffer.from(v, 'base64'));
    }
    case 'map': {
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw new WireError(`${at(path, field, index)}: invalid value for map field`);
      const m = v as Record<string, unknown>;
      const out: Record<string, string> = {};
      for (const k in m) {
        if (!Object.hasOwn(m, k)) continue;
        const x = m[k];
        if (typeof x !== 'string')
          throw new WireError(`${at(path, field, index)}.${k}: invalid value for string field`);
        out[k] = x;
      }
      return out;
    }
    case 'message':
      return decodeMessage(kind.schema(), v, opts, at(path, field, index));
  }
}

export function decodeMessage(
  schema: MessageSchema,
  json: unknown,
  opts: DecodeOptions,
  path = schema.name,
): Record<string, unknown> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new WireError(`${path}: expected a JSON object`);
  }
  const idx = fieldIndex(schema);
  if (idx.shape) return decodeFixed(schema, idx, idx.shape, json as Record<string, unknown>, opts, path);
  const out: Record<string, unknown> = {};
  for (const f of schema.fields) out[f.name] = zeroOf(f);
  // JSON.parse already keeps one value per key: a field can only come twice as its proto and its
  // camel name, which only the strict (server) side refuses.
  const seen = opts.strict ? new Set<string>() : undefined;
  const obj = json as Record<string, unknown>;
  const keys = Object.keys(obj);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
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
    out[f.name] = decodeField(f, obj[key], opts, path);
  }
  return out;
}

/**
 * A message with a fixed shape (Metadata, Resource, Spec, Event, WatchResponse): the same checks as
 * decodeMessage's loop in the same order (keys in the JSON's order, so the first bad one is the one
 * reported), its values gathered by position and built into one object literal: the loop's template
 * copy and stores by computed name cost most of a resource's decoding.
 */
function decodeFixed(
  schema: MessageSchema,
  idx: FieldIndex,
  shape: FixedShape,
  obj: Record<string, unknown>,
  opts: DecodeOptions,
  path: string,
): Record<string, unknown> {
  const fields = schema.fields;
  const v = shape.zeros.slice();
  let seen = 0;
  const keys = Object.keys(obj);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const n = shape.at.get(key);
    if (n === undefined) {
      if (opts.strict && !idx.reserved.has(key)) throw new WireError(`unknown field "${key}" in ${schema.name}`);
      continue;
    }
    if (opts.strict) {
      if (seen & (1 << n)) throw new WireError(`duplicate field "${key}" in ${schema.name}`);
      seen |= 1 << n;
    }
    v[n] = decodeField(fields[n]!, obj[key], opts, path);
  }
  for (const n of shape.containers) if (v[n] === undefined) v[n] = zeroOf(fields[n]!);
  return shape.build(v);
}

/** One field's JSON value decoded: null is the zero value, a repeated field a list of its kind. */
function decodeField(f: FieldSchema, v: unknown, opts: DecodeOptions, path: string): unknown {
  if (v === null) return zeroOf(f);
  if (!f.repeated) return decodeScalar(f.kind, v, opts, path, f.name);
  if (!Array.isArray(v)) throw new WireError(`${at(path, f.name)}: invalid value for repeated field`);
  const list = new Array<unknown>(v.length);
  for (let j = 0; j < v.length; j++) list[j] = decodeScalar(f.kind, v[j], opts, path, f.name, j);
  return list;
}
