// Table-driven description of the protobuf spec messages we read or write (docs/omni-wire.md 5).
// A message is a list of fields (number, proto name, kind); adding a message is one table entry in
// messages.ts. No code generation: the codec in codec.ts walks these tables with @bufbuild/protobuf's
// wire primitives.

import { ApiError } from '../errors.js';

export type FieldKind =
  | 'string'
  | 'bool'
  | 'int32'
  | 'uint32'
  /** Decoded as `bigint` (exact; the provider compares install event IDs). */
  | 'uint64'
  | 'bytes'
  /** Decoded as the enum's number; unknown numbers are kept as they are (proto3 open enums). */
  | 'enum'
  /** google.protobuf.Timestamp, decoded as an RFC 3339 UTC string the way Omni's gateway prints it. */
  | 'timestamp'
  | 'message'
  /** map<string, string>. */
  | 'map';

export interface EnumSchema {
  name: string;
  values: Readonly<Record<string, number>>;
}

export interface FieldSchema {
  no: number;
  /** The proto field name (snake_case). */
  name: string;
  kind: FieldKind;
  repeated?: boolean;
  enum?: EnumSchema;
  /** Lazily resolved so that tables may refer to each other in any order. */
  message?: () => MessageSchema<unknown>;
}

/** `T` is the decoded value's TypeScript shape; it only guides the generic API's types. */
export interface MessageSchema<T = SpecValue> {
  /** The proto message name, e.g. `specs.InfraMachineSpec`; used in error messages. */
  readonly name: string;
  /** Sorted by field number. */
  readonly fields: readonly FieldSchema[];
  /** Phantom member carrying `T`; never set at run time. */
  readonly __value?: T;
}

/** A decoded message: plain object keyed by proto field names. */
export type SpecValue = Record<string, unknown>;

/** A field we do not know, kept as the exact bytes read (tag included) so it can be re-emitted verbatim. */
export interface UnknownField {
  no: number;
  wireType: number;
  data: Uint8Array;
}

/**
 * Decoded messages carry the unknown fields read with them under this (non-enumerable) key, so that
 * decode -> mutate in place -> encode keeps them. Spreading a value (`{...v}`) drops it: pass the
 * unknown fields to encodeSpec explicitly, or use updateSpec.
 */
export const UNKNOWN_FIELDS: unique symbol = Symbol('stub-provider.unknownFields');

export function unknownFieldsOf(value: object): UnknownField[] {
  return (value as { [UNKNOWN_FIELDS]?: UnknownField[] })[UNKNOWN_FIELDS] ?? [];
}

export function attachUnknownFields<T extends object>(value: T, unknown: UnknownField[]): T {
  Object.defineProperty(value, UNKNOWN_FIELDS, {
    value: unknown,
    enumerable: false,
    writable: true,
    configurable: true,
  });
  return value;
}

/** A spec value, plain object or byte string that does not fit its schema. */
export class SpecError extends ApiError {
  constructor(code: SpecErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'SpecError';
  }
}
export type SpecErrorCode =
  /** Bytes that are not a valid encoding of the message. */
  | 'STUB_SPEC_DECODE'
  /** A value of the wrong type or out of range. */
  | 'STUB_SPEC_INVALID'
  /** A plain object (scenario file, omnictl dump) with a key the message does not have. */
  | 'STUB_SPEC_UNKNOWN_KEY';

// ---------------------------------------------------------------------------------------------
// Table builders

export function defineEnum<const V extends Record<string, number>>(
  name: string,
  values: V,
): EnumSchema & { values: V } {
  return { name, values };
}

export function defineMessage<T>(name: string, fields: FieldSchema[]): MessageSchema<T> {
  const seen = new Set<number>();
  for (const f of fields) {
    if (seen.has(f.no)) throw new Error(`${name}: field number ${f.no} used twice`);
    seen.add(f.no);
    if (f.kind === 'enum' && !f.enum) throw new Error(`${name}.${f.name}: enum field without enum`);
    if (f.kind === 'message' && !f.message) throw new Error(`${name}.${f.name}: message field without schema`);
  }
  return { name, fields: [...fields].sort((a, b) => a.no - b.no) };
}

type Opts = { repeated?: boolean };
const field = (no: number, name: string, kind: FieldKind, o?: Opts): FieldSchema => ({
  no,
  name,
  kind,
  ...(o?.repeated ? { repeated: true } : {}),
});

export const F = {
  string: (no: number, name: string, o?: Opts) => field(no, name, 'string', o),
  bool: (no: number, name: string) => field(no, name, 'bool'),
  int32: (no: number, name: string, o?: Opts) => field(no, name, 'int32', o),
  uint32: (no: number, name: string, o?: Opts) => field(no, name, 'uint32', o),
  uint64: (no: number, name: string, o?: Opts) => field(no, name, 'uint64', o),
  bytes: (no: number, name: string) => field(no, name, 'bytes'),
  timestamp: (no: number, name: string) => field(no, name, 'timestamp'),
  map: (no: number, name: string) => field(no, name, 'map'),
  enum: (no: number, name: string, e: EnumSchema, o?: Opts): FieldSchema => ({
    ...field(no, name, 'enum', o),
    enum: e,
  }),
  message: (no: number, name: string, m: () => MessageSchema<unknown>, o?: Opts): FieldSchema => ({
    ...field(no, name, 'message', o),
    message: m,
  }),
};

/** The key `omnictl get -o yaml` prints: the Go field name in lower case, i.e. the proto name without underscores. */
export function omnictlKey(protoName: string): string {
  return protoName.replaceAll('_', '').toLowerCase();
}
