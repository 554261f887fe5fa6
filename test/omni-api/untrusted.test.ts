import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { escapeControl, escapeControlIn, inertJson } from '../../src/omni-api/untrusted.js';

describe('escapeControl', () => {
  it('leaves ordinary text alone, non-ASCII letters and emoji included', () => {
    for (const s of [
      '',
      'bare-metal',
      '991a4c58-58e9-5a0a-866d-1347b7358eb0',
      'Größe ünd 機械',
      'a 😀 b',
      'back\\slash "quoted"',
    ]) {
      expect(escapeControl(s)).toBe(s);
    }
  });

  it('escapes C0 controls (tab, CR, LF included), DEL and C1 controls', () => {
    expect(escapeControl('a\x1b[2Jb')).toBe('a\\x1b[2Jb');
    expect(escapeControl('x\r\nDeregistration: deregistered')).toBe('x\\r\\nDeregistration: deregistered');
    expect(escapeControl('\t\x00\x07\x7f\x85\x9b')).toBe('\\t\\x00\\x07\\x7f\\x85\\x9b');
  });

  it('escapes line separators, bidi marks, embeddings, overrides and isolates', () => {
    expect(escapeControl('a\u2028b\u2029c')).toBe('a\\u2028b\\u2029c');
    expect(escapeControl('\u202eevil\u202c')).toBe('\\u202eevil\\u202c');
    expect(escapeControl('\u200e\u200f\u061c\u2066\u2067\u2068\u2069\u202a\u202b\u202d')).toBe(
      '\\u200e\\u200f\\u061c\\u2066\\u2067\\u2068\\u2069\\u202a\\u202b\\u202d',
    );
  });

  it('escapes lone surrogates but keeps pairs', () => {
    expect(escapeControl('a\ud800b')).toBe('a\\ud800b');
    expect(escapeControl('a\udc00')).toBe('a\\udc00');
    expect(escapeControl('\ud83d\ude00')).toBe('\ud83d\ude00');
  });

  it('is idempotent, and its output holds no character a terminal acts on', () => {
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.oneof(
            fc.constantFrom('\x1b', '\n', '\u202e', '\ud800', '\udc00', '\\'),
            fc.string({ unit: 'binary', maxLength: 1 }),
          ),
        }),
        (s) => {
          const once = escapeControl(s);
          expect(escapeControl(once)).toBe(once);
          expect(once).not.toMatch(
            // eslint-disable-next-line no-control-regex
            /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/,
          );
          expect(once).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
        },
      ),
    );
  });

  it('is stateless across calls (the global regexp is reset)', () => {
    expect(escapeControl('\x1b')).toBe('\\x1b');
    expect(escapeControl('\x1b')).toBe('\\x1b');
    expect(escapeControl('ab\x1b')).toBe('ab\\x1b');
  });
});

// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/u;

describe('escapeControlIn', () => {
  it('escapes every string of a JSON-shaped value, keys included, and keeps numbers, booleans and null', () => {
    const v = { id: 'a\x1bb', n: 3, ok: true, none: null, labels: { 'k\ny': 'v\r' }, list: ['x\u202e', 1] };
    expect(escapeControlIn(v)).toEqual({
      id: 'a\\x1bb',
      n: 3,
      ok: true,
      none: null,
      labels: { 'k\\ny': 'v\\r' },
      list: ['x\\u202e', 1],
    });
    expect(v.id).toBe('a\x1bb');
  });
});

describe('inertJson', () => {
  it('writes what JSON.stringify leaves raw (C1, DEL, bidi, U+2028/9) as \\uXXXX: same value, valid JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'binary' }), (v, s) => {
        const value = { v, s, [s]: s };
        const text = inertJson(JSON.stringify(value));
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(UNSAFE.test(text)).toBe(false);
      }),
      { numRuns: 300 },
    );
    expect(inertJson(JSON.stringify({ id: 'x\u009b2J\u202e' }))).toBe('{"id":"x\\u009b2J\\u202e"}');
  });
});
