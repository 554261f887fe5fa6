// Text that came from outside (Omni, a proxy, a BMC, a command) made inert before a person reads it
// (design.md rule 13): a resource ID, an error message or a header with ESC, CR or LF in it must not
// clear the screen, move the cursor or forge a line of our own output.

/**
 * What a terminal or a viewer would act on: C0 controls (tab, CR and LF included), DEL, C1 controls,
 * the line and paragraph separators U+2028/U+2029, the bidirectional marks, embeddings, overrides and
 * isolates (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), and lone surrogates (printed as
 * U+FFFD, they would make two different strings look the same).
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(c: string): string {
  const short = SHORT[c];
  if (short !== undefined) return short;
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `s` with every character of UNSAFE written as a visible escape (`\n`, `\x1b`, `\u202e`); everything
 * else, non-ASCII letters included, as it is. A backslash is left alone, so escaping twice changes
 * nothing: code that escapes at different layers (an error message, then the report) cannot double it.
 * The escapes are for reading, not a reversible encoding; JSON output stays JSON and needs none.
 */
export function escapeControl(s: string): string {
  UNSAFE.lastIndex = 0;
  // Most text (IDs, Omni's messages) has nothing to escape: test once, allocate nothing.
  if (!UNSAFE.test(s)) return s;
  UNSAFE.lastIndex = 0;
  return s.replace(UNSAFE, escapeOne);
}
