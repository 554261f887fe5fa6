import { describe, expect, it } from 'vitest';
import { newMetadata, type Metadata } from '../../../src/omni-api/resource.js';
import { LabelTermOperation as Op } from '../../../src/omni-api/wire.js';
import { compileIdRegexp, compileQuery, numericValue, queryFromWire } from '../../../src/omni-sim/store/query.js';
import type { LabelTermQ } from '../../../src/omni-sim/api.js';

const md = (id: string, labels: Record<string, string> = {}): Metadata =>
  newMetadata({ namespace: 'ns', type: 'T', id }, { labels });
const term = (key: string, op: number, value: string[] = [], invert = false): LabelTermQ => ({
  key,
  op,
  value,
  invert,
});
const q1 = (...terms: LabelTermQ[]) => compileQuery({ labelQueries: [terms], idRegexp: '' });

describe('label terms (docs/omni-wire.md 2.6)', () => {
  const withA = md('x', { a: '5', s: 'beta', size: '10GiB' });
  const none = md('y');

  it('EXISTS / NOT_EXISTS, with invert', () => {
    expect(q1(term('a', Op.EXISTS))(withA)).toBe(true);
    expect(q1(term('a', Op.EXISTS))(none)).toBe(false);
    expect(q1(term('a', Op.EXISTS, [], true))(none)).toBe(true);
    expect(q1(term('a', Op.NOT_EXISTS))(none)).toBe(true);
    expect(q1(term('a', Op.NOT_EXISTS))(withA)).toBe(false);
  });

  it('EQUAL uses value[0]; a missing label is false, true when inverted', () => {
    expect(q1(term('a', Op.EQUAL, ['5', 'ignored']))(withA)).toBe(true);
    expect(q1(term('a', Op.EQUAL, ['6']))(withA)).toBe(false);
    expect(q1(term('a', Op.EQUAL, ['6'], true))(withA)).toBe(true);
    expect(q1(term('a', Op.EQUAL, ['5']))(none)).toBe(false);
    expect(q1(term('a', Op.EQUAL, ['5'], true))(none)).toBe(true);
  });

  it('IN uses the whole list', () => {
    expect(q1(term('s', Op.IN, ['alpha', 'beta']))(withA)).toBe(true);
    expect(q1(term('s', Op.IN, ['alpha']))(withA)).toBe(false);
    expect(q1(term('s', Op.IN, ['alpha'], true))(none)).toBe(true);
  });

  it('LT/LTE compare strings; comparisons never match a missing label, even inverted', () => {
    expect(q1(term('s', Op.LT, ['gamma']))(withA)).toBe(true);
    expect(q1(term('s', Op.LTE, ['beta']))(withA)).toBe(true);
    expect(q1(term('s', Op.LT, ['beta']))(withA)).toBe(false);
    expect(q1(term('s', Op.LT, ['beta'], true))(withA)).toBe(true);
    expect(q1(term('s', Op.LT, ['zzz']))(none)).toBe(false);
    expect(q1(term('s', Op.LT, ['zzz'], true))(none)).toBe(false);
  });

  it('*_NUMERIC parse an integer with a unit as COSI does; non-numeric never matches, even inverted', () => {
    expect(q1(term('a', Op.LT_NUMERIC, ['10']))(withA)).toBe(true); // "5" < "10" numerically, not as strings
    expect(q1(term('a', Op.LT, ['10']))(withA)).toBe(false);
    // COSI's conformance suite (TestLabels): "10kg" is 10 000, "20kg" 20 000; GiB is binary.
    expect(q1(term('size', Op.LTE_NUMERIC, ['10']))(withA)).toBe(false);
    expect(q1(term('size', Op.LTE_NUMERIC, ['10Gi']))(withA)).toBe(true);
    expect(q1(term('size', Op.LT_NUMERIC, ['10737418240']))(withA)).toBe(false);
    expect([' 10kg', '20kg', '1Mi', '-3', '5x', '1-2', '+5', 'k'].map(numericValue)).toEqual([
      10_000n,
      20_000n,
      1_048_576n,
      -3n,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(q1(term('s', Op.LT_NUMERIC, ['10']))(withA)).toBe(false);
    expect(q1(term('s', Op.LT_NUMERIC, ['10'], true))(withA)).toBe(false);
  });

  it('terms are AND-ed, queries OR-ed', () => {
    const both = compileQuery({ labelQueries: [[term('a', Op.EXISTS), term('s', Op.EQUAL, ['nope'])]], idRegexp: '' });
    expect(both(withA)).toBe(false);
    const either = compileQuery({
      labelQueries: [[term('s', Op.EQUAL, ['nope'])], [term('a', Op.EXISTS)]],
      idRegexp: '',
    });
    expect(either(withA)).toBe(true);
  });

  it('errors: empty value for EQUAL/LT* is Internal, unknown op Unimplemented, raised at compile time', () => {
    for (const op of [Op.EQUAL, Op.LT, Op.LTE, Op.LT_NUMERIC, Op.LTE_NUMERIC]) {
      expect(() => q1(term('a', op, []))).toThrow(expect.objectContaining({ grpcCode: 13 }));
    }
    expect(() => q1(term('a', Op.IN, []))).not.toThrow();
    expect(() => q1(term('a', 42, ['x']))).toThrow(expect.objectContaining({ grpcCode: 12 }));
  });
});

describe('ID regexp', () => {
  it('is unanchored; empty = no filter', () => {
    const m = compileQuery({ labelQueries: [], idRegexp: 'ab' });
    expect(m(md('xxabyy'))).toBe(true);
    expect(m(md('xxa'))).toBe(false);
    expect(compileQuery({ labelQueries: [], idRegexp: '' })(md('anything'))).toBe(true);
    expect(compileQuery({ labelQueries: [], idRegexp: '^ab$' })(md('xab'))).toBe(false);
  });

  it('invalid or non-RE2 patterns are InvalidArgument', () => {
    for (const bad of ['(', '[a-', 'a(?=b)', '(a)\\1', '(?U)a']) {
      expect(() => compileIdRegexp(bad), bad).toThrow(expect.objectContaining({ grpcCode: 3 }));
    }
  });

  it('accepts RE2 spellings JS lacks', () => {
    expect(compileIdRegexp('(?i)ABC').test('xabc')).toBe(true);
    expect(compileIdRegexp('(?P<n>a)b').test('ab')).toBe(true);
  });
});

describe('queryFromWire', () => {
  it('decodes label_query and id_query', () => {
    const q = queryFromWire([{ terms: [{ key: 'k', op: 1, value: ['v'], invert: true }] }], { regexp: 'x' });
    expect(q).toEqual({ labelQueries: [[{ key: 'k', op: 1, value: ['v'], invert: true }]], idRegexp: 'x' });
    expect(queryFromWire(undefined, undefined)).toEqual({ labelQueries: [], idRegexp: '' });
  });
});
