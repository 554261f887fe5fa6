// Plain-object form of spec values, for YAML: scenario files and dumps of the simulated Omni, and
// `omnictl get -o yaml` output replayed into it (docs/omni-wire.md 6). Two spellings of keys are
// read: proto names (`acceptance_status`) and omnictl's (`acceptancestatus`, the Go field name in
// lower case). A key the message does not have is an error naming it: a typo in a scenario must not
// silently become a zero value.

import type { FieldSchema, MessageSchema, SpecValue } from '../../omni-api/specs/schema.js';
import { omnictlKey, SpecError } from '../../omni-api/specs/schema.js';
import { emptySpec } from '../../omni-api/specs/codec.js';
import { formatTimestamp, parseTimestamp } from '../../omni-api/specs/timestamp.js';

type AnySchema = MessageSchema<unknown>;

/**
 * `proto`: proto names, zero values left out, uint64 as a decimal string, bytes as standard base64,
 * timestamps as RFC 3339 (protojson conventions).
 * `protojson`: as `proto`, with enums by name (by number when the name is not known), which is
 * protobuf's JSON mapping with proto names (Go's protojson with UseProtoNames); the golden tests
 * compare with it.
 * `omnictl`: omnictl's keys, every field present (absent messages as null), uint64 as a number
 * (bigint above 2^53), timestamps as `{seconds, nanos}`: Omni renders specs with a Go YAML encoder
 * over the generated struct, which has no special case for Timestamp.
 */
export type PlainStyle = 'proto' | 'protojson' | 'omnictl';

const keyCache = new WeakMap<AnySchema, Map<string, FieldSchema>>();
function fieldsByKey(schema: AnySchema): Map<string, FieldSchema> {
  let m = keyCache.get(schema);
  if (!m) {
    m = new Map();
    for (const f of schema.fields) {
      m.set(f.name, f);
      m.set(omnictlKey(f.name), f);
    }
    keyCache.set(schema, m);
  }
  return m;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'bigint') return `${v}`;
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'object') return 'an object';
  return String(v);
}

function bad(path: string, what: string, v: unknown): SpecError {
  return new SpecError('STUB_SPEC_INVALID', `${path}: expected ${what}, got ${describe(v)}`);
}

/** Builds a spec value from a plain object; `null`/absent keys give zero values. */
export function specFromPlain<T>(schema: MessageSchema<T>, obj: unknown, path: string = schema.name): T {
  return messageFromPlain(schema, obj, path) as T;
}

function messageFromPlain(schema: AnySchema, obj: unknown, path: string): SpecValue {
  const out = emptySpec(schema) as SpecValue;
  if (obj === null || obj === undefined) return out;
  if (!isPlainObject(obj)) throw bad(path, `a map for ${schema.name}`, obj);
  const keys = fieldsByKey(schema);
  const seen = new Map<string, string>();
  for (const [key, v] of Object.entries(obj)) {
    const f = keys.get(key);
    if (!f) {
      const known = schema.fields.map((x) => x.name).join(', ') || 'none';
      throw new SpecError(
        'STUB_SPEC_UNKNOWN_KEY',
        `${path}: unknown key "${key}" in ${schema.name} (known fields: ${known})`,
      );
    }
    const other = seen.get(f.name);
    if (other !== undefined)
      throw new SpecError('STUB_SPEC_INVALID', `${path}: field ${f.name} given twice ("${other}" and "${key}")`);
    seen.set(f.name, key);
    if (v === null || v === undefined) continue;
    const p = `${path}.${key}`;
    if (f.repeated) {
      if (!Array.isArray(v)) throw bad(p, 'a list', v);
      out[f.name] = v.map((x, i) => scalarFromPlain(f, x, `${p}[${i}]`));
    } else out[f.name] = scalarFromPlain(f, v, p);
  }
  return out;
}

const INT_RANGE = {
  int32: [-0x8000_0000, 0x7fff_ffff],
  uint32: [0, 0xffff_ffff],
  enum: [-0x8000_0000, 0x7fff_ffff],
} as const;

function scalarFromPlain(f: FieldSchema, v: unknown, path: string): unknown {
  switch (f.kind) {
    case 'string':
      if (typeof v !== 'string') throw bad(path, 'a string (quote values such as "1.10" in YAML)', v);
      return v;
    case 'bool':
      if (typeof v !== 'boolean') throw bad(path, 'true or false', v);
      return v;
    case 'enum':
    case 'int32':
    case 'uint32': {
      if (f.kind === 'enum' && typeof v === 'string') {
        const e = f.enum!.values[v];
        if (e === undefined) throw bad(path, `one of ${Object.keys(f.enum!.values).join(', ')} or a number`, v);
        return e;
      }
      const n = typeof v === 'bigint' ? Number(v) : v;
      const [lo, hi] = INT_RANGE[f.kind];
      if (typeof n !== 'number' || !Number.isInteger(n) || n < lo || n > hi)
        throw bad(path, `an ${f.kind === 'enum' ? 'enum number' : f.kind}`, v);
      return n;
    }
    case 'uint64': {
      let n: bigint | undefined;
      if (typeof v === 'bigint') n = v;
      else if (typeof v === 'number' && Number.isSafeInteger(v)) n = BigInt(v);
      else if (typeof v === 'string' && /^[0-9]+$/.test(v)) n = BigInt(v);
      if (n === undefined || n < 0n || n >= 1n << 64n)
        throw bad(
          path,
          'a uint64 (an integer below 2^53, a bigint or a decimal string; parse YAML with intAsBigInt)',
          v,
        );
      return n;
    }
    case 'bytes':
      if (v instanceof Uint8Array) return v.slice();
      if (typeof v === 'string') {
        if (!/^[A-Za-z0-9+/\-_]*={0,2}$/.test(v)) throw bad(path, 'base64', v);
        return new Uint8Array(Buffer.from(v, 'base64'));
      }
      if (Array.isArray(v) && v.every((x) => Number.isInteger(x) && x >= 0 && x <= 255))
        return Uint8Array.from(v as number[]);
      throw bad(path, 'base64 bytes', v);
    case 'timestamp':
      return timestampFromPlain(v, path);
    case 'message':
      return messageFromPlain(f.message!(), v, path);
    case 'map': {
      if (!isPlainObject(v)) throw bad(path, 'a map of strings', v);
      const m: Record<string, string> = {};
      for (const [k, x] of Object.entries(v)) {
        if (typeof x !== 'string') throw bad(`${path}.${k}`, 'a string', x);
        m[k] = x;
      }
      return m;
    }
  }
}

function timestampFromPlain(v: unknown, path: string): string {
  try {
    if (typeof v === 'string') return formatTimestamp(parseTimestamp(v));
    if (v instanceof Date) {
      if (Number.isNaN(v.getTime())) throw bad(path, 'a valid date', v);
      const ms = BigInt(v.getTime());
      const seconds = ms / 1000n - (ms % 1000n < 0n ? 1n : 0n);
      return formatTimestamp({ seconds, nanos: Number(ms - seconds * 1000n) * 1_000_000 });
    }
    if (isPlainObject(v)) {
      for (const k of Object.keys(v))
        if (k !== 'seconds' && k !== 'nanos') {
          throw new SpecError(
            'STUB_SPEC_UNKNOWN_KEY',
            `${path}: unknown key "${k}" in google.protobuf.Timestamp (known fields: seconds, nanos)`,
          );
        }
      const s = v['seconds'] ?? 0;
      const n = v['nanos'] ?? 0;
      const seconds =
        typeof s === 'bigint'
          ? s
          : typeof s === 'number' && Number.isSafeInteger(s)
            ? BigInt(s)
            : typeof s === 'string' && /^-?[0-9]+$/.test(s)
              ? BigInt(s)
              : undefined;
      const nanos = typeof n === 'bigint' ? Number(n) : n;
      if (seconds === undefined || typeof nanos !== 'number') throw bad(path, 'integer seconds and nanos', v);
      return formatTimestamp({ seconds, nanos });
    }
  } catch (e) {
    if (e instanceof SpecError)
      throw new SpecError(
        e.code as 'STUB_SPEC_INVALID',
        e.message.startsWith(path) ? e.message : `${path}: ${e.message}`,
      );
    throw e;
  }
  throw bad(path, 'an RFC 3339 timestamp', v);
}

// ---------------------------------------------------------------------------------------------

export function specToPlain<T>(schema: MessageSchema<T>, value: T, style: PlainStyle): Record<string, unknown> {
  return messageToPlain(schema, value as SpecValue, style);
}

function messageToPlain(schema: AnySchema, value: SpecValue, style: PlainStyle): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of schema.fields) {
    const key = style === 'omnictl' ? omnictlKey(f.name) : f.name;
    const v = value[f.name];
    if (f.repeated) {
      const list = (v ?? []) as unknown[];
      if (style === 'omnictl' || list.length > 0) out[key] = list.map((x) => scalarToPlain(f, x, style));
      continue;
    }
    if (v === undefined || v === null) {
      if (style === 'omnictl')
        out[key] = f.kind === 'message' || f.kind === 'timestamp' ? null : scalarToPlain(f, zeroPlain(f), style);
      continue;
    }
    if (style !== 'omnictl' && isZeroScalar(f, v)) continue;
    out[key] = scalarToPlain(f, v, style);
  }
  return out;
}

function zeroPlain(f: FieldSchema): unknown {
  switch (f.kind) {
    case 'string':
      return '';
    case 'bool':
      return false;
    case 'uint64':
      return 0n;
    case 'bytes':
      return new Uint8Array(0);
    case 'map':
      return {};
    default:
      return 0;
  }
}

function isZeroScalar(f: FieldSchema, v: unknown): boolean {
  switch (f.kind) {
    case 'string':
    case 'bool':
    case 'int32':
    case 'uint32':
    case 'enum':
    case 'uint64':
      return v === '' || v === false || v === 0 || v === 0n;
    case 'bytes':
      return v instanceof Uint8Array && v.length === 0;
    case 'map':
      return Object.keys(v as object).length === 0;
    default:
      return false;
  }
}

function scalarToPlain(f: FieldSchema, v: unknown, style: PlainStyle): unknown {
  switch (f.kind) {
    case 'uint64': {
      const n = v as bigint;
      if (style !== 'omnictl') return n.toString();
      return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
    }
    case 'bytes':
      return Buffer.from(v as Uint8Array).toString('base64');
    case 'timestamp': {
      if (style !== 'omnictl') return v;
      const t = parseTimestamp(v as string);
      return { seconds: Number(t.seconds), nanos: t.nanos };
    }
    case 'message':
      return messageToPlain(f.message!(), v as SpecValue, style);
    case 'map':
      return { ...(v as Record<string, string>) };
    case 'enum':
      return style === 'protojson' ? enumName(f, v as number) : v;
    default:
      return v;
  }
}

const enumNames = new WeakMap<object, Map<number, string>>();
function enumName(f: FieldSchema, n: number): string | number {
  const e = f.enum!;
  let names = enumNames.get(e);
  if (!names) {
    // The first name of a number, as protojson writes an aliased value.
    names = new Map();
    for (const [name, no] of Object.entries(e.values)) if (!names.has(no)) names.set(no, name);
    enumNames.set(e, names);
  }
  return names.get(n) ?? n;
}
