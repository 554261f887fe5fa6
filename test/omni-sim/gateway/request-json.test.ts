// Request bodies as Omni's gateway reads them (src/omni-sim/gateway/request-json.ts): Go's encoding/json
// Decoder (the first value, Go's error words) and protojson's positions of refused keys.

import { describe, expect, it } from 'vitest';
import { firstJsonValue, keyPosition } from '../../../src/omni-sim/gateway/request-json.js';

const goError = (text: string): string => {
  try {
    firstJsonValue(text);
  } catch (e) {
    return (e as Error).message;
  }
  return '(no error)';
};

describe("the first JSON value, as Go's json.Decoder reads it", () => {
  it('takes the first value without the spaces before it and ignores what follows', () => {
    expect(firstJsonValue('  {"a": [1, 2.5e3, -0, "x\\u00e9"]} {"b":2}')).toBe('{"a": [1, 2.5e3, -0, "x\\u00e9"]}');
    expect(firstJsonValue('\n\t ')).toBeUndefined();
    expect(firstJsonValue('')).toBeUndefined();
    expect(firstJsonValue('12')).toBe('12');
  });

  it('says "unexpected EOF" for a value cut short (exchange 57 of the recordings)', () => {
    for (const t of ['{"namespace": ', '{', '[1,', '"abc', '{"a":1', 'tr', '-', '1.', '1e'])
      expect(goError(t), t).toBe('unexpected EOF');
  });

  it.each([
    ['x', "invalid character 'x' looking for beginning of value"],
    ['{1: 2}', "invalid character '1' looking for beginning of object key string"],
    ['{"a" 1}', "invalid character '1' after object key"],
    ['{"a": 1 "b": 2}', "invalid character '\"' after object key:value pair"],
    ['[1 2]', "invalid character '2' after array element"],
    ['"a\nb"', "invalid character '\\n' in string literal"],
    ['"\\x"', "invalid character 'x' in string escape code"],
    ['"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"],
    ['-a', "invalid character 'a' in numeric literal"],
    ['[1.x]', "invalid character 'x' after decimal point in numeric literal"],
    ['[1ex]', "invalid character 'x' in exponent of numeric literal"],
    ['nul!', "invalid character '!' in literal null (expecting 'l')"],
    ["{'a': 1}", "invalid character '\\'' looking for beginning of object key string"],
  ])("names the offending byte and where, in Go's words: %s", (text, message) => {
    expect(goError(text)).toBe(message);
  });
});

describe("protojson's position of a key", () => {
  it('is the line and the rune column of the key token, from 1', () => {
    // The recorder's body of exchange 58: `"bogus"` starts at column 95.
    const body =
      '{"namespace": "infra-provider", "type": "InfraProviderStatuses.omni.sidero.dev", "id": "rec", "bogus": 1}';
    expect(keyPosition(body, 'bogus')).toBe('line 1:95');
    expect(keyPosition('{\n  "é": "bogus",\n  "bogus": 1}', 'bogus')).toBe('line 3:3');
    expect(keyPosition('{"a": "bogus"}', 'bogus')).toBeUndefined();
  });
});
