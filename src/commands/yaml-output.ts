// `--output yaml`: the result as YAML, inert for a person who prints it as the JSON is (design rule
// 13): every string holding a character a terminal would act on is double-quoted, where YAML has
// escapes, and written with them (\e, \n, \u202e). Loaded only for -o yaml.

import { Document, visit } from 'yaml';

/** What escapeControl escapes (src/omni-api/untrusted.ts), lone surrogates included. */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]/;
/** What the yaml package leaves raw inside double quotes (it escapes C0 controls and lone surrogates itself). */
// eslint-disable-next-line no-control-regex
const RAW_IN_QUOTES = /[\u0009\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

export function inertYaml(value: unknown): string {
  const doc = new Document(value);
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && UNSAFE.test(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  // Never folded: a line break stays `\n` inside its quotes, so no value can start a line of its own.
  const text = doc.toString({ lineWidth: 0, doubleQuotedMinMultiLineLength: Number.MAX_SAFE_INTEGER });
  // Every such character is inside a double-quoted scalar now, where \uXXXX is its escape.
  return text.replace(RAW_IN_QUOTES, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
