// Label and ID queries with the semantics of docs/omni-wire.md 2.6: label queries OR-ed, terms inside a
// query AND-ed; EQUAL/LT* read value[0]; comparisons never match a missing or non-numeric label,
// even inverted; *_NUMERIC read units as COSI does (numericValue); the ID regexp is unanchored.
//
// The errors are raised when a query is compiled, i.e. before any resource is looked at, as the COSI
// server converts the whole query up front: an unknown operator is Unimplemented, EQUAL/LT* with an
// empty value list index an empty slice (a recovered panic: Internal), a bad regexp is InvalidArgument.
//
// Approximation: Go uses RE2; we use JS RegExp after rejecting what RE2 does not have (look-around,
// back-references) and translating what JS spells differently (`(?P<name>`, leading `(?flags)`).

import type { Metadata } from '../../omni-api/resource.js';
import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import { LabelTermOperation as Op } from '../../omni-api/wire.js';
import type { LabelTermQ, Query } from '../api.js';

export const EMPTY_QUERY: Query = { labelQueries: [], idRegexp: '' };

export type Matcher = (md: Metadata) => boolean;

export function isEmptyQuery(q: Query): boolean {
  return q.labelQueries.length === 0 && q.idRegexp === '';
}

/** The Query of decoded wire `label_query` (list of `{terms}`) and `id_query` (`{regexp}` or undefined). */
export function queryFromWire(labelQuery: unknown, idQuery: unknown): Query {
  const lq = Array.isArray(labelQuery) ? labelQuery : [];
  return {
    labelQueries: lq.map((q) => {
      const terms = ((q as { terms?: unknown[] } | undefined)?.terms ?? []) as Record<string, unknown>[];
      return terms.map((t) => ({
        key: String(t['key'] ?? ''),
        op: Number(t['op'] ?? 0),
        value: [...((t['value'] as string[] | undefined) ?? [])],
        invert: Boolean(t['invert']),
      }));
    }),
    idRegexp: String((idQuery as { regexp?: unknown } | undefined)?.regexp ?? ''),
  };
}

const RE2_UNSUPPORTED: [RegExp, string][] = [
  [/\(\?<?[=!]/, 'invalid or unsupported Perl syntax: `(?=`'],
  [/\\[1-9]/, 'invalid escape sequence: `\\1`'],
];

/** Compiles an RE2-style pattern to a JS RegExp, or throws InvalidArgument. */
export function compileIdRegexp(pattern: string): RegExp {
  const fail = (why: string) => errorFromStatus(GrpcCode.InvalidArgument, `error parsing regexp: ${why}`);
  for (const [re, why] of RE2_UNSUPPORTED) if (re.test(pattern)) throw fail(why);
  let flags = '';
  let src = pattern.replace(/\(\?P</g, '(?<');
  const lead = /^\(\?([imsU]+)\)/.exec(src);
  if (lead) {
    const f = lead[1] ?? '';
    if (f.includes('U')) throw fail('invalid or unsupported Perl syntax: `(?U`');
    flags = [...new Set(f)].join('');
    src = src.slice(lead[0].length);
  }
  try {
    return new RegExp(src, flags);
  } catch (e) {
    throw fail((e as Error).message);
  }
}

/** Unit suffixes COSI's numeric comparison understands: two-letter binary ones first, then decimal. */
const BINARY_UNITS: Record<string, bigint> = {
  pi: 1n << 50n,
  ti: 1n << 40n,
  gi: 1n << 30n,
  mi: 1n << 20n,
  ki: 1n << 10n,
};
const DECIMAL_UNITS: Record<string, bigint> = {
  p: 10n ** 15n,
  t: 10n ** 12n,
  g: 10n ** 9n,
  m: 10n ** 6n,
  k: 10n ** 3n,
};

/**
 * A label value as COSI's `*_NUMERIC` operators read it: the value trimmed, its leading run of digits
 * and `-` parsed as a 64-bit integer, times the unit that follows (`Ki`..`Pi` binary, `k`..`p`
 * decimal, case-insensitive, checked on the first two or one letters; nothing = 1). "10kg" is 10 000,
 * "10GiB" 10 * 2^30. Undefined (never matches) when there are no digits, they do not parse ("1-2"),
 * or the rest is not a unit ("5x").
 */
export function numericValue(s: string): bigint | undefined {
  const v = s.trim();
  const digits = /^[0-9-]*/.exec(v)?.[0] ?? '';
  if (!/^-?[0-9]+$/.test(digits)) return undefined;
  const n = BigInt(digits);
  if (n < -(2n ** 63n) || n >= 2n ** 63n) return undefined;
  const unit = v.slice(digits.length).trim().toLowerCase();
  if (unit === '') return n;
  const mult = BINARY_UNITS[unit.slice(0, 2)] ?? DECIMAL_UNITS[unit.slice(0, 1)];
  return mult === undefined ? undefined : BigInt.asIntN(64, n * mult);
}

function compileTerm(t: LabelTermQ): Matcher {
  const needValue = (): string => {
    const v = t.value[0];
    if (v === undefined)
      throw errorFromStatus(GrpcCode.Internal, 'runtime error: index out of range [0] with length 0');
    return v;
  };
  const withLabel =
    (present: (value: string) => boolean): Matcher =>
    (md) => {
      if (!Object.hasOwn(md.labels, t.key)) return t.invert;
      return present(md.labels[t.key] ?? '') !== t.invert;
    };
  // Comparisons: a missing label (or a non-numeric one for *_NUMERIC) never matches, inverted or not.
  const compare =
    (cmp: (value: string) => boolean | undefined): Matcher =>
    (md) => {
      if (!Object.hasOwn(md.labels, t.key)) return false;
      const r = cmp(md.labels[t.key] ?? '');
      return r === undefined ? false : r !== t.invert;
    };
  const numeric = (want: string, le: boolean) => {
    const w = numericValue(want);
    return (v: string): boolean | undefined => {
      const n = numericValue(v);
      if (n === undefined || w === undefined) return undefined;
      return le ? n <= w : n < w;
    };
  };
  switch (t.op) {
    case Op.EXISTS:
      return withLabel(() => true);
    case Op.NOT_EXISTS:
      return compileTerm({ ...t, op: Op.EXISTS, invert: !t.invert });
    case Op.EQUAL: {
      const want = needValue();
      return withLabel((v) => v === want);
    }
    case Op.IN: {
      const set = new Set(t.value);
      return withLabel((v) => set.has(v));
    }
    case Op.LT: {
      const want = needValue();
      return compare((v) => v < want);
    }
    case Op.LTE: {
      const want = needValue();
      return compare((v) => v <= want);
    }
    case Op.LT_NUMERIC:
      return compare(numeric(needValue(), false));
    case Op.LTE_NUMERIC:
      return compare(numeric(needValue(), true));
    default:
      throw errorFromStatus(GrpcCode.Unimplemented, `unsupported label query operator: ${t.op}`);
  }
}

/** Compiles a query into a metadata predicate; throws the OmniError Omni would send for a bad query. */
export function compileQuery(q: Query): Matcher {
  const id = q.idRegexp === '' ? undefined : compileIdRegexp(q.idRegexp);
  const ors = q.labelQueries.map((terms) => terms.map(compileTerm));
  return (md) => {
    if (id && !id.test(md.id)) return false;
    if (ors.length === 0) return true;
    return ors.some((ands) => ands.every((m) => m(md)));
  };
}
