// Design rule 13: escapeControl makes server-chosen text inert for a terminal.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { escapeControl, escapeControlIn, inertJson } from '../../src/untrusted.js';

// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/u;

describe('escapeControl', () => {
  it('writes ESC, CR, LF and tab as visible escapes, so a string can neither clear the screen nor forge a line', () => {
    const forged = 'm-1\x1b[2J\x1b[H\r\nDeregistration: deregistered\n';
    const out = escapeControl(forged);
    expect(out).toBe('m-1\\x1b[2J\\x1b[H\\r\\nDeregistration: deregistered\\n');
    expect(out).not.toMatch(/[\x1b\r\n]/); // eslint-disable-line no-control-regex
    expect(escapeControl('a\tb\x00c\x07d\x7f')).toBe('a\\tb\\x00c\\x07d\\x7f');
  });

  it('escapes the C1 controls (8-bit CSI, NEL), bidi controls and the Unicode line separators', () => {
    expect(escapeControl('\u009b2J\u0085x')).toBe('\\x9b2J\\x85x');
    expect(escapeControl('abc\u202edcba\u2066\u2069\u200e\u200f\u061c')).toBe('abc\\u202edcba\\u2066\\u2069\\u200e\\u200f\\u061c');
    expect(escapeControl('one\u2028two\u2029three')).toBe('one\\u2028two\\u2029three');
  });

  it('leaves ordinary text alone: IDs, accents, CJK, emoji, backslashes, quotes', () => {
    for (const s of ['bare-metal.InfraMachineController', '9b2f6a10-0c1d-4e5f-8a9b-112233445566', 'Müller café', '機械', '🙂 ok', 'C:\\path "quoted"', '']) {
      expect(escapeControl(s)).toBe(s);
    }
  });

  it('property: the result never holds an unsafe character, and text without one comes back unchanged', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (s) => {
      const out = escapeControl(s);
      expect(UNSAFE.test(out)).toBe(false);
      if (!UNSAFE.test(s)) expect(out).toBe(s);
    }), { numRuns: 500 });
  });
});

describe('escapeControlIn', () => {
  it('escapes every string of a JSON-shaped value, keys included, and keeps numbers, booleans and null', () => {
    const v = { id: 'a\x1bb', n: 3, ok: true, none: null, labels: { 'k\ny': 'v\r' }, list: ['x\u202e', 1] };
    expect(escapeControlIn(v)).toEqual({ id: 'a\\x1bb', n: 3, ok: true, none: null, labels: { 'k\\ny': 'v\\r' }, list: ['x\\u202e', 1] });
    expect(v.id).toBe('a\x1bb');
  });
});

describe('inertJson', () => {
  it('writes what JSON.stringify leaves raw (C1, DEL, bidi, U+2028/9) as \\uXXXX: the same value, valid JSON, no raw unsafe character', () => {
    fc.assert(fc.property(fc.jsonValue(), fc.string({ unit: 'binary' }), (v, s) => {
      const value = { v, s, [s]: s };
      const text = inertJson(JSON.stringify(value));
      expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
      expect(UNSAFE.test(text)).toBe(false);
    }), { numRuns: 300 });
    expect(inertJson(JSON.stringify({ id: 'x\u009b2J\u202e' }))).toBe('{"id":"x\\u009b2J\\u202e"}');
  });
});
