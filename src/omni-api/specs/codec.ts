// Binary codec of spec messages over @bufbuild/protobuf's wire primitives, driven by the tables of
// schema.ts. proto3 rules: zero values are not written; known fields are written in field-number
// order and unknown fields after them, verbatim, which is what Go's proto.Marshal does, so that
// decode -> encode of bytes written by Omni gives the same bytes. Omni compares specs including
// unknown fields when a provider updates a read-only resource (docs/omni-wire.md 4.4).

import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import type { FieldSchema, MessageSchema, SpecValue, UnknownField } from './schema.js';

type AnySchema = MessageSchema<unknown>;
import { attachUnknownFields, SpecError, unknownFieldsOf } from './schema.js';
import { formatTimestamp, parseTimestamp } from './timestamp.js';

export interface DecodedSpec<T> {
  value: T;
  /** Unknown fields of the top-level message (nested ones travel with their nested values). */
  unknown: UnknownField[];
}

const INT32_MIN = -0x8000_0000;
const INT32_MAX = 0x7fff_ffff;
const UINT32_MAX = 0xffff_ffff;
const UINT64_MAX = (1n << 64n) - 1n;

function isVarintKind(f: FieldSchema): boolean {
  return f.kind === 'bool' || f.kind === 'int32' || f.kind === 'uint32' || f.kind === 'uint64' || f.kind === 'enum';
}

/** The zero value of a field, as decodeSpec returns it when the field is absent. */
export function zeroOf(f: FieldSchema): unknown {
  if (f.repeated) return [];
  switch (f.kind) {
    case 'string':
      return '';
    case 'bool':
      return false;
    case 'int32':
    case 'uint32':
    case 'enum':
      return 0;
    case 'uint64':
      return 0n;
    case 'bytes':
      return new Uint8Array(0);
    case 'map':
      return {};
    case 'timestamp':
    case 'message':
      return undefined;
  }
}

export function emptySpec<T>(schema: MessageSchema<T>): T {
  const v: SpecValue = {};
  for (const f of schema.fields) v[f.name] = zeroOf(f);
  return attachUnknownFields(v, []) as T;
}

// ---------------------------------------------------------------------------------------------
// Decoding

export function decodeSpec<T>(schema: MessageSchema<T>, bytes: Uint8Array): DecodedSpec<T> {
  try {
    const value = decodeMessage(schema, bytes);
    return { value: value as T, unknown: unknownFieldsOf(value) };
  } catch (e) {
    if (e instanceof SpecError) throw e;
    throw new SpecError('STUB_SPEC_DECODE', `cannot decode ${schema.name}: ${(e as Error).message}`, { cause: e });
  }
}

const byNumberCache = new WeakMap<AnySchema, Map<number, FieldSchema>>();
function fieldsByNumber(schema: AnySchema): Map<number, FieldSchema> {
  let m = byNumberCache.get(schema);
  if (!m) {
    m = new Map(schema.fields.map((f) => [f.no, f]));
    byNumberCache.set(schema, m);
  }
  return m;
}

function decodeMessage(schema: AnySchema, bytes: Uint8Array): SpecValue {
  const value = emptySpec(schema) as SpecValue;
  const unknown: UnknownField[] = [];
  const fields = fieldsByNumber(schema);
  const reader = new BinaryReader(bytes);
  // A singular message field given more than once is the merge of all of them (protobuf's rule, and
  // what Go does), which is the message read from their concatenation; read once all are seen.
  let parts: Map<FieldSchema, Uint8Array[]> | undefined;
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [no, wireType] = reader.tag();
    const f = fields.get(no);
    const packed = f !== undefined && f.repeated === true && isVarintKind(f) && wireType === WireType.LengthDelimited;
    const expected = f === undefined ? undefined : isVarintKind(f) ? WireType.Varint : WireType.LengthDelimited;
    if (f === undefined || (wireType !== expected && !packed)) {
      // A field we do not know, or one whose wire type does not match: Go keeps both as unknown.
      reader.skip(wireType, no);
      unknown.push({ no, wireType, data: bytes.slice(start, reader.pos) });
      continue;
    }
    if (packed) {
      const end = reader.uint32() + reader.pos;
      const list = value[f.name] as unknown[];
      while (reader.pos < end) list.push(readScalar(reader, f));
      continue;
    }
    if (!f.repeated && (f.kind === 'message' || f.kind === 'timestamp')) {
      parts ??= new Map();
      const seen = parts.get(f);
      if (seen) seen.push(reader.bytes());
      else parts.set(f, [reader.bytes()]);
      continue;
    }
    const v = readScalar(reader, f);
    if (f.repeated) (value[f.name] as unknown[]).push(v);
    else if (f.kind === 'map') {
      const [k, mv] = v as [string, string];
      (value[f.name] as Record<string, string>)[k] = mv;
    } else value[f.name] = v;
  }
  for (const [f, p] of parts ?? []) {
    const all = p.length === 1 ? p[0]! : concatBytes(p);
    value[f.name] = f.kind === 'timestamp' ? readTimestamp(all) : decodeMessage(f.message!(), all);
  }
  return attachUnknownFields(value, unknown);
}

function concatBytes(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function readScalar(reader: BinaryReader, f: FieldSchema): unknown {
  switch (f.kind) {
    case 'string':
      return reader.string(true);
    case 'bool':
      return reader.bool();
    case 'int32':
    case 'enum':
      return reader.int32();
    case 'uint32':
      return reader.uint32();
    case 'uint64':
      return BigInt(reader.uint64());
    case 'bytes':
      return reader.bytes().slice();
    case 'message':
      return decodeMessage(f.message!(), reader.bytes());
    case 'timestamp':
      return readTimestamp(reader.bytes());
    case 'map':
      return readMapEntry(reader.bytes());
  }
}

function readTimestamp(bytes: Uint8Array): string {
  const r = new BinaryReader(bytes);
  let seconds = 0n;
  let nanos = 0;
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.Varint) seconds = BigInt(r.int64());
    else if (no === 2 && wt === WireType.Varint) nanos = r.int32();
    else r.skip(wt, no);
  }
  return formatTimestamp({ seconds, nanos });
}

function readMapEntry(bytes: Uint8Array): [string, string] {
  const r = new BinaryReader(bytes);
  let k = '';
  let v = '';
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) k = r.string(true);
    else if (no === 2 && wt === WireType.LengthDelimited) v = r.string(true);
    else r.skip(wt, no);
  }
  return [k, v];
}

// ---------------------------------------------------------------------------------------------
// Encoding

/**
 * Encodes `value` (keyed by proto names; absent keys are zero). Unknown fields come from `unknown`
 * when given, else from the ones decodeSpec attached to the value (and to each nested value).
 */
export function encodeSpec<T>(schema: MessageSchema<T>, value: T, unknown?: readonly UnknownField[]): Uint8Array {
  const w = new BinaryWriter();
  writeMessage(w, schema, value as SpecValue, schema.name, unknown);
  return w.finish();
}

/** Decode, apply `change` to a shallow copy, encode: unknown fields are kept whatever `change` does. */
export function updateSpec<T>(
  schema: MessageSchema<T>,
  bytes: Uint8Array,
  change: Partial<T> | ((v: T) => T),
): Uint8Array {
  const { value, unknown } = decodeSpec(schema, bytes);
  const next = typeof change === 'function' ? change(value) : { ...value, ...change };
  return encodeSpec(schema, next, unknown);
}

function writeMessage(
  w: BinaryWriter,
  schema: AnySchema,
  value: SpecValue,
  path: string,
  unknown?: readonly UnknownField[],
): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SpecError('STUB_SPEC_INVALID', `${path}: expected an object for ${schema.name}`);
  }
  for (const f of schema.fields) {
    const v = value[f.name];
    if (v === undefined || v === null) continue;
    const p = `${path}.${f.name}`;
    if (f.repeated) {
      if (!Array.isArray(v)) throw new SpecError('STUB_SPEC_INVALID', `${p}: expected a list`);
      if (v.length === 0) continue;
      if (isVarintKind(f)) {
        // proto3 packs repeated scalars.
        w.tag(f.no, WireType.LengthDelimited).fork();
        v.forEach((x, i) => writeVarint(w, f, x, `${p}[${i}]`));
        w.join();
      } else {
        v.forEach((x, i) => writeField(w, f, x, `${p}[${i}]`, true));
      }
      continue;
    }
    writeField(w, f, v, p, false);
  }
  for (const u of unknown ?? unknownFieldsOf(value)) w.raw(u.data);
}

function invalid(path: string, what: string, v: unknown): SpecError {
  const shown = typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? JSON.stringify(v) : String(v);
  return new SpecError('STUB_SPEC_INVALID', `${path}: expected ${what}, got ${shown}`);
}

function writeVarint(w: BinaryWriter, f: FieldSchema, v: unknown, path: string): void {
  switch (f.kind) {
    case 'bool':
      if (typeof v !== 'boolean') throw invalid(path, 'a boolean', v);
      w.bool(v);
      return;
    case 'int32':
    case 'enum':
      if (typeof v !== 'number' || !Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX)
        throw invalid(path, 'an int32', v);
      w.int32(v);
      return;
    case 'uint32':
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > UINT32_MAX) throw invalid(path, 'a uint32', v);
      w.uint32(v);
      return;
    case 'uint64':
      if (typeof v !== 'bigint' || v < 0n || v > UINT64_MAX) throw invalid(path, 'a uint64 bigint', v);
      w.uint64(v);
      return;
    default:
      throw new Error(`not a varint kind: ${f.kind}`);
  }
}

/** `always`: write even a zero value (elements of repeated fields). */
function writeField(w: BinaryWriter, f: FieldSchema, v: unknown, path: string, always: boolean): void {
  switch (f.kind) {
    case 'string':
      if (typeof v !== 'string') throw invalid(path, 'a string', v);
      if (always || v !== '') w.tag(f.no, WireType.LengthDelimited).string(v);
      return;
    case 'bytes':
      if (!(v instanceof Uint8Array)) throw invalid(path, 'bytes', v);
      if (always || v.length > 0) w.tag(f.no, WireType.LengthDelimited).bytes(v);
      return;
    case 'bool':
    case 'int32':
    case 'enum':
    case 'uint32':
    case 'uint64':
      if (always || (v !== false && v !== 0 && v !== 0n)) {
        w.tag(f.no, WireType.Varint);
        writeVarint(w, f, v, path);
      } else writeVarint(new BinaryWriter(), f, v, path); // still type-check zeros
      return;
    case 'timestamp': {
      if (typeof v !== 'string') throw invalid(path, 'an RFC 3339 timestamp string', v);
      const t = parseTimestamp(v);
      w.tag(f.no, WireType.LengthDelimited).fork();
      if (t.seconds !== 0n) w.tag(1, WireType.Varint).int64(t.seconds);
      if (t.nanos !== 0) w.tag(2, WireType.Varint).int32(t.nanos);
      w.join();
      return;
    }
    case 'message':
      w.tag(f.no, WireType.LengthDelimited).fork();
      writeMessage(w, f.message!(), v as SpecValue, path);
      w.join();
      return;
    case 'map': {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid(path, 'a map of strings', v);
      // Sorted keys: Go's deterministic marshalling order, so equal maps give equal bytes.
      for (const k of Object.keys(v).sort()) {
        const mv = (v as Record<string, unknown>)[k];
        if (typeof mv !== 'string') throw invalid(`${path}.${k}`, 'a string', mv);
        w.tag(f.no, WireType.LengthDelimited)
          .fork()
          .tag(1, WireType.LengthDelimited)
          .string(k)
          .tag(2, WireType.LengthDelimited)
          .string(mv)
          .join();
      }
      return;
    }
  }
}
